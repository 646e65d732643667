// SPDX-License-Identifier: Apache-2.0
// `backplane build -t DEVICE` builds for the device's own Target, and
// `backplane run` does what users of iree-run-module and iree-benchmark-module expect: it lists
// a module's functions, takes inline inputs, prints outputs, reports min/mean/median/stddev of
// the repeats, checks a run whose outputs it writes, and names where a mismatched size came
// from. Every value is compared with one computed here from random inputs (fixed seeds).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "cli_helpers.h"

namespace {

using backplane::clitest::CliTest;
using backplane::clitest::Contains;
using backplane::clitest::KernelFile;
namespace sp = backplane::subprocess;
using Json = nlohmann::json;

std::string Show(const sp::Result& r) {
  return r.Describe() + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// "1.5,-2.25,...": floats with enough digits to round-trip float32.
std::string Inline(const std::vector<float>& v) {
  std::string s;
  char buf[32];
  for (float x : v) {
    std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(x));
    s += (s.empty() ? "" : ",") + std::string(buf);
  }
  return s;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

// A float32 .npy file of shape (n,) (version 1.0, as numpy.save writes it).
void WriteFloatNpy(const std::string& path, const std::vector<float>& v) {
  std::string header =
      "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(v.size()) + ",), }";
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY\x01";
  out += '\0';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  WriteFile(path, out);
}

// The float32 data of an .npy file the tool wrote (version 1.0; the header is checked by
// npy_cli_test).
std::vector<float> ReadFloatNpyData(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10) return {};
  const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                            (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  std::vector<float> out((bytes.size() - 10 - header_len) / sizeof(float));
  std::memcpy(out.data(), bytes.data() + 10 + header_len, out.size() * sizeof(float));
  return out;
}

class RunParityCli : public CliTest {
 protected:
  // Whether `device` is listed by `backplane info -l`.
  bool HasDevice(const std::string& device) {
    sp::Result l = Cli({"info", "-l"});
    return l.exit_code == 0 && Contains(l.out, device + " ");
  }
  Json JsonOf(const sp::Result& r) {
    Json doc = Json::parse(r.out, nullptr, false);
    EXPECT_FALSE(doc.is_discarded()) << Show(r);
    return doc;
  }
  void WriteKernel(const std::string& name, const std::string& text) {
    WriteFile(Path(name), "# backplane-ir 1\n\n" + text);
  }
};

// Item 7: a device where a Target is expected gives the device's own Target, the one
// `backplane target DEVICE` prints; the module built for it runs there, checked.
TEST_F(RunParityCli, BuildForADeviceUsesTheDevicesOwnTargetAndRunsThere) {
  int built = 0;
  for (const std::string device : {"opencl:0", "vulkan:0", "cpu:0"}) {
    SCOPED_TRACE(device);
    if (!HasDevice(device)) continue;
    const bool cpu = device == "cpu:0";
    sp::Result t = Cli({"target", device, "--json"});
    ASSERT_EQ(t.exit_code, 0) << Show(t);
    const Json target = JsonOf(t);
    const std::string kind = target.value("kind", "");
    ASSERT_FALSE(kind.empty()) << t.out;
    // The device's Target differs from its kind's generic defaults: it was read off the device.
    sp::Result generic = Cli({"target", kind, "--json"});
    ASSERT_EQ(generic.exit_code, 0) << Show(generic);
    EXPECT_NE(JsonOf(generic), target) << "the Target of " << device << " is the generic " << kind;
    EXPECT_EQ(target.value("from_device", -1), 0) << t.out;

    const std::string module = Path(kind + ".bpmod");
    sp::Result b =
        Cli({"build", KernelFile("vector_add.bpir"), "-t", device, "-o", module, "--json"});
    if (b.exit_code != 0 && Contains(b.err, "no code generator")) continue;
    ASSERT_EQ(b.exit_code, 0) << Show(b);
    const Json doc = JsonOf(b);
    EXPECT_EQ(doc["target"], target) << doc.dump(2);
    EXPECT_EQ(doc["target_from_device"], device) << doc.dump(2);
    sp::Result text = Cli({"build", KernelFile("vector_add.bpir"), "-t", device, "-o", module});
    ASSERT_EQ(text.exit_code, 0) << Show(text);
    EXPECT_TRUE(Contains(text.out, " for " + kind + " from " + device + " (module ")) << text.out;

    const std::string func = cpu ? "vector_add" : "vector_add_gpu";
    std::vector<std::string> run = {"run", module, "-f", func, "--dim", "n=4099", "-r", "2"};
    if (cpu) run.push_back("--allow-native");
    sp::Result r = Cli(run);
    ASSERT_EQ(r.exit_code, 0) << Show(r);
    EXPECT_TRUE(Contains(r.out, func + " on " + device + ": ok (max relative error")) << r.out;
    ++built;
  }
  if (built == 0) GTEST_SKIP() << "no device with a code generator here";
}

