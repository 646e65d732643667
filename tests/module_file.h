// SPDX-License-Identifier: Apache-2.0
// A second implementation of the module file format, written from docs/abi.md ("Runtime
// Modules") and not from core/src/module.cc, for the tests: it checks that the core writes what
// the docs say, that a file a third party writes by the docs loads, and it rewrites saved files
// the way an attacker would (change a payload, recompute the checksum) to test what loading
// re-checks.
//
//   bptest::ModuleFile f = bptest::ModuleFile::Parse(module.SaveToBytes());
//   f.nodes.back().payload = tampered;
//   backplane::Module::LoadFromBytes(f.Write());   // the checksum is right: the loader decides
#ifndef BACKPLANE_TESTS_MODULE_FILE_H_
#define BACKPLANE_TESTS_MODULE_FILE_H_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace bptest {

// FNV-1a, 64-bit: offset basis 14695981039346656037, prime 1099511628211.
inline uint64_t Fnv1a64(const std::string& bytes, uint64_t basis = 14695981039346656037ull) {
  uint64_t h = basis;
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

struct ModuleFile {
  struct Node {
    std::string kind;
    std::string payload;
    std::vector<uint32_t> imports;  // indices of earlier nodes
  };
  uint32_t version = 2;
  std::vector<Node> nodes;  // children first: the root is the last

  // The file's bytes; the checksum is FNV-1a 64 of everything before it, unless `basis` says
  // another offset basis (format 1 used 1469598103934665603).
  std::string Write(uint64_t basis = 14695981039346656037ull) const {
    std::string out = "BPMODULE";
    U32(&out, version);
    U32(&out, static_cast<uint32_t>(nodes.size()));
    for (const Node& n : nodes) {
      U32(&out, static_cast<uint32_t>(n.kind.size()));
      out += n.kind;
      U64(&out, n.payload.size());
      out += n.payload;
      U32(&out, static_cast<uint32_t>(n.imports.size()));
      for (uint32_t i : n.imports) U32(&out, i);
    }
    U64(&out, Fnv1a64(out, basis));
    return out;
  }

  // Reads a file (without checking its checksum); throws std::runtime_error if it is not one.
  static ModuleFile Parse(const std::string& bytes) {
    ModuleFile f;
    size_t pos = 0;
    auto take = [&](size_t n) {
      if (n > bytes.size() - pos) throw std::runtime_error("ModuleFile: truncated");
      std::string s = bytes.substr(pos, n);
      pos += n;
      return s;
    };
    auto u64 = [&](size_t n) {
      const std::string b = take(n);
      uint64_t v = 0;
      for (size_t i = 0; i < n; ++i)
        v |= static_cast<uint64_t>(static_cast<uint8_t>(b[i])) << (8 * i);
      return v;
    };
    if (take(8) != "BPMODULE") throw std::runtime_error("ModuleFile: no magic");
    f.version = static_cast<uint32_t>(u64(4));
    const uint64_t count = u64(4);
    for (uint64_t i = 0; i < count; ++i) {
      Node n;
      n.kind = take(u64(4));
      n.payload = take(u64(8));
      const uint64_t imports = u64(4);
      for (uint64_t k = 0; k < imports; ++k) n.imports.push_back(static_cast<uint32_t>(u64(4)));
      f.nodes.push_back(std::move(n));
    }
    if (bytes.size() - pos != 8) throw std::runtime_error("ModuleFile: bytes after the nodes");
    return f;
  }

  // The first node of `kind`; throws if there is none.
  Node& Find(const std::string& kind) {
    for (Node& n : nodes) {
      if (n.kind == kind) return n;
    }
    throw std::runtime_error("ModuleFile: no node of kind " + kind);
  }

 private:
  static void U32(std::string* out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
  }
  static void U64(std::string* out, uint64_t v) {
    for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
  }
};

// Replaces the first occurrence of `from` in `text` by `to`; throws if `from` is absent (so a
// test that tampers with a file fails loudly when the file no longer holds what it rewrites).
inline std::string ReplaceOnce(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("ReplaceOnce: '" + from + "' not found");
  return text.replace(at, from.size(), to);
}

}  // namespace bptest

#endif  // BACKPLANE_TESTS_MODULE_FILE_H_
