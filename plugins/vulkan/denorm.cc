// SPDX-License-Identifier: Apache-2.0
#include "denorm.h"

#include <backplane/backplane.hpp>
#include <cstring>
#include <string>

namespace backplane {
namespace vulkan {

std::vector<uint32_t> WithDenormPreserve(const std::vector<uint32_t>& spirv, bool float64) {
  constexpr uint32_t kOpExtension = 10, kOpCapability = 17, kOpEntryPoint = 15;
  constexpr uint32_t kOpExecutionMode = 16, kCapFloat64 = 10, kCapDenormPreserve = 4464;
  constexpr uint32_t kModeDenormPreserve = 4459;
  if (spirv.size() < 5) {
    throw Error(BP_ERR_INTERNAL, "vulkan: a kernel's SPIR-V has no header; report it as a bug");
  }
  bool has_float64 = false, has_capability = false;
  size_t after_capabilities = 0, after_entry_points = 0;
  std::vector<uint32_t> entries;
  for (size_t at = 5; at < spirv.size();) {
    const uint32_t count = spirv[at] >> 16, op = spirv[at] & 0xffffu;
    if (count == 0 || at + count > spirv.size()) {
      throw Error(BP_ERR_INTERNAL, "vulkan: a kernel's SPIR-V is damaged (an instruction at word " +
                                       std::to_string(at) + "); report it as a bug");
    }
    if (op == kOpCapability && count >= 2) {
      has_float64 = has_float64 || spirv[at + 1] == kCapFloat64;
      has_capability = has_capability || spirv[at + 1] == kCapDenormPreserve;
      after_capabilities = at + count;
    }
    if (op == kOpEntryPoint && count >= 3) {
      entries.push_back(spirv[at + 2]);
      after_entry_points = at + count;
    }
    // The module's first section: capabilities, extensions, imports (11), the memory model
    // (14), entry points and execution modes (16, 331).
    if (op != kOpCapability && op != kOpExtension && op != 11 && op != 14 && op != kOpEntryPoint &&
        op != kOpExecutionMode && op != 331) {
      break;
    }
    at += count;
  }
  if (after_capabilities == 0 || after_entry_points == 0) return spirv;
  std::vector<uint32_t> modes;
  for (uint32_t entry : entries) {
    modes.insert(modes.end(), {(4u << 16) | kOpExecutionMode, entry, kModeDenormPreserve, 32});
    if (float64 && has_float64) {
      modes.insert(modes.end(), {(4u << 16) | kOpExecutionMode, entry, kModeDenormPreserve, 64});
    }
  }
  std::vector<uint32_t> head;
  if (!has_capability) head.insert(head.end(), {(2u << 16) | kOpCapability, kCapDenormPreserve});
  if (spirv[1] < 0x10400) {  // before SPIR-V 1.4 the float controls are an extension
    const char name[] = "SPV_KHR_float_controls";  // 22 characters and the NUL: 6 words
    uint32_t words[6] = {};
    std::memcpy(words, name, sizeof(name));
    head.push_back((7u << 16) | kOpExtension);
    head.insert(head.end(), words, words + 6);
  }
  std::vector<uint32_t> out(spirv.begin(),
                            spirv.begin() + static_cast<ptrdiff_t>(after_capabilities));
  out.insert(out.end(), head.begin(), head.end());
  out.insert(out.end(), spirv.begin() + static_cast<ptrdiff_t>(after_capabilities),
             spirv.begin() + static_cast<ptrdiff_t>(after_entry_points));
  out.insert(out.end(), modes.begin(), modes.end());
  out.insert(out.end(), spirv.begin() + static_cast<ptrdiff_t>(after_entry_points), spirv.end());
  return out;
}

}  // namespace vulkan
}  // namespace backplane