// The same for a device of another machine: `build -t remote:0` takes the Target the remote
// plugin reads off it (the server's device's own, wrapped), and the module runs there with
// inline inputs and printed outputs. ctest runs it against a loopback `backplane serve` of
// opencl devices (cli.remote_device_build_run, tests/sdk/apps/cli/CMakeLists.txt); elsewhere it
// skips.
TEST_F(RunParityCli, BuildForARemoteDeviceAndRunThere) {
  const char* remote = std::getenv("BACKPLANE_REMOTE");
  if (remote == nullptr || *remote == '\0') GTEST_SKIP() << "BACKPLANE_REMOTE is not set";
  ASSERT_TRUE(HasDevice("remote:0")) << Cli({"info", "-l"}).out;
  sp::Result t = Cli({"target", "remote:0", "--json"});
  ASSERT_EQ(t.exit_code, 0) << Show(t);
  const Json target = JsonOf(t);
  EXPECT_EQ(target.value("kind", ""), "remote") << t.out;
  EXPECT_EQ(target.value("server", ""), remote) << t.out;
  ASSERT_TRUE(target.contains("target")) << t.out;
  // The inner Target is the server's device's own, as `backplane target` prints it there.
  sp::Result local =
      Cli({"target", target.value("device", ""), "--json"}, {{"BACKPLANE_REMOTE", ""}});
  ASSERT_EQ(local.exit_code, 0) << Show(local);
  EXPECT_EQ(target["target"], JsonOf(local)) << t.out << local.out;

  sp::Result b = Cli(
      {"build", KernelFile("vector_add.bpir"), "-t", "remote:0", "-o", Path("vr.bpmod"), "--json"});
  ASSERT_EQ(b.exit_code, 0) << Show(b);
  EXPECT_EQ(JsonOf(b)["target"], target);
  // The module keeps no IR: the listing takes the reference kernel's signature from its file.
  sp::Result list = Cli({"run", Path("vr.bpmod"), "--list"});
  ASSERT_EQ(list.exit_code, 0) << Show(list);
  EXPECT_TRUE(Contains(list.out, "vector_add_gpu(n: int32, a: buffer<float32>[n]")) << list.out;

  const std::vector<float> a = RandomFloats(9, 71);
  const std::vector<float> bv = RandomFloats(9, 72);
  sp::Result r = Cli({"run", Path("vr.bpmod"), "-f", "vector_add_gpu", "-i", "a=" + Inline(a), "-i",
                      "b=" + Inline(bv), "--print", "--json", "-r", "2"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  const Json doc = JsonOf(r);
  EXPECT_EQ(doc["device"], "remote:0");
  EXPECT_EQ(doc["check"], "reference");
  const Json& c = doc["printed"][0]["values"];
  ASSERT_EQ(c.size(), 9u) << doc.dump(2);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(c[i].get<double>(), a[i] + bv[i]) << i;
}

TEST_F(RunParityCli, ADeviceThatDoesNotExistIsNamedWithTheDevicesThereAre) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"build", KernelFile("vector_add.bpir"), "-t", "cpu:7", "-o",
                                 Path("x.bpmod")},
        std::vector<std::string>{"target", "cpu:7"}}) {
    sp::Result r = Cli(args);
    EXPECT_EQ(r.exit_code, 2) << Show(r);
    EXPECT_TRUE(Contains(r.err, "device cpu:7 does not exist here")) << r.err;
    EXPECT_TRUE(Contains(r.err, "cpu:0")) << r.err;
    EXPECT_TRUE(Contains(r.err, "backplane info -l")) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
    EXPECT_FALSE(std::ifstream(Path("x.bpmod")).good());
  }
  // A name of the device form that is neither a device type nor a kind.
  sp::Result r = Cli({"build", KernelFile("vector_add.bpir"), "-t", "nosuch:0", "-o", Path("x")});
  EXPECT_EQ(r.exit_code, 2) << Show(r);
  EXPECT_TRUE(Contains(r.err, "backplane build: --target: ")) << r.err;
  EXPECT_TRUE(Contains(r.err, "'nosuch:0'")) << r.err;
  EXPECT_TRUE(Contains(r.err, "the devices here: cpu:0")) << r.err;
}

