// SPDX-License-Identifier: Apache-2.0
// Runtime Modules: functions by name, imports, inspect_source, and the module file format
// (round trips of module trees; every truncation and every flipped byte is an error, never a
// crash), and what BP_MODULE_LOAD_NO_GLOBAL_CALLS lets host code (ir_host) call. The module kind
// here, "test_table", is a small real implementation: a table of named integer constants whose
// functions return them, saved as "name=value" lines ("?name": a name it lists but cannot give,
// as a buggy module kind might).
#include <gtest/gtest.h>

#include <atomic>
#include <backplane/backplane.hpp>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "../module_file.h"

namespace bp = backplane;

namespace {

struct Table {
  std::map<std::string, int64_t> entries;
  bool saveable = true;
  std::set<std::string> listed_only = {};  // listed, but get_function finds nothing
};

std::atomic<int> table_calls{0};  // calls of every table's functions

bp_status_t TableGetFunction(void* self, const char* name, bp_object_t** out) {
  return bp::CatchAtEdge([&] {
    auto* t = static_cast<Table*>(self);
    auto it = t->entries.find(name);
    *out = nullptr;
    if (it == t->entries.end()) return;
    const int64_t value = it->second;
    bp::ObjectRef f = bp::Function::FromCallable([value](bp::PackedArgs) {
                        ++table_calls;
                        bp_value_t v;
                        v.type = BP_VALUE_INT;
                        v.u.v_int64 = value;
                        return bp::Any(v);
                      }).object();
    *out = f.release();  // one reference goes to the caller
  });
}

bp_status_t TableList(void* self, bp_object_t** out) {
  return bp::CatchAtEdge([&] {
    std::vector<std::string> names;
    for (const auto& [k, v] : static_cast<Table*>(self)->entries) names.push_back(k);
    for (const auto& k : static_cast<Table*>(self)->listed_only) names.push_back(k);
    std::vector<bp_value_t> values;
    for (const auto& n : names) {
      bp_value_t v;
      v.type = BP_VALUE_STR;
      v.u.v_str = n.c_str();
      values.push_back(v);
    }
    bp::Check(bp_array_create(values.data(), values.size(), out));
  });
}

std::string Serialize(const Table& t) {
  std::ostringstream os;
  for (const auto& [k, v] : t.entries) os << k << "=" << v << "\n";
  for (const auto& k : t.listed_only) os << "?" << k << "\n";
  return os.str();
}

bp_status_t TableSave(void* self, bp_object_t** out) {
  return bp::CatchAtEdge([&] {
    const std::string text = Serialize(*static_cast<Table*>(self));
    bp::Check(bp_bytes_create(text.data(), text.size(), out));
  });
}

bp_status_t TableSource(void* self, const char* format, bp_object_t** out) {
  return bp::CatchAtEdge([&] {
    *out = nullptr;
    if (std::string(format) != "" && std::string(format) != "table") return;
    const std::string text = Serialize(*static_cast<Table*>(self));
    bp::Check(bp_string_create(text.data(), text.size(), out));
  });
}

const bp_module_vtable_t kTableVtable = {
    .struct_size = sizeof(bp_module_vtable_t),
    .kind = "test_table",
    .get_function = TableGetFunction,
    .list_functions = TableList,
    .save_to_bytes = TableSave,
    .inspect_source = TableSource,
    .destroy = [](void* self) { delete static_cast<Table*>(self); },
};

bp::Module MakeTable(std::map<std::string, int64_t> entries,
                     std::set<std::string> listed_only = {}) {
  auto* t = new Table{std::move(entries)};
  t->listed_only = std::move(listed_only);
  bp_object_t* out = nullptr;
  bp::Check(bp_module_create(&kTableVtable, t, &out));
  return bp::Module(bp::ObjectRef::Adopt(out));
}

// The loader for "test_table" modules, registered once per process.
void RegisterLoader() {
  static bool done = [] {
    bp::Registry::Set("runtime.module.load_from_bytes.test_table",
                      bp::Function::FromCallable([](bp::PackedArgs args) {
                        const void* data = nullptr;
                        size_t size = 0;
                        bp::Check(bp_bytes_get(args[0].u.v_obj, &data, &size));
                        std::map<std::string, int64_t> entries;
                        std::set<std::string> listed_only;
                        std::istringstream in(std::string(static_cast<const char*>(data), size));
                        std::string line;
                        while (std::getline(in, line)) {
                          if (!line.empty() && line[0] == '?') {
                            listed_only.insert(line.substr(1));
                            continue;
                          }
                          auto eq = line.find('=');
                          if (eq == std::string::npos) {
                            throw bp::Error(BP_ERR_INVALID_ARGUMENT, "test_table: bad line");
                          }
                          entries[line.substr(0, eq)] = std::stoll(line.substr(eq + 1));
                        }
                        bp::Module m = MakeTable(std::move(entries), std::move(listed_only));
                        bp_value_t v;
                        v.type = BP_VALUE_OBJECT;
                        v.u.v_obj = m.object().get();
                        bp_object_retain(v.u.v_obj);
                        return bp::Any(v);
                      }));
    return true;
  }();
  (void)done;
}

std::string Message() {
  const char* msg = nullptr;
  bp_error_last(nullptr, &msg);
  return msg;
}

TEST(Module, FunctionsByNameAndSource) {
  bp::Module m = MakeTable({{"alpha", 11}, {"beta", -7}});
  EXPECT_EQ(m.Kind(), "test_table");
  EXPECT_EQ(m.ListFunctions(), (std::vector<std::string>{"alpha", "beta"}));
  EXPECT_EQ(m.GetFunction("beta")().AsInt(), -7);
  EXPECT_EQ(m.InspectSource(), "alpha=11\nbeta=-7\n");
  EXPECT_EQ(m.InspectSource("ptx"), "");
  try {
    m.GetFunction("alpah");
    FAIL();
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("module of kind 'test_table' has no function 'alpah'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("Did you mean 'alpha'"), std::string::npos) << e.what();
  }
}

TEST(Module, ImportsAreSearchedAndCyclesRefused) {
  bp::Module root = MakeTable({{"main", 1}});
  bp::Module lib = MakeTable({{"helper", 2}});
  bp::Module deep = MakeTable({{"leaf", 3}});
  lib.Import(deep);
  root.Import(lib);
  EXPECT_EQ(root.GetFunction("leaf")().AsInt(), 3);
  EXPECT_THROW(root.GetFunction("leaf", /*query_imports=*/false), bp::Error);
  EXPECT_EQ(root.Imports().size(), 1u);
  root.Import(lib);  // again: nothing changes
  EXPECT_EQ(root.Imports().size(), 1u);
  EXPECT_EQ(bp_module_import(deep.object().get(), root.object().get()), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("cycle"), std::string::npos);
  EXPECT_EQ(bp_module_import(root.object().get(), root.object().get()), BP_ERR_INVALID_ARGUMENT);
}

TEST(Module, SaveAndLoadATreeWithASharedImport) {
  RegisterLoader();
  bp::Module shared = MakeTable({{"shared_value", 42}});
  bp::Module a = MakeTable({{"a_value", 1}});
  bp::Module b = MakeTable({{"b_value", 2}});
  a.Import(shared);
  b.Import(shared);
  bp::Module root = MakeTable({{"root_value", 100}});
  root.Import(a);
  root.Import(b);
  const std::string bytes = root.SaveToBytes();
  bp::Module loaded = bp::Module::LoadFromBytes(bytes);
  EXPECT_EQ(loaded.GetFunction("root_value")().AsInt(), 100);
  EXPECT_EQ(loaded.GetFunction("b_value")().AsInt(), 2);
  EXPECT_EQ(loaded.GetFunction("shared_value")().AsInt(), 42);
  ASSERT_EQ(loaded.Imports().size(), 2u);
  // The shared import is one module after loading too.
  EXPECT_EQ(loaded.Imports()[0].Imports()[0].object().get(),
            loaded.Imports()[1].Imports()[0].object().get());
  EXPECT_EQ(loaded.SaveToBytes(), bytes);  // saving again gives the same file
}

TEST(Module, EveryTruncationAndEveryFlippedByteIsAnError) {
  RegisterLoader();
  bp::Module root = MakeTable({{"x", 5}, {"y", 6}});
  root.Import(MakeTable({{"z", 7}}));
  const std::string bytes = root.SaveToBytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    bp_object_t* out = nullptr;
    ASSERT_NE(bp_module_load(bytes.data(), n, &out), BP_OK) << "prefix of " << n << " bytes";
  }
  std::mt19937 rng(5);
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ (1 + rng() % 255));
    bp_object_t* out = nullptr;
    ASSERT_NE(bp_module_load(bad.data(), bad.size(), &out), BP_OK) << "byte " << i;
  }
  bp_object_t* out = nullptr;
  EXPECT_EQ(bp_module_load(bytes.data(), bytes.size() - 1, &out), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("truncated or corrupted"), std::string::npos) << Message();
  EXPECT_EQ(bp_module_load("hello", 5, &out), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("not a Backplane module"), std::string::npos) << Message();
}

