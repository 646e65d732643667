// SPDX-License-Identifier: Apache-2.0
// The one hash the project writes: FNV-1a, 64-bit (offset basis 14695981039346656037, prime
// 1099511628211). It is the saved module format's checksum (docs/abi.md, so it must never
// change), the code generators' disk-cache keys and entry checks (backplane/sdk/disk_cache.hpp)
// and the conformance kit's per-clause seeds. Header-only and dependency-free, so the core, the
// SDK's plugin helpers and the programs all reach it without linking anything.
#ifndef BACKPLANE_HASH_HPP_
#define BACKPLANE_HASH_HPP_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace backplane {

// The FNV-1a 64 offset basis and prime.
constexpr uint64_t kFnv1a64Basis = 14695981039346656037ull;
constexpr uint64_t kFnv1a64Prime = 1099511628211ull;

// FNV-1a 64 of `n` bytes at `data`, starting from `h` (the offset basis, or the hash of the
// bytes before these to hash a sequence in pieces, or another basis for a second, independent
// hash of the same bytes).
constexpr uint64_t Fnv1a64(const unsigned char* data, size_t n, uint64_t h = kFnv1a64Basis) {
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * kFnv1a64Prime;
  return h;
}

// FNV-1a 64 of the bytes of `text`.
constexpr uint64_t Fnv1a64(std::string_view text, uint64_t h = kFnv1a64Basis) {
  for (char c : text) h = (h ^ static_cast<unsigned char>(c)) * kFnv1a64Prime;
  return h;
}

}  // namespace backplane

#endif  // BACKPLANE_HASH_HPP_
