// SPDX-License-Identifier: Apache-2.0
// `backplane run --input NAME=FILE.npy --output NAME=FILE.npy` on real data.
// The test writes .npy files itself (its own writer, not the tool's), runs vector_add and
// saxpy on cpu:0 and opencl:0, reads the outputs back and compares them with a reference it
// computes; mismatched dtype, shape, byte order and order are refused naming the parameter,
// and hostile files (truncated, huge shapes, bad headers) end in an error, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
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
namespace sp = backplane::subprocess;

std::string Show(const sp::Result& r) {
  return r.Describe() + "\nstdout:\n" + r.out + "\nstderr:\n" + r.err;
}

// An .npy file as numpy.save writes it: magic, version, header length (2 bytes for 1.0, 4 for
// 2.0 and 3.0), the header dict padded with spaces to a multiple of 64 and a newline, then data.
std::string NpyBytes(const std::string& dict, const std::string& data, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  while ((prefix + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  const uint32_t n = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < prefix - 8; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + data;
}

std::string Dict(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
         ", 'shape': " + shape + ", }";
}

std::string FloatData(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << bytes;
}

std::vector<float> RandomFloats(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Reads a float32 vector from an .npy file the tool wrote: checks the header names '<f4',
// C order and shape (n,), and that the data starts 64-byte aligned.
std::vector<float> ReadFloatNpy(const std::string& path, size_t n) {
  std::ifstream f(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_GE(bytes.size(), 10u) << path;
  if (bytes.size() < 10) return {};
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ(bytes[6], 1) << "version 1.0";
  const size_t header_len = static_cast<unsigned char>(bytes[8]) |
                            (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  const std::string header = bytes.substr(10, header_len);
  EXPECT_EQ((10 + header_len) % 64, 0u) << header;
  EXPECT_TRUE(Contains(header, "'descr': '<f4'")) << header;
  EXPECT_TRUE(Contains(header, "'fortran_order': False")) << header;
  EXPECT_TRUE(Contains(header, "'shape': (" + std::to_string(n) + ",)")) << header;
  EXPECT_EQ(bytes.size(), 10 + header_len + n * sizeof(float)) << path;
  std::vector<float> out(n);
  if (bytes.size() == 10 + header_len + n * sizeof(float)) {
    std::memcpy(out.data(), bytes.data() + 10 + header_len, n * sizeof(float));
  }
  return out;
}

class NpyCli : public CliTest {
 protected:
  // vector_add and saxpy on real data through .npy files, checked against a reference
  // computed here. `target` builds the module; the device comes from the module.
  void RoundTrip(const std::string& target, const std::string& suffix) {
    std::string why;
    if (!BuildModule("vector_add.bpir", target, "vector_add" + suffix, "va.bpmod", &why) ||
        !BuildModule("saxpy.bpir", target, "saxpy" + suffix, "sx.bpmod", &why)) {
      GTEST_SKIP() << "no code generator for " << target << " here: " << why;
    }
    constexpr size_t n = 1537;  // not a multiple of any block or vector width
    const std::vector<float> a = RandomFloats(n, 11);
    const std::vector<float> b = RandomFloats(n, 12);
    WriteFile(Path("a.npy"), NpyBytes(Dict("<f4", "(1537,)"), FloatData(a)));
    WriteFile(Path("b.npy"), NpyBytes(Dict("<f4", "(1537,)"), FloatData(b)));
    // n is read off the inputs' shape.
    sp::Result r =
        Cli({"run", Path("va.bpmod"), "-f", "vector_add" + suffix, "-i", "a=" + Path("a.npy"), "-i",
             "b=" + Path("b.npy"), "-o", "c=" + Path("c.npy"), "-r", "1", "--allow-native"});
    if (r.exit_code == 2 && Contains(r.err, "does not exist here")) {
      GTEST_SKIP() << "no device for " << target << " here: " << r.err;
    }
    ASSERT_EQ(r.exit_code, 0) << Show(r);
    const std::vector<float> c = ReadFloatNpy(Path("c.npy"), n);
    ASSERT_EQ(c.size(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += c[i] != a[i] + b[i];  // one rounding: exact
    EXPECT_EQ(wrong, 0u) << "elements of c != a + b";

    // saxpy: y = alpha * x + y in place, alpha a float32 scalar given with --arg.
    sp::Result s = Cli({"run", Path("sx.bpmod"), "-f", "saxpy" + suffix, "--arg", "alpha=1.5", "-i",
                        "x=" + Path("a.npy"), "-i", "y=" + Path("b.npy"), "-o",
                        "y=" + Path("y.npy"), "-r", "1", "--allow-native", "--json"});
    ASSERT_EQ(s.exit_code, 0) << Show(s);
    const nlohmann::json doc = nlohmann::json::parse(s.out);
    EXPECT_EQ(doc["schema_version"], 1);
    ASSERT_EQ(doc["outputs"].size(), 1u) << doc.dump(2);
    EXPECT_EQ(doc["outputs"][0]["name"], "y");
    EXPECT_EQ(doc["outputs"][0]["dtype"], "float32");
    EXPECT_EQ(doc["outputs"][0]["shape"], nlohmann::json::array({n}));
    EXPECT_EQ(doc["inputs"].size(), 2u);
    const std::vector<float> y = ReadFloatNpy(Path("y.npy"), n);
    ASSERT_EQ(y.size(), n);
    for (size_t i = 0; i < n; ++i) {
      const double want = 1.5 * static_cast<double>(a[i]) + static_cast<double>(b[i]);
      // float32 arithmetic, with or without a fused multiply-add.
      ASSERT_NEAR(y[i], want, 1e-6 * 8 + 1e-6 * std::fabs(want)) << "y[" << i << "]";
    }
  }
};

TEST_F(NpyCli, VectorAddAndSaxpyOnRealDataOnCpu) { RoundTrip("c", ""); }

TEST_F(NpyCli, VectorAddAndSaxpyOnRealDataOnOpenCL) { RoundTrip("opencl", "_gpu"); }

TEST_F(NpyCli, Versions2And3AndOutputsOfRandomInputs) {
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  const std::vector<float> a = RandomFloats(64, 21);
  const std::vector<float> b = RandomFloats(64, 22);
  WriteFile(Path("a.npy"), NpyBytes(Dict("<f4", "(64,)"), FloatData(a), 2));
  WriteFile(Path("b.npy"), NpyBytes(Dict("<f4", "(64,)"), FloatData(b), 3));
  sp::Result r =
      Cli({"run", Path("va.bpmod"), "-f", "vector_add", "-i", "a=" + Path("a.npy"), "-i",
           "b=" + Path("b.npy"), "-o", "c=" + Path("c.npy"), "-r", "1", "--allow-native"});
  ASSERT_EQ(r.exit_code, 0) << Show(r);
  const std::vector<float> c = ReadFloatNpy(Path("c.npy"), 64);
  ASSERT_EQ(c.size(), 64u);
  for (size_t i = 0; i < 64; ++i) EXPECT_EQ(c[i], a[i] + b[i]) << i;
  // Random inputs (the default), an output saved, checked against the interpreter.
  sp::Result o = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--dim", "n=10", "-o",
                      "c=" + Path("c10.npy"), "-r", "1", "--check", "--allow-native"});
  ASSERT_EQ(o.exit_code, 0) << Show(o);
  EXPECT_TRUE(Contains(o.out, "matches the IR interpreter")) << Show(o);
  EXPECT_EQ(ReadFloatNpy(Path("c10.npy"), 10).size(), 10u);
}

TEST_F(NpyCli, MismatchesNameTheParameterTheExpectedAndTheFound) {
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  const std::vector<float> f1000(1000, 1.0f);
  WriteFile(Path("b.npy"), NpyBytes(Dict("<f4", "(1000,)"), FloatData(f1000)));
  struct Case {
    std::string name;
    std::string bytes;
    std::vector<std::string> says;
  };
  const std::vector<Case> cases = {
      {"f8.npy",
       NpyBytes(Dict("<f8", "(1000,)"), std::string(8000, '\0')),
       {"parameter 'a' of function 'vector_add' is float32 ('<f4') of shape (1000,)",
        "holds float64 ('<f8') of shape (1000,)"}},
      {"short.npy",
       NpyBytes(Dict("<f4", "(999,)"), std::string(999 * 4, '\0')),
       {"parameter 'a'", "of shape (1000,)", "holds float32 ('<f4') of shape (999,)"}},
      {"2d.npy",
       NpyBytes(Dict("<f4", "(10, 100)"), std::string(4000, '\0')),
       {"parameter 'a'", "of shape (10, 100)"}},
      {"bool.npy",
       NpyBytes(Dict("|b1", "(1000,)"), std::string(1000, '\1')),
       {"parameter 'a'", "holds bool ('|b1')"}},
      {"big_endian.npy",
       NpyBytes(Dict(">f4", "(1000,)"), std::string(4000, '\0')),
       {"'>f4' is big-endian", "newbyteorder('<')"}},
      {"fortran.npy",
       NpyBytes(Dict("<f4", "(10, 100)", true), std::string(4000, '\0')),
       {"Fortran (column-major) order", "ascontiguousarray"}},
      {"complex.npy",
       NpyBytes(Dict("<c8", "(1000,)"), std::string(8000, '\0')),
       {"dtype '<c8' is not one a kernel takes"}},
  };
  for (const Case& c : cases) {
    WriteFile(Path(c.name), c.bytes);
    sp::Result r = Cli({"run", Path("va.bpmod"), "-f", "vector_add", "--dim", "n=1000", "-i",
                        "a=" + Path(c.name), "-i", "b=" + Path("b.npy"), "--allow-native"});
    EXPECT_EQ(r.exit_code, 2) << c.name << Show(r);
    EXPECT_TRUE(r.out.empty()) << c.name << Show(r);
    EXPECT_TRUE(Contains(r.err, "--input a=" + Path(c.name) + ": ")) << c.name << Show(r);
    for (const std::string& part : c.says) {
      EXPECT_TRUE(Contains(r.err, part)) << c.name << ": " << part << Show(r);
    }
  }
}

TEST_F(NpyCli, HostileFilesGiveAnErrorNeverACrashOrAGiantAllocation) {
  ASSERT_TRUE(BuildModule("vector_add.bpir", "c", "vector_add", "va.bpmod"));
  std::string huge_header_v2 = "\x93NUMPY\x02";
  huge_header_v2 += '\0';
  huge_header_v2 += std::string("\xff\xff\xff\x7f", 4);
  std::string huge_header_v1 = "\x93NUMPY\x01";
  huge_header_v1 += '\0';
  huge_header_v1 += std::string("\xff\xff", 2) + "{'descr': '<f4'";
  // 65 dimensions of extent 1: more than numpy allows.
  std::string many = "(";
  for (int i = 0; i < 65; ++i) many += "1, ";
  many += ")";
  struct Case {
    std::string name;
    std::string bytes;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"truncated.npy", NpyBytes(Dict("<f4", "(1000,)"), std::string(100, '\0')),
       "is truncated: shape (1000,) of <f4 needs 4000 bytes of data, the file holds 100"},
      {"huge_shape.npy", NpyBytes(Dict("<f4", "(2305843009213693951,)"), std::string(16, '\0')),
       "is truncated"},
      {"overflow.npy", NpyBytes(Dict("<f4", "(4294967296, 4294967296)"), ""),
       "does not fit in 64 bits"},
      {"extent_overflow.npy", NpyBytes(Dict("<f4", "(99999999999999999999,)"), ""),
       "larger than 2^63 - 1"},
      {"trailing.npy", NpyBytes(Dict("<f4", "(4,)"), std::string(20, '\0')),
       "4 bytes after the data"},
      {"magic.npy", "PK\x03\x04 a zip file, not an array", "is not an .npy file"},
      {"empty.npy", "", "is not an .npy file"},
      {"version.npy", NpyBytes(Dict("<f4", "(4,)"), std::string(16, '\0'), 9),
       "format version 9.0"},
      {"header_v2.npy", huge_header_v2, "declares a header of 2147483647 bytes"},
      {"header_v1.npy", huge_header_v1, "truncated inside its header"},
      {"not_a_dict.npy", NpyBytes("[1, 2, 3]", ""), "expected '{'"},
      {"unknown_key.npy",
       NpyBytes("{'descr': '<f4', 'fortran_order': False, 'shape': (4,), 'x': 'y'}",
                std::string(16, '\0')),
       "header key 'x'"},
      {"missing_key.npy", NpyBytes("{'descr': '<f4', 'shape': (4,)}", std::string(16, '\0')),
       "lacks descr"},
      {"negative.npy", NpyBytes(Dict("<f4", "(-4,)"), std::string(16, '\0')),
       "expected a non-negative integer"},
      {"structured.npy",
       NpyBytes("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (4,)}",
                std::string(16, '\0')),
       "structured"},
      {"dims.npy", NpyBytes(Dict("<f4", many), std::string(4, '\0')), "more than 64 dimensions"},
  };
  for (const Case& c : cases) {
    WriteFile(Path(c.name), c.bytes);
    sp::Result r = Cli(
        {"run", Path("va.bpmod"), "-f", "vector_add", "-i", "a=" + Path(c.name), "--allow-native"});
    EXPECT_EQ(r.exit_code, 2) << c.name << Show(r);
    EXPECT_EQ(r.term_signal, 0) << c.name << Show(r);
    EXPECT_TRUE(Contains(r.err, Path(c.name))) << c.name << Show(r);
    EXPECT_TRUE(Contains(r.err, c.says)) << c.name << ": " << c.says << Show(r);
  }
  // A directory and /dev/zero (a stream without the magic) too.
  for (const std::string& path : {dir_.string(), std::string("/dev/zero")}) {
    sp::Result r =
        Cli({"run", Path("va.bpmod"), "-f", "vector_add", "-i", "a=" + path, "--allow-native"});
    EXPECT_EQ(r.exit_code, 2) << path << Show(r);
    EXPECT_TRUE(Contains(r.err, path)) << Show(r);
  }
}

}  // namespace
