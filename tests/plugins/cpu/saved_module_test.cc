// SPDX-License-Identifier: Apache-2.0
// Saved c modules and the trust rule for native code (docs/security.md, "Saved modules"): a c
// module holds a shared library, which runs in the host's process as soon as it is mapped, and a
// module file's checksum says nothing about who wrote it. So a c module loads only when the
// caller allows native code (BP_MODULE_LOAD_ALLOW_NATIVE), and without that the core refuses it
// before the cpu plugin's loader runs: a library swapped into the file never runs, nor lands in
// the disk cache.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "../../module_file.h"
#include "plugins/test_util.h"

namespace {

using backplane::Device;
using backplane::Module;
using backplane::ModuleLoadOptions;
using backplane::Target;
using backplane::Tensor;

const DLDataType kF32{kDLFloat, 32, 1};

// The plugin picks its cache folder once per process: one scratch folder for all tests.
const std::string& CacheHome() {
  static bptest::ScratchDir dir;
  return dir.path();
}

size_t CachedLibraries() {
  size_t files = 0;
  for (auto& e : std::filesystem::recursive_directory_iterator(CacheHome())) {
    files += e.path().extension() == ".so";
  }
  return files;
}

const char* kVectorAdd = R"(# backplane-ir 1
func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) {
  for i in parallel(0, n) {
    c[i] = a[i] + b[i]
  }
}
)";

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

class SavedCModule : public ::testing::Test {
 protected:
  void SetUp() override { setenv("XDG_CACHE_HOME", CacheHome().c_str(), 1); }

  // The saved c module of vector_add.
  std::string SavedVectorAdd() {
    return backplane::Build(kVectorAdd, Target::Parse("c")).SaveToBytes();
  }
  // Runs vector_add of `m` on 100 elements; true when the sums are right.
  bool Runs(const Module& m) {
    const int n = 100;
    std::vector<float> a = bptest::RandomFloats(n, 1), b = bptest::RandomFloats(n, 2);
    Tensor ta = Tensor::Empty({n}, kF32, Device(bptest::CpuDevice()));
    Tensor tb = Tensor::Empty({n}, kF32, Device(bptest::CpuDevice()));
    Tensor tc = Tensor::Empty({n}, kF32, Device(bptest::CpuDevice()));
    ta.CopyFrom(a);
    tb.CopyFrom(b);
    m.GetFunction("vector_add")(n, ta.dl(), tb.dl(), tc.dl());
    const std::vector<float> c = tc.ToVector<float>();
    for (int i = 0; i < n; ++i) {
      if (c[i] != a[i] + b[i]) return false;
    }
    return true;
  }
};

TEST_F(SavedCModule, LoadsOnlyWhenNativeCodeIsAllowed) {
  const std::string bytes = SavedVectorAdd();
  // The C++ API without options, and the C API without options or with flags 0: refused, with
  // the way to opt in.
  bptest::Status s = bptest::CaptureError([&] { Module::LoadFromBytes(bytes); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("module 0 is of kind 'c', which carries native code"), std::string::npos)
      << s;
  EXPECT_NE(s.message.find("BP_MODULE_LOAD_ALLOW_NATIVE"), std::string::npos) << s;
  EXPECT_NE(s.message.find("backplane run --allow-native"), std::string::npos) << s;
  bp_object_t* out = nullptr;
  EXPECT_EQ(bp_module_load(bytes.data(), bytes.size(), &out), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_module_load_with_options(bytes.data(), bytes.size(), nullptr, &out),
            BP_ERR_INVALID_ARGUMENT);
  bp_module_load_options_t options{};
  options.struct_size = sizeof(options);
  EXPECT_EQ(bp_module_load_with_options(bytes.data(), bytes.size(), &options, &out),
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);

  // Allowed: it loads and runs, through either API.
  options.flags = BP_MODULE_LOAD_ALLOW_NATIVE;
  ASSERT_EQ(bp_module_load_with_options(bytes.data(), bytes.size(), &options, &out), BP_OK)
      << bptest::Capture(BP_ERR_INVALID_ARGUMENT);
  Module from_c{backplane::ObjectRef::Adopt(out)};
  EXPECT_TRUE(Runs(from_c));
  EXPECT_TRUE(Runs(Module::LoadFromBytes(bytes, ModuleLoadOptions{true})));

  // A flag this Backplane does not know may be a restriction the caller relies on: refused.
  options.flags = BP_MODULE_LOAD_ALLOW_NATIVE | 0x10u;
  s = bptest::Capture(bp_module_load_with_options(bytes.data(), bytes.size(), &options, &out));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("unknown flags 0x10"), std::string::npos) << s;
  // A struct shorter than ABI 1.4's.
  options.flags = BP_MODULE_LOAD_ALLOW_NATIVE;
  options.struct_size = sizeof(size_t);
  s = bptest::Capture(bp_module_load_with_options(bytes.data(), bytes.size(), &options, &out));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(s.message.find("struct_size"), std::string::npos) << s;
}

// The issue's reproducer: the library inside a saved c module replaced by one whose constructor
// writes a file, the checksum recomputed. Without the opt-in the constructor never runs and the
// library is not even written to the cache; with it, the caller said it trusts the file.
TEST_F(SavedCModule, ASwappedLibraryRunsOnlyWhenNativeCodeIsAllowed) {
  bptest::ScratchDir dir;
  const std::string marker = dir.path() + "/constructor_ran";
  const std::string src = dir.path() + "/evil.c";
  const std::string lib = dir.path() + "/evil.so";
  {
    std::ofstream out(src);
    out << "#include <stdio.h>\n"
           "__attribute__((constructor)) static void Run(void) {\n"
           "  FILE* f = fopen(\""
        << marker
        << "\", \"w\");\n"
           "  if (f) { fputs(\"ran\", f); fclose(f); }\n"
           "}\n";
  }
  const std::string cc = "cc -shared -fPIC -o '" + lib + "' '" + src + "'";
  ASSERT_EQ(std::system(cc.c_str()), 0) << cc;
  const std::string evil = ReadFile(lib);
  ASSERT_GT(evil.size(), 100u);

  bptest::ModuleFile file = bptest::ModuleFile::Parse(SavedVectorAdd());
  bptest::ModuleFile::Node& node = file.Find("c");
  // The c payload: "BPCMOD1\n", a JSON header line with library_size, then the library.
  const size_t eol = node.payload.find('\n', 8);
  ASSERT_NE(eol, std::string::npos);
  nlohmann::json header = nlohmann::json::parse(node.payload.substr(8, eol - 8));
  header["library_size"] = evil.size();
  node.payload = "BPCMOD1\n" + header.dump() + "\n" + evil;
  const std::string tampered = file.Write();

  const size_t cached = CachedLibraries();
  bptest::Status s = bptest::CaptureError([&] { Module::LoadFromBytes(tampered); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("carries native code"), std::string::npos) << s;
  EXPECT_FALSE(std::filesystem::exists(marker)) << "the swapped library ran without the opt-in";
  EXPECT_EQ(CachedLibraries(), cached) << "the refused library was written to the cache";

  // Allowed: the caller vouched for the file, and its library is what runs.
  Module m = Module::LoadFromBytes(tampered, ModuleLoadOptions{true});
  s = bptest::CaptureError([&] { m.GetFunction("vector_add"); });
  EXPECT_NE(s.message.find("lacks the entry point of 'vector_add'"), std::string::npos) << s;
  EXPECT_EQ(ReadFile(marker), "ran");
}

}  // namespace
