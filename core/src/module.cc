// SPDX-License-Identifier: Apache-2.0
// Runtime Modules: a core object around a plugin's bp_module_vtable_t, with imports, and the
// file format that holds a whole module tree.
//
// File format (all integers little-endian):
//   "BPMODULE"  u32 format version (2)  u32 node count
//   node*:      u32 kind length, kind, u64 payload length, payload,
//               u32 import count, u32 import index* (each < this node's index)
//   u64 FNV-1a (64-bit) hash of everything before it
// Nodes are written children first, so the root is the last node and a file can describe no
// cycle. Every length is checked against what is left before it is used. Format 1 differed only
// in its hash, which used a wrong offset basis (1469598103934665603), so files that followed the
// documented FNV-1a did not load; its files are refused with a message to rebuild them.
#include <algorithm>
#include <backplane/hash.hpp>
#include <backplane/ir/limits.hpp>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "build.h"
#include "layers.h"
#include "object.h"
#include "registry.h"
#include "runtime.h"
#include "target.h"

namespace backplane {
namespace core {
namespace {

constexpr char kMagic[8] = {'B', 'P', 'M', 'O', 'D', 'U', 'L', 'E'};
constexpr uint32_t kFormatVersion = 2;
constexpr uint32_t kMaxNodes = 1u << 20;
constexpr size_t kMinVtableSize = offsetof(bp_module_vtable_t, destroy) + sizeof(void*);
// A plugin registers "<prefix><kind>" to declare that modules of `kind` carry native code
// (docs/plugin-guide.md, BP-PLUGIN-11).
constexpr const char* kNativeCodePrefix = "runtime.module.native_code.";

struct ModuleObject final : bp_object {
  ModuleObject(const bp_module_vtable_t& vt, void* s) : bp_object(BP_OBJECT_MODULE), self(s) {
    std::memset(&vtable, 0, sizeof(vtable));
    std::memcpy(&vtable, &vt, std::min(vt.struct_size, sizeof(vtable)));
    vtable.struct_size = sizeof(vtable);
  }
  ~ModuleObject() override {
    if (told_layers) TellLayersOfModule(this, vtable.kind, false);
    imports.clear();
    RunReleaseHook("a module's destroy", vtable.destroy, self);
  }
  bp_module_vtable_t vtable;
  void* const self;
  bool told_layers = false;  // whether layers with on_module were told it was made
  mutable std::mutex mu;     // guards imports
  std::vector<Ref> imports;

