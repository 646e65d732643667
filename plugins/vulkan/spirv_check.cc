// SPDX-License-Identifier: Apache-2.0
#include "spirv_check.h"

#include <algorithm>
#include <map>
#include <set>
#include <spirv-tools/libspirv.hpp>
#include <string>
#include <vector>

namespace backplane {
namespace vulkan {

namespace {

// SPIR-V numbers (the SPIR-V specification, "Binary Form").
constexpr uint32_t kMagic = 0x07230203u;
enum Op : uint32_t {
  kOpEntryPoint = 15,
  kOpExecutionMode = 16,
  kOpTypeInt = 21,
  kOpTypeFloat = 22,
  kOpTypeStruct = 30,
  kOpTypePointer = 32,
  kOpConstant = 43,
  kOpConstantComposite = 44,
  kOpSpecConstant = 50,
  kOpSpecConstantComposite = 51,
  kOpVariable = 59,
  kOpDecorate = 71,
  kOpMemberDecorate = 72,
  kOpConvertPtrToU = 117,
  kOpConvertUToPtr = 120,
  kOpExecutionModeId = 331,
};
constexpr uint32_t kExecutionModelGLCompute = 5;
constexpr uint32_t kModeLocalSize = 17;
constexpr uint32_t kDecorationSpecId = 1;
constexpr uint32_t kDecorationBuiltIn = 11;
constexpr uint32_t kBuiltInWorkgroupSize = 25;
constexpr uint32_t kDecorationBinding = 33;
constexpr uint32_t kDecorationDescriptorSet = 34;
constexpr uint32_t kDecorationOffset = 35;
enum StorageClass : uint32_t {
  kUniformConstant = 0,
  kInput = 1,
  kUniform = 2,
  kOutput = 3,
  kWorkgroup = 4,
  kPrivate = 6,
  kFunction = 7,
  kPushConstant = 9,
  kStorageBuffer = 12,
};

std::string Literal(const std::vector<uint32_t>& w, size_t at, size_t end) {
  std::string s;
  for (size_t i = at; i < end; ++i) {
    for (int b = 0; b < 4; ++b) {
      const char c = static_cast<char>((w[i] >> (8 * b)) & 0xffu);
      if (c == '\0') return s;
      s += c;
    }
  }
  return s;
}

}  // namespace

std::string SpirvInterfaceProblem(const std::vector<uint32_t>& spirv, const KernelLayout& layout) {
  if (spirv.size() < 5 || spirv[0] != kMagic) return "it is not SPIR-V (no magic number)";
  std::string messages;
  spvtools::SpirvTools tools(SPV_ENV_VULKAN_1_1);
  tools.SetMessageConsumer(
      [&messages](spv_message_level_t, const char*, const spv_position_t&, const char* m) {
        if (messages.empty()) messages = m;
      });
  if (!tools.Validate(spirv)) return "its SPIR-V is not valid for Vulkan 1.1: " + messages;

  int entry_points = 0;
  bool local_size_seen = false;
  uint32_t local_size[3] = {0, 0, 0};
  std::map<uint32_t, uint32_t> set_of, binding_of, int_bits, float_bits;
  std::map<uint32_t, std::map<uint32_t, uint32_t>> member_offset;
  std::map<uint32_t, std::vector<uint32_t>> struct_members;
  std::map<uint32_t, std::pair<uint32_t, uint32_t>> pointer;  // id -> (storage class, pointee)
  std::vector<std::pair<uint32_t, uint32_t>> variables;       // (pointer type, id)
  // The WorkgroupSize built-in, which overrides LocalSize: the constants it may be made of.
  std::set<uint32_t> workgroup_size;                     // ids decorated with it
  std::map<uint32_t, uint32_t> constant_value, spec_id;  // OpConstant's; SpecId
  std::set<uint32_t> spec_constants;                     // OpSpecConstant ids
  std::map<uint32_t, std::vector<uint32_t>> composites;  // id -> constituents
  for (size_t at = 5; at < spirv.size();) {
    const uint32_t count = spirv[at] >> 16, op = spirv[at] & 0xffffu;
    if (count == 0 || at + count > spirv.size()) return "its SPIR-V has a damaged instruction";
    const uint32_t* w = &spirv[at];
    switch (op) {
      case kOpEntryPoint:
        ++entry_points;
        if (count < 4 || w[1] != kExecutionModelGLCompute ||
            Literal(spirv, at + 3, at + count) != "main") {
          return "its entry point is not a GLCompute shader named main";
        }
        break;
      case kOpExecutionMode:
        if (count >= 6 && w[2] == kModeLocalSize) {
          local_size_seen = true;
          for (int d = 0; d < 3; ++d) local_size[d] = w[3 + d];
        }
        break;
      case kOpExecutionModeId:
        return "it sets an execution mode by id, which this code generator never writes";
      case kOpTypeInt:
        if (count >= 3) int_bits[w[1]] = w[2];
        break;
      case kOpTypeFloat:
        if (count >= 3) float_bits[w[1]] = w[2];
        break;
      case kOpTypeStruct:
        struct_members[w[1]].assign(w + 2, w + count);
        break;
      case kOpTypePointer:
        if (count >= 4) pointer[w[1]] = {w[2], w[3]};
        break;
      case kOpVariable:
        if (count >= 4) variables.emplace_back(w[1], w[2]);
        break;
      case kOpConstant:
        if (count == 4) constant_value[w[2]] = w[3];
        break;
      case kOpSpecConstant:
        spec_constants.insert(w[2]);
        break;
      case kOpConstantComposite:
      case kOpSpecConstantComposite:
        if (count >= 3) composites[w[2]].assign(w + 3, w + count);
        break;
      case kOpDecorate:
        if (count >= 4 && w[2] == kDecorationSpecId) spec_id[w[1]] = w[3];
        if (count >= 4 && w[2] == kDecorationBuiltIn && w[3] == kBuiltInWorkgroupSize) {
          workgroup_size.insert(w[1]);
        }
        if (count >= 4 && w[2] == kDecorationDescriptorSet) set_of[w[1]] = w[3];
        if (count >= 4 && w[2] == kDecorationBinding) binding_of[w[1]] = w[3];
        break;
      case kOpMemberDecorate:
        if (count >= 5 && w[3] == kDecorationOffset) member_offset[w[1]][w[2]] = w[4];
        break;
      case kOpConvertPtrToU:
      case kOpConvertUToPtr:
        return "it converts between pointers and integers, which this code generator never does";
      default:
        break;
    }
    at += count;
  }
  if (entry_points != 1) return "it has " + std::to_string(entry_points) + " entry points, not 1";
  if (!local_size_seen) return "it has no LocalSize execution mode";
  const bool sized_at_launch =
      layout.local_size[0] == 0 || layout.local_size[1] == 0 || layout.local_size[2] == 0;
  if (workgroup_size.size() > 1) return "it decorates more than one id as the WorkgroupSize";
  if (!workgroup_size.empty()) {
    // The size the driver runs: on an axis sized at launch the specialization constant the
    // runtime sets, on the others the layout's size as a constant.
    auto parts = composites.find(*workgroup_size.begin());
    if (parts == composites.end() || parts->second.size() != 3) {
      return "its WorkgroupSize is not a composite of three constants";
    }
    for (int d = 0; d < 3; ++d) {
      const uint32_t id = parts->second[static_cast<size_t>(d)];
      if (layout.local_size[d] == 0) {
        auto sid = spec_id.find(id);
        if (spec_constants.count(id) == 0 || sid == spec_id.end() ||
            sid->second != kLocalSizeSpecId + static_cast<uint32_t>(d)) {
          return "its WorkgroupSize on axis " + std::to_string(d) +
                 " is not the specialization constant " +
                 std::to_string(kLocalSizeSpecId + static_cast<uint32_t>(d)) +
                 " that the layout sizes at launch";
        }
      } else {
        auto value = constant_value.find(id);
        if (value == constant_value.end() || value->second != layout.local_size[d]) {
          return "its WorkgroupSize on axis " + std::to_string(d) + " is not the layout's " +
                 std::to_string(layout.local_size[d]);
        }
      }
    }
  } else if (sized_at_launch) {
    return "it has no WorkgroupSize built-in, but the layout sizes its workgroup at launch";
  }
  // LocalSize too (the built-in overrides it, but glslang writes both): on an axis sized at
  // launch it holds the specialization constant's default, 1.
  for (int d = 0; d < 3; ++d) {
    if (local_size[d] != std::max(layout.local_size[d], 1u)) {
      return "its workgroup size is " + std::to_string(local_size[0]) + " x " +
             std::to_string(local_size[1]) + " x " + std::to_string(local_size[2]) +
             ", not the layout's " + std::to_string(layout.local_size[0]) + " x " +
             std::to_string(layout.local_size[1]) + " x " + std::to_string(layout.local_size[2]);
    }
  }
  const uint32_t bindings =
      static_cast<uint32_t>(layout.bindings.size()) + (layout.HasChecks() ? 1u : 0u);
  int push_blocks = 0;
  for (const auto& [type, id] : variables) {
    auto p = pointer.find(type);
    if (p == pointer.end()) return "a variable's type is not a pointer";
    const uint32_t storage = p->second.first;
    const bool bound = set_of.count(id) != 0 || binding_of.count(id) != 0;
    switch (storage) {
      case kStorageBuffer:
      case kUniform: {
        auto set = set_of.find(id);
        auto binding = binding_of.find(id);
        if (set == set_of.end() || binding == binding_of.end() || set->second != 0 ||
            binding->second >= bindings) {
          return "it reads a buffer outside the layout's " + std::to_string(bindings) +
                 " bindings of set 0";
        }
        break;
      }
      case kPushConstant: {
        if (++push_blocks > 1) return "it has more than one push-constant block";
        auto members = struct_members.find(p->second.second);
        if (members == struct_members.end()) return "its push constants are not a block";
        for (size_t m = 0; m < members->second.size(); ++m) {
          const uint32_t t = members->second[m];
          const uint32_t bits =
              int_bits.count(t) != 0 ? int_bits[t] : (float_bits.count(t) != 0 ? float_bits[t] : 0);
          auto offsets = member_offset.find(p->second.second);
          if (bits == 0 || offsets == member_offset.end() ||
              offsets->second.count(static_cast<uint32_t>(m)) == 0) {
            return "its push constants hold something other than scalars at known offsets";
          }
          const uint64_t end = uint64_t{offsets->second[static_cast<uint32_t>(m)]} + bits / 8;
          if (end > layout.push_size) {
            return "its push constants reach byte " + std::to_string(end) +
                   " but the layout pushes " + std::to_string(layout.push_size);
          }
        }
        break;
      }
      case kInput:
      case kOutput:
      case kWorkgroup:
      case kPrivate:
      case kFunction:
        if (bound) return "it binds a variable that is not a buffer";
        break;
      default:
        return "it has a variable of storage class " + std::to_string(storage) +
               ", which this code generator never writes";
    }
  }
  for (const auto& [id, target] : pointer) {
    (void)id;
    if (target.first != kStorageBuffer && target.first != kUniform &&
        target.first != kPushConstant && target.first != kInput && target.first != kOutput &&
        target.first != kWorkgroup && target.first != kPrivate && target.first != kFunction) {
      return "it has a pointer of storage class " + std::to_string(target.first) +
             ", which this code generator never writes";
    }
  }
  return "";
}

}  // namespace vulkan
}  // namespace backplane