// Item 8: without -f the functions are listed with their signatures (stderr, exit 2); --list
// prints them on stdout (exit 0), and as a document with --json.
TEST_F(RunParityCli, RunListsTheModulesFunctionsWithTheirSignatures) {
  ASSERT_TRUE(BuildModule("matmul.bpir", "c", "matmul", "mm.bpmod"));
  sp::Result list = Cli({"run", Path("mm.bpmod"), "--list", "--allow-native"});
  ASSERT_EQ(list.exit_code, 0) << Show(list);
  EXPECT_TRUE(Contains(list.out, "holds 1 function:")) << list.out;
  EXPECT_TRUE(Contains(list.out,
                       "matmul(m: int32, n: int32, k: int32, a: buffer<float32>[m, k], "
                       "b: buffer<float32>[k, n], c: buffer<float32>[m, n])  writes c"))
      << list.out;
  EXPECT_TRUE(Contains(list.out, "[reference kernel]")) << list.out;

  sp::Result none = Cli({"run", Path("mm.bpmod"), "--allow-native"});
  EXPECT_EQ(none.exit_code, 2) << Show(none);
  EXPECT_TRUE(none.out.empty()) << none.out;
  EXPECT_TRUE(Contains(none.err, "no function given; give one with -f NAME")) << none.err;
  EXPECT_TRUE(Contains(none.err, "matmul(m: int32")) << none.err;

  sp::Result json = Cli({"run", Path("mm.bpmod"), "--list", "--json", "--allow-native"});
  ASSERT_EQ(json.exit_code, 0) << Show(json);
  const Json doc = JsonOf(json);
  EXPECT_EQ(doc["schema_version"], 1);
  ASSERT_EQ(doc["functions"].size(), 1u) << doc.dump(2);
  EXPECT_EQ(doc["functions"][0]["name"], "matmul");
  EXPECT_EQ(doc["functions"][0]["writes"], Json::array({"c"}));
  EXPECT_EQ(doc["functions"][0]["reference_kernel"], true);

  // A function of the user's own: the buffers it stores to.
  WriteKernel("twice.bpir",
              "func twice(n: int32, a: buffer<int32>[n], b: buffer<int32>[n]) {\n"
              "  for i in serial(0, n) {\n    b[i] = a[i] * 2\n  }\n}\n");
  ASSERT_EQ(Cli({"build", Path("twice.bpir"), "-t", "c", "-o", Path("t.bpmod")}).exit_code, 0);
  sp::Result own = Cli({"run", Path("t.bpmod"), "--list", "--allow-native"});
  ASSERT_EQ(own.exit_code, 0) << Show(own);
  EXPECT_TRUE(Contains(own.out,
                       "twice(n: int32, a: buffer<int32>[n], b: buffer<int32>[n])  "
                       "writes b\n"))
      << own.out;
}

