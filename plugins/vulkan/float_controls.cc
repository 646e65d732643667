// SPDX-License-Identifier: Apache-2.0
#include "float_controls.h"

#include <backplane/backplane.hpp>
#include <cstring>
#include <string>

namespace backplane {
namespace vulkan {

std::vector<uint32_t> WithFloatControls(const std::vector<uint32_t>& spirv,
                                        const FloatControls& want) {
  constexpr uint32_t kOpExtension = 10, kOpCapability = 17, kOpEntryPoint = 15;
  constexpr uint32_t kOpExecutionMode = 16, kCapFloat16 = 9, kCapFloat64 = 10;
  constexpr uint32_t kCapDenormPreserve = 4464, kCapSpecialsPreserve = 4466;
  constexpr uint32_t kModeDenormPreserve = 4459, kModeSpecialsPreserve = 4461;
  if (spirv.size() < 5) {
    throw Error(BP_ERR_INTERNAL, "vulkan: a kernel's SPIR-V has no header; report it as a bug");
  }
  bool has_float16 = false, has_float64 = false, has_denorm = false, has_specials = false;
  size_t after_capabilities = 0, after_entry_points = 0;
  std::vector<uint32_t> entries;
  for (size_t at = 5; at < spirv.size();) {
    const uint32_t count = spirv[at] >> 16, op = spirv[at] & 0xffffu;
    if (count == 0 || at + count > spirv.size()) {
      throw Error(BP_ERR_INTERNAL, "vulkan: a kernel's SPIR-V is damaged (an instruction at word " +
                                       std::to_string(at) + "); report it as a bug");
    }
    if (op == kOpCapability && count >= 2) {
      has_float16 = has_float16 || spirv[at + 1] == kCapFloat16;
      has_float64 = has_float64 || spirv[at + 1] == kCapFloat64;
      has_denorm = has_denorm || spirv[at + 1] == kCapDenormPreserve;
      has_specials = has_specials || spirv[at + 1] == kCapSpecialsPreserve;
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
  // (mode, width) pairs for every entry point.
  std::vector<std::pair<uint32_t, uint32_t>> wanted;
  if (want.denorm32) wanted.emplace_back(kModeDenormPreserve, 32);
  if (want.denorm64 && has_float64) wanted.emplace_back(kModeDenormPreserve, 64);
  if (want.specials16 && has_float16) wanted.emplace_back(kModeSpecialsPreserve, 16);
  if (want.specials32) wanted.emplace_back(kModeSpecialsPreserve, 32);
  if (want.specials64 && has_float64) wanted.emplace_back(kModeSpecialsPreserve, 64);
  if (wanted.empty()) return spirv;
  std::vector<uint32_t> modes;
  bool denorm = false, specials = false;
  for (uint32_t entry : entries) {
    for (const auto& [mode, width] : wanted) {
      modes.insert(modes.end(), {(4u << 16) | kOpExecutionMode, entry, mode, width});
      denorm = denorm || mode == kModeDenormPreserve;
      specials = specials || mode == kModeSpecialsPreserve;
    }
  }
  std::vector<uint32_t> head;
  if (denorm && !has_denorm)
    head.insert(head.end(), {(2u << 16) | kOpCapability, kCapDenormPreserve});
  if (specials && !has_specials) {
    head.insert(head.end(), {(2u << 16) | kOpCapability, kCapSpecialsPreserve});
  }
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