  std::vector<Ref> Imports() const {
    std::lock_guard lock(mu);
    return imports;
  }
};

const ModuleObject& AsModule(const bp_object_t* obj, const char* fn) {
  return As<ModuleObject>(obj, BP_OBJECT_MODULE, fn);
}

std::string Who(const ModuleObject& m) {
  return std::string("module of kind '") + m.vtable.kind + "'";
}

// Calls a vtable entry; a failure becomes a CoreError naming the module and the entry.
template <typename Fn, typename... Args>
void Invoke(const ModuleObject& m, const char* entry, Fn fn, Args... args) {
  const uint64_t seq = ErrorSequence();
  bp_status_t st;
  try {
    st = fn(m.self, args...);
  } catch (...) {
    StatusFromCurrentException();
    Fail(BP_ERR_PLUGIN,
         Who(m) + " " + entry + ": threw a C++ exception (" + LastErrorMessage() + ")");
  }
  CheckPluginStatus(st, seq, Who(m) + " " + entry);
}

Ref FindFunction(const ModuleObject& m, const std::string& name, bool query_imports,
                 std::unordered_set<const bp_object_t*>* seen) {
  if (!seen->insert(&m).second) return Ref();
  bp_object_t* f = nullptr;
  Invoke(m, "get_function", m.vtable.get_function, name.c_str(), &f);
  Ref found = Ref::Adopt(f);
  if (found) {
    As<FunctionObject>(found.get(), BP_OBJECT_FUNCTION, Who(m) + " get_function('" + name + "')");
    return found;
  }
  if (!query_imports) return Ref();
  for (const Ref& imp : m.Imports()) {
    Ref r = FindFunction(static_cast<const ModuleObject&>(*imp.get()), name, true, seen);
    if (r) return r;
  }
  return Ref();
}

std::vector<std::string> FunctionNames(const ModuleObject& m) {
  bp_object_t* names = nullptr;
  Invoke(m, "list_functions", m.vtable.list_functions, &names);
  Ref owned = Ref::Adopt(names);
  const auto& arr = As<ArrayObject>(owned.get(), BP_OBJECT_ARRAY, Who(m) + " list_functions");
  std::vector<std::string> out;
  for (const bp_value_t& v : arr.values) {
    if (v.type != BP_VALUE_OBJECT || v.u.v_obj->type() != BP_OBJECT_STRING) {
      Fail(BP_ERR_PLUGIN, Who(m) + " list_functions: every element must be a string object");
    }
    out.push_back(static_cast<const StringObject*>(v.u.v_obj)->text);
  }
  return out;
}

bool Reaches(const bp_object_t* from, const bp_object_t* target) {
  if (from == target) return true;
  for (const Ref& imp : static_cast<const ModuleObject*>(from)->Imports()) {
    if (Reaches(imp.get(), target)) return true;
  }
  return false;
}

std::string ToHex(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%x", v);
  return buf;
}

class Writer {
 public:
  void Bytes(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void U32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void U64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  std::vector<uint8_t>& data() { return out_; }

 private:
  std::vector<uint8_t> out_;
};

class Reader {
 public:
  Reader(const uint8_t* p, size_t n) : p_(p), n_(n) {}
  const uint8_t* Take(size_t k, const char* what) {
    if (k > n_ - pos_) {
      Fail(BP_ERR_INVALID_ARGUMENT, std::string("module file: truncated while reading ") + what +
                                        " at byte " + std::to_string(pos_) + " (needs " +
                                        std::to_string(k) + " bytes, " + std::to_string(n_ - pos_) +
                                        " left)");
    }
    const uint8_t* r = p_ + pos_;
    pos_ += k;
    return r;
  }
  uint32_t U32(const char* what) {
    const uint8_t* b = Take(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b[i]) << (8 * i);
    return v;
  }
  uint64_t U64(const char* what) {
    const uint8_t* b = Take(8, what);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b[i]) << (8 * i);
    return v;
  }
  size_t left() const { return n_ - pos_; }
  size_t pos() const { return pos_; }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
};

// Children first, each module once (imports may be shared).
void Order(const bp_object_t* m, std::unordered_map<const bp_object_t*, uint32_t>* index,
           std::vector<const ModuleObject*>* order) {
  if (index->count(m) != 0) return;
  const auto* mod = static_cast<const ModuleObject*>(m);
  for (const Ref& imp : mod->Imports()) Order(imp.get(), index, order);
  (*index)[m] = static_cast<uint32_t>(order->size());
  order->push_back(mod);
}

// Loads module `at` ("module 2") of kind `kind` from its payload. A kind whose plugin declares
// that its modules carry native code (it registers "runtime.module.native_code.<kind>") is
// refused before its loader runs unless BP_MODULE_LOAD_ALLOW_NATIVE: the loader would write or
// map that code, and once mapped it runs with the host's rights (docs/security.md, "Saved
// modules"). BP_MODULE_LOAD_NO_GLOBAL_CALLS confines the host code of the built-in "ir_host" kind
// to its imports; the other kinds without native code hold kernels, which call nothing by name,
// and native code can reach anything anyway.
Ref LoadOne(const std::string& at, const std::string& kind, const uint8_t* payload, size_t size,
            uint32_t flags, const std::vector<Ref>& imports) {
  if (IsBuiltinModuleKind(kind)) {
    return LoadBuiltinModule(at, kind, payload, size, imports,
                             (flags & BP_MODULE_LOAD_NO_GLOBAL_CALLS) != 0);
  }
  const bool allow_native = (flags & BP_MODULE_LOAD_ALLOW_NATIVE) != 0;
  const std::string loader = "runtime.module.load_from_bytes." + kind;
  std::string looked_at;
  Ref f = Runtime::Get().FindOrLoad(loader, &looked_at);
  if (!f) {
    Fail(BP_ERR_NOT_FOUND, "module file: no loader for modules of kind '" + kind +
                               "': no plugin registered '" + loader + "'" + looked_at +
                               ". Install the plugin that builds '" + kind + "' modules");
  }
  // The loader's plugin is loaded now, so its declaration is registered if it makes one.
  std::string unused;
  if (!allow_native && Runtime::Get().FindOrLoad(std::string(kNativeCodePrefix) + kind, &unused)) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "module file: " + at + " is of kind '" + kind +
             "', which carries native code: a library that runs in this process, with its "
             "rights, as soon as it is loaded. The file's checksum does not say who wrote it, so "
             "native code loads only when the caller allows it: if the file comes from your own "
             "build or a source you trust, load it with BP_MODULE_LOAD_ALLOW_NATIVE "
             "(bp_module_load_with_options; C++: Module::LoadFromBytes(bytes, "
             "ModuleLoadOptions{true}); backplane run --allow-native); otherwise rebuild the "
             "module from its IR (docs/security.md, \"Saved modules\")");
  }
  Ref bytes =
      Ref::Adopt(new BytesObject(std::string(reinterpret_cast<const char*>(payload), size)));
  bp_value_t arg;
  arg.type = BP_VALUE_OBJECT;
  arg.reserved0 = 0;
  arg.u.v_obj = bytes.get();
  // A loader may parse the IR in its payload and walk it, recursively (docs/ir.md, "Limits"):
  // that tree is no deeper than the payload is long, nor than the parser allows. So it runs with
  // the stack such a tree needs, as bp_build does for code generators.
  const int64_t depth = static_cast<int64_t>(
      std::min<size_t>(size, static_cast<size_t>(ir::kMaxTreeDepth + ir::kMaxNesting)));
  bp_value_t r{};
  ir::RunForDepth(depth, [&] { r = CallFunction(f.get(), &arg, 1, loader); });
  Ref result = r.type == BP_VALUE_OBJECT ? Ref::Adopt(r.u.v_obj) : Ref();
  if (!result || result.get()->type() != BP_OBJECT_MODULE) {
    Fail(BP_ERR_PLUGIN, loader + " must return a module object, but returned something else");
  }
  return result;
}

}  // namespace
}  // namespace core
}  // namespace backplane