// Inline inputs (iree-run-module's --input=4xf32=1,2,3,4) and --print: random values typed on
// the command line, the outputs printed and compared with what is computed here.
TEST_F(RunParityCli, InlineInputsAndPrintedOutputsOnRandomData) {
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  const std::vector<float> a = RandomFloats(7, 41);
  const std::vector<float> b = RandomFloats(7, 42);
  sp::Result r = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "-i", "a=" + Inline(a), "-i",
                      "b=7xf32=" + Inline(b), "--print", "-r", "1", "--json", "--allow-native"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  Json doc = JsonOf(r);
  EXPECT_EQ(doc["check"], "reference") << doc.dump(2);
  EXPECT_LE(doc["max_error"].get<double>(), 1e-7) << doc.dump(2);  // float32 against float64
  ASSERT_EQ(doc["printed"].size(), 1u) << doc.dump(2);
  EXPECT_EQ(doc["printed"][0]["name"], "c");
  EXPECT_EQ(doc["printed"][0]["shape"], Json::array({7}));
  ASSERT_EQ(doc["printed"][0]["values"].size(), 7u) << doc.dump(2);
  for (size_t i = 0; i < 7; ++i) {
    EXPECT_EQ(doc["printed"][0]["values"][i].get<double>(), static_cast<double>(a[i] + b[i])) << i;
  }
  EXPECT_EQ(doc["inputs"][0]["value"], Inline(a));

  // One value fills the shape; the text form prints the values as numpy does.
  sp::Result t = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "-i", "a=1,2,3,4", "-i",
                      "b=4xf32=0.5", "--print", "-r", "1", "--allow-native"});
  ASSERT_EQ(t.exit_code, 0) << Show(t);
  EXPECT_TRUE(Contains(t.out,
                       "vector_add on cpu:0: ok (max relative error 0 vs the float64 "
                       "reference)"))
      << t.out;
  EXPECT_TRUE(Contains(t.out, "\nc: float32 (4,) = [1.5, 2.5, 3.5, 4.5]\n")) << t.out;

  // Two dimensions: matmul of a 2x3 and a 3x2 matrix, the sizes read off the shapes.
  ASSERT_TRUE(BuildModule("matmul.bpir", "c", "matmul", "mm.bpmod"));
  const std::vector<float> x = RandomFloats(6, 43);
  const std::vector<float> y = RandomFloats(6, 44);
  sp::Result mm = Cli({"run", Path("mm.bpmod"), "-f", "matmul", "-i", "a=2x3=" + Inline(x), "-i",
                       "b=3x2xf32=" + Inline(y), "--print", "--json", "-r", "1", "--allow-native"});
  ASSERT_EQ(mm.exit_code, 0) << Show(mm);
  doc = JsonOf(mm);
  const Json& c = doc["printed"][0]["values"];
  ASSERT_EQ(c.size(), 2u) << doc.dump(2);
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(c[i].size(), 2u) << doc.dump(2);
    for (int j = 0; j < 2; ++j) {
      double want = 0;
      for (int k = 0; k < 3; ++k) {
        want += static_cast<double>(x[i * 3 + k]) * static_cast<double>(y[k * 2 + j]);
      }
      EXPECT_NEAR(c[i][j].get<double>(), want, 1e-5 * (1 + std::fabs(want))) << i << "," << j;
    }
  }

  // Integers, and a scalar given with --input as iree-run-module takes it.
  WriteKernel("axpb.bpir",
              "func axpb(n: int32, s: int32, a: buffer<int32>[n], b: buffer<int32>[n]) {\n"
              "  for i in serial(0, n) {\n    b[i] = a[i] * s + 1\n  }\n}\n");
  ASSERT_EQ(Cli({"build", Path("axpb.bpir"), "-t", "c", "-o", Path("ax.bpmod")}).exit_code, 0);
  sp::Result ints =
      Cli({"run", Path("ax.bpmod"), "-f", "axpb", "-i", "a=-3,0,2147483,7", "-i", "s=i32=-5", "-i",
           "b=4xi32=0", "--print", "--check", "-r", "1", "--allow-native"});
  ASSERT_EQ(ints.exit_code, 0) << Show(ints);
  EXPECT_TRUE(Contains(ints.out, "\nb: int32 (4,) = [16, 1, -10737414, -34]\n")) << ints.out;
  EXPECT_FALSE(Contains(ints.out, "\na: ")) << "only the buffers it writes: " << ints.out;

  // A shape of no elements: its one value fills nothing.
  sp::Result empty = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "-i", "a=0xf32=1", "-i",
                          "b=0=2", "--print", "-r", "1", "--allow-native"});
  ASSERT_EQ(empty.exit_code, 0) << Show(empty);
  EXPECT_TRUE(Contains(empty.out, "\nc: float32 (0,) = []\n")) << empty.out;
}