TEST(Module, UnknownKindNamesTheLoaderItLookedFor) {
  static const bp_module_vtable_t kOther = {
      .struct_size = sizeof(bp_module_vtable_t),
      .kind = "no_such_kind",
      .get_function = TableGetFunction,
      .list_functions = TableList,
      .save_to_bytes = TableSave,
      .inspect_source = nullptr,
      .destroy = [](void* self) { delete static_cast<Table*>(self); },
  };
  bp_object_t* m = nullptr;
  ASSERT_EQ(bp_module_create(&kOther, new Table{{{"q", 1}}}, &m), BP_OK);
  bp::Module mod{bp::ObjectRef::Adopt(m)};
  EXPECT_EQ(mod.InspectSource(), "");  // no inspect_source: empty
  const std::string bytes = mod.SaveToBytes();
  bp_object_t* out = nullptr;
  EXPECT_EQ(bp_module_load(bytes.data(), bytes.size(), &out), BP_ERR_NOT_FOUND);
  EXPECT_NE(Message().find("runtime.module.load_from_bytes.no_such_kind"), std::string::npos)
      << Message();
}

TEST(Module, UnsaveableAndMalformedImplementationsAreClearErrors) {
  static int destroyed = 0;
  static const bp_module_vtable_t kNoSave = {
      .struct_size = sizeof(bp_module_vtable_t),
      .kind = "test_nosave",
      .get_function = TableGetFunction,
      .list_functions = TableList,
      .save_to_bytes = nullptr,
      .inspect_source = nullptr,
      .destroy =
          [](void* self) {
            ++destroyed;
            delete static_cast<Table*>(self);
          },
  };
  bp_object_t* m = nullptr;
  ASSERT_EQ(bp_module_create(&kNoSave, new Table{}, &m), BP_OK);
  bp_object_t* bytes = nullptr;
  EXPECT_EQ(bp_module_save(m, &bytes), BP_ERR_UNSUPPORTED);
  EXPECT_NE(Message().find("'test_nosave' cannot be saved"), std::string::npos) << Message();
  bp_object_release(m);
  EXPECT_EQ(destroyed, 1);

  bp_module_vtable_t short_table = kNoSave;
  short_table.struct_size = 8;
  // A table too short to hold `destroy` cannot be trusted to free `self`: the caller keeps it.
  auto* kept = new Table{};
  EXPECT_EQ(bp_module_create(&short_table, kept, &m), BP_ERR_VERSION_MISMATCH);
  delete kept;
  bp_module_vtable_t bad_kind = kNoSave;
  bad_kind.kind = "Bad Kind";
  EXPECT_EQ(bp_module_create(&bad_kind, new Table{}, &m), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(destroyed, 2);  // a refused implementation is destroyed, not leaked
}

// The checksum is FNV-1a 64 exactly as docs/abi.md says (format 1 used a wrong offset basis, so a
// file written by the docs did not load), and a file written by an implementation of the docs
// (tests/module_file.h) loads and saves back to the same bytes.
TEST(Module, TheChecksumIsFnv1aAndAFileWrittenByTheDocsLoads) {
  // Known FNV-1a 64 vectors (the reference's test suite): the test's own hash is right.
  EXPECT_EQ(bptest::Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(bptest::Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(bptest::Fnv1a64("foobar"), 0x85944171f73967e8ull);

  RegisterLoader();
  bp::Module root = MakeTable({{"root_value", 3}});
  root.Import(MakeTable({{"leaf_value", 4}}));
  const std::string saved = root.SaveToBytes();
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) {
    stored |= static_cast<uint64_t>(static_cast<uint8_t>(saved[saved.size() - 8 + i])) << (8 * i);
  }
  EXPECT_EQ(stored, bptest::Fnv1a64(saved.substr(0, saved.size() - 8)));

  bptest::ModuleFile f;
  f.nodes.push_back({"test_table", "leaf_value=4\n", {}});
  f.nodes.push_back({"test_table", "root_value=3\n", {0}});
  const std::string written = f.Write();
  EXPECT_EQ(written, saved);
  bp::Module loaded = bp::Module::LoadFromBytes(written);
  EXPECT_EQ(loaded.GetFunction("leaf_value")().AsInt(), 4);
  EXPECT_EQ(loaded.SaveToBytes(), written);
}

// Files of another format version are refused with what to do, before their checksum is read
// (format 1 hashed differently, so "corrupted" would be the wrong message).
TEST(Module, OtherFormatVersionsAreRefusedWithWhatToDo) {
  RegisterLoader();
  bptest::ModuleFile f;
  f.nodes.push_back({"test_table", "x=1\n", {}});
  f.version = 1;
  const std::string old_file = f.Write(/*basis=*/1469598103934665603ull);  // as format 1 wrote it
  bp_object_t* out = nullptr;
  EXPECT_EQ(bp_module_load(old_file.data(), old_file.size(), &out), BP_ERR_VERSION_MISMATCH);
  EXPECT_NE(Message().find("written by an older Backplane (format 1)"), std::string::npos)
      << Message();
  EXPECT_NE(Message().find("rebuild the module"), std::string::npos) << Message();
  f.version = 3;
  const std::string newer = f.Write();
  EXPECT_EQ(bp_module_load(newer.data(), newer.size(), &out), BP_ERR_VERSION_MISMATCH);
  EXPECT_NE(Message().find("written by a newer Backplane (format 3)"), std::string::npos)
      << Message();
  f.version = 2;
  const std::string current = f.Write();
  ASSERT_EQ(bp_module_load(current.data(), current.size(), &out), BP_OK) << Message();
  bp_object_release(out);
}

// BP_MODULE_LOAD_NO_GLOBAL_CALLS: host code (ir_host) may call the functions of the modules it
// imports, never the global registry's. A file whose host code names another function is
// refused when it loads, before anything runs, naming the function and the flag; every ir_host
// module of the file is checked, not only the root; and a loaded module never falls back to the
// registry, even for a name an import lists but does not give. Without the flag host code
// reaches the registry, as bp_build's modules do.
TEST(Module, NoGlobalCallsConfinesHostCodeToItsImports) {
  RegisterLoader();
  static std::atomic<int> global_calls{0};
  static bool registered = [] {
    bp::Registry::Set("test.module.global_fn", bp::Function::FromCallable([](bp::PackedArgs) {
                        ++global_calls;
                        bp_value_t v;
                        v.type = BP_VALUE_INT;
                        v.u.v_int64 = 7;
                        return bp::Any(v);
                      }));
    return true;
  }();
  (void)registered;
  auto host = [](const std::string& body) {
    return "# backplane-ir 1\n\nfunc run(n: int32) {\n" + body + "}\n";
  };
  auto load = [](const std::string& bytes, uint32_t flags, bp::Module* out) {
    bp_module_load_options_t o{};
    o.struct_size = sizeof(o);
    o.flags = flags;
    bp_object_t* m = nullptr;
    const bp_status_t st = bp_module_load_with_options(bytes.data(), bytes.size(), &o, &m);
    if (st == BP_OK) *out = bp::Module(bp::ObjectRef::Adopt(m));
    return st;
  };
  constexpr uint32_t kNoGlobal = BP_MODULE_LOAD_NO_GLOBAL_CALLS;
  EXPECT_EQ(BP_MODULE_LOAD_NO_GLOBAL_CALLS, 0x2u);

  // A kernel of its import and a registered function.
  bptest::ModuleFile both;
  both.nodes.push_back({"test_table", "leaf_value=4\n", {}});
  both.nodes.push_back({"ir_host",
                        host("  call_packed(\"leaf_value\", n)\n"
                             "  call_packed(\"test.module.global_fn\", n)\n"),
                        {0}});
  bp::Module m;
  ASSERT_EQ(load(both.Write(), 0, &m), BP_OK) << Message();
  const int global_before = global_calls.load(), table_before = table_calls.load();
  m.GetFunction("run")(int64_t{1});
  EXPECT_EQ(global_calls.load(), global_before + 1);  // without the flag: the registry's
  EXPECT_EQ(table_calls.load(), table_before + 1);
  bp::Module refused;
  ASSERT_EQ(load(both.Write(), kNoGlobal, &refused), BP_ERR_INVALID_ARGUMENT);
  const std::string why = Message();
  EXPECT_NE(why.find("module 1 (kind ir_host)"), std::string::npos) << why;
  EXPECT_NE(why.find("BP_MODULE_LOAD_NO_GLOBAL_CALLS"), std::string::npos) << why;
  EXPECT_NE(why.find("in function 'run': call_packed(\"test.module.global_fn\") names no function "
                     "of the imported modules in `call_packed(\"test.module.global_fn\", n)`"),
            std::string::npos)
      << why;
  EXPECT_EQ(why.find("call_packed(\"leaf_value\")"), std::string::npos) << why;  // its kernel
  EXPECT_FALSE(refused);
  // The C++ API says the same.
  try {
    bp::Module::LoadFromBytes(both.Write(), bp::ModuleLoadOptions{false, true});
    ADD_FAILURE() << "loaded";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("test.module.global_fn"), std::string::npos) << e.what();
  }

  // Only kernels of its imports: it loads with the flag and runs.
  bptest::ModuleFile kernels_only = both;
  kernels_only.nodes[1].payload = host("  call_packed(\"leaf_value\", n)\n");
  bp::Module confined;
  ASSERT_EQ(load(kernels_only.Write(), kNoGlobal, &confined), BP_OK) << Message();
  confined.GetFunction("run")(int64_t{1});
  EXPECT_EQ(table_calls.load(), table_before + 2);
  EXPECT_EQ(global_calls.load(), global_before + 1);

  // A host module that imports nothing calls nothing; one that is not the root is checked too.
  bptest::ModuleFile inner;
  inner.nodes.push_back({"ir_host", host("  call_packed(\"test.module.global_fn\", n)\n"), {}});
  inner.nodes.push_back({"test_table", "root_value=3\n", {0}});
  ASSERT_EQ(load(inner.Write(), 0, &m), BP_OK) << Message();
  ASSERT_EQ(load(inner.Write(), kNoGlobal, &refused), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("module 0 (kind ir_host)"), std::string::npos) << Message();
  EXPECT_NE(Message().find("\"test.module.global_fn\""), std::string::npos) << Message();

  // An import that lists a name it does not give passes the load; the call then fails rather
  // than reach the registry.
  bptest::ModuleFile liar = both;
  liar.nodes[0].payload = "leaf_value=4\n?test.module.global_fn\n";
  liar.nodes[1].payload = host("  call_packed(\"test.module.global_fn\", n)\n");
  ASSERT_EQ(load(liar.Write(), 0, &m), BP_OK) << Message();
  m.GetFunction("run")(int64_t{1});  // without the flag: found in the registry
  EXPECT_EQ(global_calls.load(), global_before + 2);
  ASSERT_EQ(load(liar.Write(), kNoGlobal, &confined), BP_OK) << Message();
  try {
    confined.GetFunction("run")(int64_t{1});
    ADD_FAILURE() << "the registry's function was called";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_NOT_FOUND);
    EXPECT_NE(std::string(e.what()).find("host code calls 'test.module.global_fn', which none of "
                                         "the modules it imports has"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("BP_MODULE_LOAD_NO_GLOBAL_CALLS"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(global_calls.load(), global_before + 2);

  // A bit past the known ones is still refused, naming both flags.
  ASSERT_EQ(load(both.Write(), kNoGlobal | 0x4u, &refused), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("unknown flags 0x4"), std::string::npos) << Message();
  EXPECT_NE(Message().find("BP_MODULE_LOAD_NO_GLOBAL_CALLS"), std::string::npos) << Message();
}

}  // namespace