using namespace backplane::core;  // NOLINT: the C entry points below only

extern "C" {

BP_EXPORT bp_status_t bp_module_create(const bp_module_vtable_t* vtable, void* self,
                                       bp_object_t** out_module) {
  auto destroy_self = [&] {
    if (vtable != nullptr && vtable->struct_size >= kMinVtableSize && vtable->destroy != nullptr) {
      vtable->destroy(self);
    }
  };
  try {
    BP_REQUIRE_ARG(out_module != nullptr, "out_module is null");
    BP_REQUIRE_ARG(vtable != nullptr, "vtable is null");
    if (vtable->struct_size < kMinVtableSize) {
      Fail(BP_ERR_VERSION_MISMATCH, "bp_module_create: bp_module_vtable_t has struct_size " +
                                        std::to_string(vtable->struct_size) +
                                        " but ABI 1.2 needs " + std::to_string(kMinVtableSize));
    }
    const std::string kind = vtable->kind != nullptr ? vtable->kind : "";
    if (kind.empty() || kind.size() > 128 ||
        kind.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           "bp_module_create: kind '" + kind + "' must be 1 to 128 characters of a-z, 0-9 and _");
    }
    if (vtable->get_function == nullptr || vtable->list_functions == nullptr) {
      Fail(BP_ERR_INVALID_ARGUMENT, "bp_module_create: module kind '" + kind +
                                        "' must provide get_function and list_functions");
    }
    auto* m = new ModuleObject(*vtable, self);
    m->told_layers = TellLayersOfModule(m, m->vtable.kind, true);
    *out_module = m;
    return BP_OK;
  } catch (...) {
    bp_status_t st = StatusFromCurrentException();
    destroy_self();
    return st;
  }
}