TEST_F(RunParityCli, InlineInputsThatDoNotFitAreRefusedNamingTheElement) {
  WriteKernel("inc.bpir",
              "func inc(n: int32, a: buffer<int8>[n]) {\n"
              "  for i in serial(0, n) {\n    a[i] = a[i] + int8(1)\n  }\n}\n");
  ASSERT_EQ(Cli({"build", Path("inc.bpir"), "-t", "c", "-o", Path("inc.bpmod")}).exit_code, 0);
  struct Case {
    std::string input;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"a=1,2,300", {"--input a=1,2,300: element 2: '300' is not int8 (-128 to 127)"}},
      {"a=2x2=1,2,3", {"shape 2x2 holds 4 elements but 3 values are given"}},
      {"a=4xf32=1", {"parameter 'a' of function 'inc' is int8", "the value is float32"}},
      {"a=1.5", {"element 0: '1.5' is not int8"}},
  };
  for (const Case& c : cases) {
    sp::Result r = Cli({"run", Path("inc.bpmod"), "-f", "inc", "-i", c.input, "--allow-native"});
    EXPECT_EQ(r.exit_code, 2) << c.input << Show(r);
    EXPECT_TRUE(r.out.empty()) << c.input << Show(r);
    for (const std::string& part : c.says) {
      EXPECT_TRUE(Contains(r.err, part)) << c.input << ": " << part << Show(r);
    }
  }
  // A name ending in .npy, or @PATH, is a file.
  sp::Result file = Cli({"run", Path("inc.bpmod"), "-f", "inc", "-i", "a=@12", "--allow-native"});
  EXPECT_EQ(file.exit_code, 2) << Show(file);
  EXPECT_TRUE(Contains(file.err, "--input a=@12: ")) << file.err;
  EXPECT_TRUE(Contains(file.err, "12")) << file.err;
}

// Large outputs are summarised (first and last elements, min, max, mean), in full with
// --print-full; both agree with the file -o writes, and -o's path is printed.
TEST_F(RunParityCli, LargeOutputsAreSummarisedAndOutputPathsPrinted) {
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  sp::Result r = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--dim", "n=1000", "--print",
                      "-o", "c=" + Path("c.npy"), "-r", "1", "--allow-native"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  EXPECT_TRUE(Contains(r.out, "vector_add on cpu:0: ok (max relative error")) << r.out;
  EXPECT_TRUE(Contains(r.out, "\nwrote c (float32 (1000,)) to " + Path("c.npy") + "\n")) << r.out;
  const std::vector<float> c = ReadFloatNpyData(Path("c.npy"));
  ASSERT_EQ(c.size(), 1000u);
  char first[64];
  std::snprintf(first, sizeof(first), "c: float32 (1000,) = [%.7g, ", static_cast<double>(c[0]));
  EXPECT_TRUE(Contains(r.out, first)) << first << "\n" << r.out;
  EXPECT_TRUE(Contains(r.out, ", ..., ")) << r.out;
  double lo = c[0], hi = c[0], sum = 0;
  for (float v : c) {
    lo = std::min(lo, static_cast<double>(v));
    hi = std::max(hi, static_cast<double>(v));
    sum += v;
  }
  char stats[128];
  std::snprintf(stats, sizeof(stats), "(min %.7g, max %.7g, mean %.7g;", lo, hi, sum / 1000);
  EXPECT_TRUE(Contains(r.out, stats)) << stats << "\n" << r.out;

  sp::Result full = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--dim", "n=1000",
                         "--print-full", "--json", "-r", "1", "--allow-native"});
  ASSERT_EQ(full.exit_code, 0) << Show(full);
  const Json doc = JsonOf(full);
  const Json& values = doc["printed"][0]["values"];
  ASSERT_EQ(values.size(), 1000u) << full.out.substr(0, 400);
  for (size_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(values[i].get<double>(), static_cast<double>(c[i])) << i;  // same seed, same data
  }
}

// The repeats' min, mean, median and standard deviation, in text and in the document.
TEST_F(RunParityCli, TimingReportsMinMeanMedianAndStddev) {
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  for (const std::vector<std::string>& extra :
       {std::vector<std::string>{}, std::vector<std::string>{"--check"}}) {
    std::vector<std::string> args = {"run",    Path("va.bpmod"), "-f", "vector_add",
                                     "--dim",  "n=5000",         "-r", "6",
                                     "--json", "--allow-native"};
    args.insert(args.end(), extra.begin(), extra.end());
    sp::Result r = Cli(args);
    ASSERT_EQ(r.exit_code, 0) << Show(r);
    const Json doc = JsonOf(r);
    const Json& t = doc["timing"];
    ASSERT_EQ(t["times"].size(), 6u) << doc.dump(2);
    std::vector<double> times = t["times"].get<std::vector<double>>();
    std::sort(times.begin(), times.end());
    double mean = 0;
    for (double x : times) mean += x / 6;
    double sq = 0;
    for (double x : times) sq += (x - mean) * (x - mean);
    EXPECT_DOUBLE_EQ(t["min"].get<double>(), times[0]);
    EXPECT_DOUBLE_EQ(t["median"].get<double>(), (times[2] + times[3]) / 2);
    EXPECT_NEAR(t["mean"].get<double>(), mean, 1e-12);
    EXPECT_NEAR(t["stddev"].get<double>(), std::sqrt(sq / 5), 1e-12);
    EXPECT_DOUBLE_EQ(doc["seconds"].get<double>(), t["median"].get<double>());
    EXPECT_EQ(doc["repeat"], 6);
  }
  sp::Result text = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--dim", "n=5000", "-r", "3",
                         "--allow-native"});
  ASSERT_EQ(text.exit_code, 0) << Show(text);
  EXPECT_TRUE(Contains(text.out, " median of 3 (min ")) << text.out;
  EXPECT_TRUE(Contains(text.out, ", mean ")) << text.out;
  EXPECT_TRUE(Contains(text.out, ", stddev ")) << text.out;
}

