// SPDX-License-Identifier: Apache-2.0
// struct_size handling of the growable structs a caller hands the core (docs/abi.md, rule 2),
// each one shorter than today's, as long as today's, and longer (as a caller built against a
// newer minor fills it): the core reads the fields it knows, reads what a shorter struct lacks
// as zero or null, never reads past struct_size, and refuses only a struct too short for the
// version that introduced it, naming the size. docs/abi.md has the table of every growable
// struct and where each case is tested: bp_device_api_t's in device_api_test.cc, the host
// table's and bp_plugin_info_t's (which plugins read) in tests/abi/old_host.cc and
// tests/sdk/kit/sdk_test.cc.
#include <backplane/c_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

namespace {

std::string Message() {
  const char* message = nullptr;
  bp_error_last(nullptr, &message);
  return message != nullptr ? message : "";
}

// A struct as a caller built against a newer minor fills it: today's fields, then fields this
// core does not know (set, so that reading them would show), and struct_size covering them all.
template <typename T>
struct Grown {
  T base;
  uint64_t future[3] = {0xdead, 0xbeef, 0xf00d};
};

bp_target_attr_def_t Attr(const char* name, const char* default_json) {
  bp_target_attr_def_t a;
  std::memset(&a, 0, sizeof(a));
  a.struct_size = sizeof(a);
  a.name = name;
  a.type = BP_TARGET_ATTR_INT;
  a.device_attr = -1;
  a.default_json = default_json;
  a.doc = "struct_size test attribute";
  return a;
}

bp_target_kind_def_t Kind(const char* name, const bp_target_attr_def_t* attrs, size_t n) {
  bp_target_kind_def_t k;
  std::memset(&k, 0, sizeof(k));
  k.struct_size = sizeof(k);
  k.name = name;
  k.device_type = "cpu";
  k.attrs = attrs;
  k.num_attrs = n;
  return k;
}

// The int attribute `attr` of the Target `text`, or -1.
int64_t IntAttr(const char* text, const char* attr) {
  bp_object_t* target = nullptr;
  if (bp_target_parse(text, &target) != BP_OK) {
    ADD_FAILURE() << text << ": " << Message();
    return -1;
  }
  bp_value_t v;
  const bool ok = bp_target_get_attr(target, attr, &v) == BP_OK && v.type == BP_VALUE_INT;
  bp_object_release(target);
  return ok ? v.u.v_int64 : -1;
}

TEST(StructSize, TargetKindDef) {
  const bp_target_attr_def_t attrs[1] = {Attr("width", "7")};
  // Shorter than 1.1's, the first version of the struct: refused, naming the size.
  bp_target_kind_def_t k = Kind("ss_kind_short", attrs, 1);
  k.struct_size = offsetof(bp_target_kind_def_t, canonicalize);
  EXPECT_EQ(bp_target_kind_register(&k), BP_ERR_VERSION_MISMATCH);
  EXPECT_NE(Message().find("struct_size " + std::to_string(k.struct_size)), std::string::npos)
      << Message();
  // Equal.
  k = Kind("ss_kind_equal", attrs, 1);
  ASSERT_EQ(bp_target_kind_register(&k), BP_OK) << Message();
  EXPECT_EQ(IntAttr("ss_kind_equal", "width"), 7);
  // Longer: the fields this core does not know are not read.
  Grown<bp_target_kind_def_t> grown;
  grown.base = Kind("ss_kind_longer", attrs, 1);
  grown.base.struct_size = sizeof(grown);
  ASSERT_EQ(bp_target_kind_register(&grown.base), BP_OK) << Message();
  EXPECT_EQ(IntAttr("ss_kind_longer -width=9", "width"), 9);
}

TEST(StructSize, TargetAttrDefArrayIsWalkedWithItsOwnStride) {
  // Shorter than 1.1's: refused, naming the size.
  bp_target_attr_def_t short_attr = Attr("width", "7");
  short_attr.struct_size = offsetof(bp_target_attr_def_t, doc);
  bp_target_kind_def_t k = Kind("ss_attr_short", &short_attr, 1);
  EXPECT_EQ(bp_target_kind_register(&k), BP_ERR_VERSION_MISMATCH);
  EXPECT_NE(Message().find("struct_size " + std::to_string(short_attr.struct_size)),
            std::string::npos)
      << Message();
  // Longer: an array of a newer minor's bigger elements is walked with their size, so the
  // second attribute is found where the caller put it.
  static Grown<bp_target_attr_def_t> grown[2];
  grown[0].base = Attr("width", "7");
  grown[1].base = Attr("height", "5");
  for (auto& g : grown) g.base.struct_size = sizeof(Grown<bp_target_attr_def_t>);
  k = Kind("ss_attr_longer", &grown[0].base, 2);
  ASSERT_EQ(bp_target_kind_register(&k), BP_OK) << Message();
  EXPECT_EQ(IntAttr("ss_attr_longer", "width"), 7);
  EXPECT_EQ(IntAttr("ss_attr_longer", "height"), 5);
  // Elements of one array must agree on their size.
  grown[1].base.struct_size = sizeof(bp_target_attr_def_t);
  k = Kind("ss_attr_mixed", &grown[0].base, 2);
  EXPECT_EQ(bp_target_kind_register(&k), BP_ERR_INVALID_ARGUMENT);
}

// A module implementation whose functions are "f"; `self` counts destroys.
bp_status_t GetFunction(void*, const char* name, bp_object_t** out) {
  *out = nullptr;
  if (std::strcmp(name, "f") != 0) return BP_OK;
  return bp_function_create(
      [](void*, const bp_value_t*, int32_t, bp_value_t*) -> bp_status_t { return BP_OK; }, nullptr,
      nullptr, out);
}
bp_status_t ListFunctions(void*, bp_object_t** out) {
  bp_value_t v;
  v.type = BP_VALUE_STR;
  v.u.v_str = "f";
  return bp_array_create(&v, 1, out);
}
void Destroy(void* self) { ++*static_cast<int*>(self); }

bp_module_vtable_t Vtable() {
  bp_module_vtable_t t;
  std::memset(&t, 0, sizeof(t));
  t.struct_size = sizeof(t);
  t.kind = "ss_module";
  t.get_function = GetFunction;
  t.list_functions = ListFunctions;
  t.destroy = Destroy;
  return t;
}

TEST(StructSize, ModuleVtable) {
  static int destroyed = 0;
  bp_object_t* m = nullptr;
  // Shorter than 1.2's: refused, and `self` stays the caller's (the table cannot be trusted to
  // hold destroy).
  static bp_module_vtable_t short_table = Vtable();
  short_table.struct_size = offsetof(bp_module_vtable_t, destroy);
  EXPECT_EQ(bp_module_create(&short_table, &destroyed, &m), BP_ERR_VERSION_MISMATCH);
  EXPECT_NE(Message().find(std::to_string(short_table.struct_size)), std::string::npos)
      << Message();
  EXPECT_EQ(destroyed, 0);
  // Equal and longer.
  static bp_module_vtable_t equal = Vtable();
  static Grown<bp_module_vtable_t> grown;
  grown.base = Vtable();
  grown.base.struct_size = sizeof(grown);
  for (const bp_module_vtable_t* t : {&equal, &grown.base}) {
    ASSERT_EQ(bp_module_create(t, &destroyed, &m), BP_OK) << Message();
    bp_object_t* f = nullptr;
    EXPECT_EQ(bp_module_get_function(m, "f", 0, &f), BP_OK) << Message();
    bp_object_release(f);
    bp_object_release(m);
  }
  EXPECT_EQ(destroyed, 2);
}

// bp_build_with_options on IR that does not parse: the error shows whether source_name was read.
std::string BuildError(const bp_build_options_t* options) {
  static bp_object_t* target = [] {
    static const bp_target_attr_def_t none[1] = {Attr("unused", "0")};
    bp_target_kind_def_t k = Kind("ss_build", none, 1);
    EXPECT_EQ(bp_target_kind_register(&k), BP_OK) << Message();
    bp_object_t* t = nullptr;
    EXPECT_EQ(bp_target_parse("ss_build", &t), BP_OK) << Message();
    return t;
  }();
  const char kIr[] = "# backplane-ir 1\nthis is not IR\n";
  bp_object_t* module = nullptr;
  const bp_status_t st = bp_build_with_options(kIr, sizeof(kIr) - 1, target, options, &module);
  EXPECT_NE(st, BP_OK);
  bp_object_release(module);
  return std::to_string(st) + ": " + Message();
}

TEST(StructSize, BuildOptions) {
  bp_build_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.source_name = "kernel.bpir";
  // Shorter than 1.4's: refused, naming both sizes.
  o.struct_size = offsetof(bp_build_options_t, source_name);
  std::string e = BuildError(&o);
  EXPECT_NE(e.find("struct_size is " + std::to_string(o.struct_size)), std::string::npos) << e;
  // Equal: source_name names the input in the parse error.
  o.struct_size = sizeof(o);
  e = BuildError(&o);
  EXPECT_NE(e.find("kernel.bpir:2:"), std::string::npos) << e;
  // Longer: the same.
  Grown<bp_build_options_t> grown;
  grown.base = o;
  grown.base.struct_size = sizeof(grown);
  e = BuildError(&grown.base);
  EXPECT_NE(e.find("kernel.bpir:2:"), std::string::npos) << e;
}

TEST(StructSize, ModuleLoadOptions) {
  // Bytes that are no module file: with options the core accepts, the error is about the bytes.
  const char kNotAModule[] = "not a module file";
  bp_object_t* module = nullptr;
  bp_module_load_options_t o;
  std::memset(&o, 0, sizeof(o));
  o.flags = BP_MODULE_LOAD_ALLOW_NATIVE;
  // Shorter than 1.4's (ends before flags): refused, naming the size.
  o.struct_size = offsetof(bp_module_load_options_t, flags);
  EXPECT_EQ(bp_module_load_with_options(kNotAModule, sizeof(kNotAModule), &o, &module),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(Message().find("struct_size is " + std::to_string(o.struct_size)), std::string::npos)
      << Message();
  // Equal and longer: accepted; the bytes are what is wrong.
  o.struct_size = sizeof(o);
  Grown<bp_module_load_options_t> grown;
  grown.base = o;
  grown.base.struct_size = sizeof(grown);
  for (const bp_module_load_options_t* opt : {&o, &grown.base}) {
    EXPECT_NE(bp_module_load_with_options(kNotAModule, sizeof(kNotAModule), opt, &module), BP_OK);
    EXPECT_EQ(Message().find("struct_size"), std::string::npos) << Message();
    EXPECT_NE(Message().find("module file"), std::string::npos) << Message();
  }
  EXPECT_EQ(module, nullptr);
}

}  // namespace