BP_EXPORT bp_status_t bp_module_kind(const bp_object_t* module, const char** out_kind) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_kind != nullptr, "out_kind is null");
  *out_kind = AsModule(module, "bp_module_kind").vtable.kind;
  BP_API_END
}

BP_EXPORT bp_status_t bp_module_get_function(const bp_object_t* module, const char* name,
                                             int32_t query_imports, bp_object_t** out_func) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(name != nullptr && out_func != nullptr, "name or out_func is null");
  const ModuleObject& m = AsModule(module, "bp_module_get_function");
  std::unordered_set<const bp_object_t*> seen;
  Ref f = FindFunction(m, name, query_imports != 0, &seen);
  if (!f) {
    Fail(BP_ERR_NOT_FOUND, Who(m) + " has no function '" + name + "'" +
                               (query_imports != 0 ? " (its imports were searched too)." : ".") +
                               NearestNames(name, FunctionNames(m)));
  }
  *out_func = WrapModuleFunction(m.vtable.kind, name, std::move(f)).release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_module_list_functions(const bp_object_t* module, bp_object_t** out_names) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_names != nullptr, "out_names is null");
  const ModuleObject& m = AsModule(module, "bp_module_list_functions");
  *out_names = NewStringArray(FunctionNames(m));
  BP_API_END
}

BP_EXPORT bp_status_t bp_module_inspect_source(const bp_object_t* module, const char* format,
                                               bp_object_t** out_source) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_source != nullptr, "out_source is null");
  const ModuleObject& m = AsModule(module, "bp_module_inspect_source");
  *out_source = nullptr;
  if (m.vtable.inspect_source == nullptr) return BP_OK;
  bp_object_t* src = nullptr;
  Invoke(m, "inspect_source", m.vtable.inspect_source, format != nullptr ? format : "", &src);
  Ref owned = Ref::Adopt(src);
  if (owned) As<StringObject>(owned.get(), BP_OBJECT_STRING, Who(m) + " inspect_source");
  *out_source = owned.release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_module_import(bp_object_t* module, bp_object_t* imported) {
  BP_API_BEGIN
  const ModuleObject& m = AsModule(module, "bp_module_import");
  AsModule(imported, "bp_module_import (the imported module)");
  if (Reaches(imported, module)) {
    Fail(BP_ERR_INVALID_ARGUMENT, "bp_module_import: importing this " + Who(m) +
                                      " would make a cycle (it is the module itself or one of "
                                      "the imported module's imports)");
  }
  std::lock_guard lock(m.mu);
  auto& imports = const_cast<ModuleObject&>(m).imports;
  for (const Ref& r : imports) {
    if (r.get() == imported) return BP_OK;  // imported already: importing twice means nothing
  }
  imports.push_back(Ref::Share(imported));
  BP_API_END
}

BP_EXPORT bp_status_t bp_module_imports(const bp_object_t* module, bp_object_t** out_imports) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_imports != nullptr, "out_imports is null");
  std::vector<Ref> imports = AsModule(module, "bp_module_imports").Imports();
  std::vector<bp_value_t> values;
  for (const Ref& r : imports) {
    bp_value_t v;
    v.type = BP_VALUE_OBJECT;
    v.reserved0 = 0;
    v.u.v_obj = r.get();
    values.push_back(v);
  }
  bp_status_t st = bp_array_create(values.data(), values.size(), out_imports);
  if (st != BP_OK) return st;
  BP_API_END
}