// -o checks what it writes: a kernel named like a reference kernel that computes something
// else fails against the float64 reference, with or without -o.
TEST_F(RunParityCli, WritingOutputsKeepsTheCheck) {
  WriteKernel("wrong.bpir",
              "func vector_add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], "
              "c: buffer<float32>[n]) {\n"
              "  for i in serial(0, n) {\n    c[i] = a[i] - b[i]\n  }\n}\n");
  ASSERT_EQ(Cli({"build", Path("wrong.bpir"), "-t", "c", "-o", Path("w.bpmod")}).exit_code, 0);
  for (const bool write : {false, true}) {
    std::vector<std::string> args = {
        "run", Path("w.bpmod"), "-f", "vector_add", "--dim", "n=100", "-r", "1", "--allow-native"};
    if (write) args.insert(args.end(), {"-o", "c=" + Path("c.npy")});
    sp::Result r = Cli(args);
    EXPECT_EQ(r.exit_code, 1) << Show(r);
    EXPECT_TRUE(Contains(r.err, "vector_add on cpu:0: FAILED: relative error")) << r.err;
    EXPECT_FALSE(Contains(r.out, "not checked")) << r.out;
  }
  // The right kernel with -o and .npy inputs: checked against the reference on those inputs.
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  const std::vector<float> a = RandomFloats(333, 51);
  const std::vector<float> b = RandomFloats(333, 52);
  WriteFloatNpy(Path("a.npy"), a);
  WriteFloatNpy(Path("b.npy"), b);
  sp::Result ok =
      Cli({"run", Path("va.bpmod"), "-f", "vector_add", "-i", "a=" + Path("a.npy"), "-i",
           "b=" + Path("b.npy"), "-o", "c=" + Path("c.npy"), "-r", "1", "--allow-native"});
  ASSERT_EQ(ok.exit_code, 0) << Show(ok);
  EXPECT_TRUE(Contains(ok.out, "vector_add on cpu:0: ok (max relative error ")) << ok.out;
  EXPECT_TRUE(Contains(ok.out, " vs the float64 reference)")) << ok.out;
  EXPECT_TRUE(Contains(ok.out, "wrote c (float32 (333,)) to " + Path("c.npy"))) << ok.out;
  const std::vector<float> c = ReadFloatNpyData(Path("c.npy"));
  ASSERT_EQ(c.size(), 333u);
  for (size_t i = 0; i < 333; ++i) EXPECT_EQ(c[i], a[i] + b[i]) << i;  // one rounding: exact
}

// A shape that does not match names where the size came from: the other input's file, or
// --dim.
TEST_F(RunParityCli, AShapeMismatchNamesTheFileTheSizeCameFrom) {
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  WriteFloatNpy(Path("a1000.npy"), RandomFloats(1000, 61));
  WriteFloatNpy(Path("b999.npy"), RandomFloats(999, 62));
  sp::Result r = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "-i", "a=" + Path("a1000.npy"),
                      "-i", "b=" + Path("b999.npy"), "--allow-native"});
  EXPECT_EQ(r.exit_code, 2) << Show(r);
  EXPECT_TRUE(Contains(r.err, "--input b=" + Path("b999.npy") + ": parameter 'b'")) << r.err;
  EXPECT_TRUE(
      Contains(r.err, "n = 1000 comes from the shape (1000,) of --input a=" + Path("a1000.npy")))
      << r.err;

  sp::Result dim = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--dim", "n=10", "-i",
                        "a=" + Path("a1000.npy"), "--allow-native"});
  EXPECT_EQ(dim.exit_code, 2) << Show(dim);
  EXPECT_TRUE(Contains(dim.err, "n = 10 comes from --dim n=10")) << dim.err;
}

}  // namespace