BP_EXPORT bp_status_t bp_module_save(const bp_object_t* module, bp_object_t** out_bytes) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_bytes != nullptr, "out_bytes is null");
  AsModule(module, "bp_module_save");
  std::unordered_map<const bp_object_t*, uint32_t> index;
  std::vector<const ModuleObject*> order;
  Order(module, &index, &order);
  Writer w;
  w.Bytes(kMagic, sizeof(kMagic));
  w.U32(kFormatVersion);
  w.U32(static_cast<uint32_t>(order.size()));
  for (const ModuleObject* m : order) {
    if (m->vtable.save_to_bytes == nullptr) {
      Fail(BP_ERR_UNSUPPORTED, Who(*m) +
                                   " cannot be saved: its implementation has no "
                                   "save_to_bytes");
    }
    bp_object_t* b = nullptr;
    Invoke(*m, "save_to_bytes", m->vtable.save_to_bytes, &b);
    Ref owned = Ref::Adopt(b);
    const auto& bytes = As<BytesObject>(owned.get(), BP_OBJECT_BYTES, Who(*m) + " save_to_bytes");
    const std::string kind = m->vtable.kind;
    w.U32(static_cast<uint32_t>(kind.size()));
    w.Bytes(kind.data(), kind.size());
    w.U64(bytes.data.size());
    w.Bytes(bytes.data.data(), bytes.data.size());
    std::vector<Ref> imports = m->Imports();
    w.U32(static_cast<uint32_t>(imports.size()));
    for (const Ref& imp : imports) w.U32(index.at(imp.get()));
  }
  w.U64(backplane::Fnv1a64(w.data().data(), w.data().size()));  // docs/abi.md
  *out_bytes = new BytesObject(std::string(w.data().begin(), w.data().end()));
  BP_API_END
}

}  // extern "C"

namespace backplane {
namespace core {
namespace {

// bp_module_load and bp_module_load_with_options: the file's tree, root last.
Ref LoadModuleFile(const void* data, size_t size, uint32_t flags) {
  LayerChain();  // built first, so that the layers are told of every module this makes
  const auto* p = static_cast<const uint8_t*>(data);
  if (size < sizeof(kMagic) + 8 + 8 || std::memcmp(p, kMagic, sizeof(kMagic)) != 0) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "module file: not a Backplane module (it does not start with "
         "\"BPMODULE\", or is shorter than a header); was it written by "
         "bp_module_save / `backplane build`?");
  }
  Reader r(p, size - 8);
  r.Take(sizeof(kMagic), "the magic");
  // The version comes before the checksum: another format may hash differently (format 1 did).
  const uint32_t version = r.U32("the format version");
  if (version < kFormatVersion) {
    Fail(BP_ERR_VERSION_MISMATCH,
         "module file: written by an older Backplane (format " + std::to_string(version) +
             "); this Backplane reads format " + std::to_string(kFormatVersion) +
             " only: rebuild the module (backplane build, or bp_build and bp_module_save)");
  }
  if (version > kFormatVersion) {
    Fail(BP_ERR_VERSION_MISMATCH, "module file: written by a newer Backplane (format " +
                                      std::to_string(version) + "); this Backplane reads format " +
                                      std::to_string(kFormatVersion) +
                                      ": upgrade Backplane, or build the module with this version");
  }
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) stored |= static_cast<uint64_t>(p[size - 8 + i]) << (8 * i);
  if (backplane::Fnv1a64(p, size - 8) != stored) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "module file: the checksum does not match: the file is "
         "truncated or corrupted; build or copy it again");
  }
  const uint32_t count = r.U32("the module count");
  if (count == 0 || count > kMaxNodes) {
    Fail(BP_ERR_INVALID_ARGUMENT, "module file: it holds " + std::to_string(count) +
                                      " modules; expected 1 to " + std::to_string(kMaxNodes));
  }
  std::vector<Ref> nodes;
  for (uint32_t i = 0; i < count; ++i) {
    const std::string at = "module " + std::to_string(i);
    const uint32_t kind_len = r.U32("a kind length");
    if (kind_len == 0 || kind_len > 128) {
      Fail(BP_ERR_INVALID_ARGUMENT, "module file: " + at + " has a kind of " +
                                        std::to_string(kind_len) + " bytes; expected 1 to 128");
    }
    const uint8_t* kind_bytes = r.Take(kind_len, "a kind");
    const std::string kind(reinterpret_cast<const char*>(kind_bytes), kind_len);
    if (kind.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos) {
      Fail(BP_ERR_INVALID_ARGUMENT, "module file: " + at + " has an invalid kind name");
    }
    const uint64_t payload_len = r.U64("a payload length");
    if (payload_len > r.left()) {
      Fail(BP_ERR_INVALID_ARGUMENT, "module file: " + at + " (kind '" + kind + "') claims " +
                                        std::to_string(payload_len) + " bytes but only " +
                                        std::to_string(r.left()) + " are left");
    }
    const uint8_t* payload = r.Take(static_cast<size_t>(payload_len), "a payload");
    const uint32_t num_imports = r.U32("an import count");
    if (num_imports > i) {
      Fail(BP_ERR_INVALID_ARGUMENT, "module file: " + at + " imports " +
                                        std::to_string(num_imports) + " modules but only " +
                                        std::to_string(i) + " come before it");
    }
    std::vector<uint32_t> imports;
    for (uint32_t k = 0; k < num_imports; ++k) {
      const uint32_t idx = r.U32("an import index");
      if (idx >= i) {
        Fail(BP_ERR_INVALID_ARGUMENT, "module file: " + at + " imports module " +
                                          std::to_string(idx) + ", which does not come before it");
      }
      if (std::find(imports.begin(), imports.end(), idx) != imports.end()) {
        Fail(BP_ERR_INVALID_ARGUMENT,
             "module file: " + at + " imports module " + std::to_string(idx) + " twice");
      }
      imports.push_back(idx);
    }
    std::vector<Ref> imported;
    for (uint32_t idx : imports) imported.push_back(nodes[idx]);
    Ref m = LoadOne(at, kind, payload, static_cast<size_t>(payload_len), flags, imported);
    {
      auto& mod = static_cast<ModuleObject&>(*m.get());
      std::lock_guard lock(mod.mu);
      for (Ref& imp : imported) mod.imports.push_back(std::move(imp));
    }
    nodes.push_back(std::move(m));
  }
  if (r.left() != 0) {
    Fail(BP_ERR_INVALID_ARGUMENT,
         "module file: " + std::to_string(r.left()) + " unexpected bytes after the last module");
  }
  return std::move(nodes.back());
}

}  // namespace
}  // namespace core
}  // namespace backplane

extern "C" {

BP_EXPORT bp_status_t bp_module_load(const void* data, size_t size, bp_object_t** out_module) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_module != nullptr, "out_module is null");
  BP_REQUIRE_ARG(data != nullptr || size == 0, "data is null");
  *out_module = LoadModuleFile(data, size, 0).release();
  BP_API_END
}

BP_EXPORT bp_status_t bp_module_load_with_options(const void* data, size_t size,
                                                  const bp_module_load_options_t* options,
                                                  bp_object_t** out_module) {
  BP_API_BEGIN
  BP_REQUIRE_ARG(out_module != nullptr, "out_module is null");
  BP_REQUIRE_ARG(data != nullptr || size == 0, "data is null");
  // Fields past the caller's struct_size read as zero (an older caller's struct is shorter).
  bp_module_load_options_t o{};
  if (options != nullptr) {
    constexpr size_t kFirstSize = offsetof(bp_module_load_options_t, flags) + sizeof(uint32_t);
    if (options->struct_size < kFirstSize) {
      Fail(BP_ERR_INVALID_ARGUMENT,
           "bp_module_load_with_options: options->struct_size is " +
               std::to_string(options->struct_size) + ", less than the " +
               std::to_string(kFirstSize) +
               " bytes of ABI 1.4's bp_module_load_options_t; zero the struct and set "
               "struct_size to sizeof(bp_module_load_options_t)");
    }
    std::memcpy(&o, options, std::min(options->struct_size, sizeof(o)));
  }
  // An unknown flag may be a restriction a newer caller relies on: refused, not ignored.
  constexpr uint32_t kKnownFlags = BP_MODULE_LOAD_ALLOW_NATIVE | BP_MODULE_LOAD_NO_GLOBAL_CALLS;
  if ((o.flags & ~kKnownFlags) != 0) {
    Fail(BP_ERR_INVALID_ARGUMENT, "bp_module_load_with_options: unknown flags 0x" +
                                      ToHex(o.flags & ~kKnownFlags) +
                                      " (this Backplane knows BP_MODULE_LOAD_ALLOW_NATIVE and "
                                      "BP_MODULE_LOAD_NO_GLOBAL_CALLS only)");
  }
  *out_module = LoadModuleFile(data, size, o.flags).release();
  BP_API_END
}

}  // extern "C"
