// SPDX-License-Identifier: Apache-2.0
// The proof that the reference kernels are right: every kernel of the catalog, CPU and GPU
// (thread-bound) alike, runs in the IR interpreter at its `small` sizes and at a few other
// sizes, and its outputs match the catalog's float64 reference within the case's tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace bir = backplane::ir;
namespace bk = backplane::kernels;

namespace {

// One interpreter per kernel file, made once.
const bir::Interpreter& InterpreterFor(const std::string& file) {
  static std::map<std::string, std::unique_ptr<bir::Interpreter>> cache;
  auto it = cache.find(file);
  if (it == cache.end()) {
    auto interp = std::make_unique<bir::Interpreter>(bir::Parse(bk::ReadKernelFile(file), file));
    it = cache.emplace(file, std::move(interp)).first;
  }
  return *it->second;
}

// A buffer argument's elements in the dtype the kernel reads and writes.
class Storage {
 public:
  explicit Storage(const bk::Arg& a) : dtype_(a.dtype) {
    if (dtype_ == bir::Float32()) {
      f32_.assign(a.data.begin(), a.data.end());
    } else if (dtype_ == bir::Float64()) {
      f64_ = a.data;
    } else if (dtype_ == bir::Int32()) {
      i32_.assign(a.data.begin(), a.data.end());
    } else {
      throw std::runtime_error("no storage for the dtype of " + a.name);
    }
  }
  void* data() {
    if (dtype_ == bir::Float32()) return f32_.data();
    if (dtype_ == bir::Float64()) return f64_.data();
    return i32_.data();
  }
  void CopyTo(bk::Arg& a) const {
    for (size_t i = 0; i < a.data.size(); ++i) {
      a.data[i] = dtype_ == bir::Float32() ? f32_[i] : dtype_ == bir::Float64() ? f64_[i] : i32_[i];
    }
  }

 private:
  bir::DType dtype_;
  std::vector<float> f32_;
  std::vector<double> f64_;
  std::vector<int32_t> i32_;
};

// Runs `c` with `interp` on arguments made for `dims` and `seed`; the largest RelativeError
// of its outputs against the reference, by output name.
std::map<std::string, double> ErrorsOn(const bir::Interpreter& interp, const bk::Case& c,
                                       std::vector<bk::Arg> args) {
  std::vector<bk::Arg> want = args;
  c.reference(want);

  std::vector<Storage> storage;
  storage.reserve(args.size());
  std::vector<bir::ArgView> views;
  for (const bk::Arg& a : args) {
    if (!a.is_buffer) {
      views.push_back(a.dtype.is_float() ? bir::FloatArg(a.scalar)
                                         : bir::IntArg(static_cast<int64_t>(a.scalar)));
      continue;
    }
    storage.emplace_back(a);
    views.push_back(bir::BufferArg(storage.back().data(), a.dtype, static_cast<int>(a.shape.size()),
                                   a.shape.data()));
  }
  interp.Run(c.func, views);

  std::map<std::string, double> errors;
  size_t s = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_buffer) continue;
    storage[s++].CopyTo(args[i]);
    if (args[i].is_output) errors[args[i].name] = bk::RelativeError(args[i], want[i]);
  }
  return errors;
}

std::map<std::string, double> Errors(const bir::Interpreter& interp, const bk::Case& c,
                                     const bk::Dims& dims, uint64_t seed) {
  return ErrorsOn(interp, c, c.make_args(dims, seed));
}

// Runs `c` in the interpreter and checks every output against the reference.
void RunAndCheck(const bk::Case& c, const bk::Dims& dims, uint64_t seed) {
  for (const auto& [name, err] : Errors(InterpreterFor(c.file), c, dims, seed)) {
    EXPECT_LE(err, c.tolerance) << c.func << " output '" << name << "' (seed " << seed << ")";
  }
}

std::vector<std::string> AllFuncs() {
  std::vector<std::string> names;
  for (const bk::Case& c : bk::Catalog()) names.push_back(c.func);
  return names;
}

class InterpCase : public ::testing::TestWithParam<std::string> {
 protected:
  const bk::Case& TheCase() {
    const bk::Case* c = bk::Find(GetParam());
    if (c == nullptr) throw std::runtime_error("no case " + GetParam());
    return *c;
  }
};

TEST_P(InterpCase, SmallSizesMatchTheReference) {
  const bk::Case& c = TheCase();
  RunAndCheck(c, c.small, 1);
  RunAndCheck(c, c.small, 2);
}

// Every size 1 (pad 0): a single element, row or pixel, where every loop runs once and
// every tile is an edge tile.
TEST_P(InterpCase, SizeOneMatchesTheReference) {
  const bk::Case& c = TheCase();
  bk::Dims ones = c.small;
  for (auto& kv : ones) kv.second = kv.first == "pad" ? 0 : 1;
  RunAndCheck(c, ones, 3);
}

// Sizes that are multiples of every tile and chunk (so only the fast paths run), and
// larger than one tile.
TEST_P(InterpCase, WholeTilesMatchTheReference) {
  const bk::Case& c = TheCase();
  const std::map<std::string, bk::Dims> whole = {
      {"vector_add.bpir", {{"n", 3072}}},
      {"saxpy.bpir", {{"n", 3072}}},
      {"sum.bpir", {{"n", 8192}}},
      {"softmax.bpir", {{"rows", 4}, {"cols", 512}}},
      {"matmul.bpir", {{"m", 8}, {"n", 128}, {"k", 256}}},
      {"transpose.bpir", {{"m", 64}, {"n", 32}}},
      {"conv2d.bpir",
       {{"batch", 1},
        {"c_in", 2},
        {"c_out", 2},
        {"h", 32},
        {"w", 32},
        {"kh", 3},
        {"kw", 3},
        {"pad", 1}}},
  };
  RunAndCheck(c, whole.at(c.file), 4);
}

// Empty inputs: nothing to read, and no access out of bounds; sum writes 0, matmul and
// conv2d write zeros.
TEST_P(InterpCase, ZeroSizesMatchTheReference) {
  const bk::Case& c = TheCase();
  const std::map<std::string, std::string> zero_dim = {
      {"vector_add.bpir", "n"}, {"saxpy.bpir", "n"},  {"sum.bpir", "n"},
      {"softmax.bpir", "cols"}, {"matmul.bpir", "k"}, {"transpose.bpir", "m"},
      {"conv2d.bpir", "c_in"},
  };
  bk::Dims zero = c.small;
  zero[zero_dim.at(c.file)] = 0;
  RunAndCheck(c, zero, 5);
}

// A block of 0 threads is refused, not an empty launch: every kernel with a block size
// param divides by it on the host (its grid or, for softmax_gpu, its passes over a row), so
// the host stops with the division naming the expression before any kernel runs. A block of 0
// with rows > 0 used to launch nothing and leave the output unwritten, silently.
TEST(InterpBlock, ABlockOfZeroThreadsIsRefused) {
  std::vector<std::string> tried;
  for (const bk::Case& c : bk::Catalog()) {
    if (c.block_param.empty()) continue;
    tried.push_back(c.func);
    bk::Dims dims = c.small;
    dims[c.block_param] = 0;
    try {
      Errors(InterpreterFor(c.file), c, dims, 6);
      ADD_FAILURE() << c.func << " ran with a block of 0 threads";
    } catch (const std::exception& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("integer division by zero in `"), std::string::npos)
          << c.func << ": " << what;
      EXPECT_NE(what.find(c.block_param), std::string::npos) << c.func << ": " << what;
    }
  }
  EXPECT_EQ(tried, (std::vector<std::string>{"softmax_gpu", "softmax_rows_gpu", "matmul_tiled_gpu",
                                             "matmul_tiled4_gpu"}));
}

// conv2d's CPU chunks in the interpreter: 33 input channels (a chunk of 32 and one of 1, the
// second starting from what the first stored) and 65 columns (a chunk of 64 and one of 1), kept
// small: the interpreter under AddressSanitizer is slow.
TEST(InterpConv2d, ChunksOfChannelsAndColumnsMatchTheReference) {
  const bk::Case& c = *bk::Find("conv2d");
  const bk::Dims dims = {{"batch", 1}, {"c_in", 33}, {"c_out", 3}, {"h", 2},
                         {"w", 65},    {"kh", 3},    {"kw", 3},    {"pad", 1}};
  RunAndCheck(c, dims, 8);
}

// -inf inputs: a column of -inf adds nothing to a row's sum (exp(-inf - max) is 0). softmax_gpu's
// online sum (and softmax_rows_gpu's, four values at a time) must not compute -inf - -inf (NaN)
// when a thread's first columns are -inf. A NaN
// input makes its whole row NaN, as the reference does (RelativeError wants NaN where it has
// NaN).
TEST(InterpSoftmax, MinusInfinityColumnsAddNothing) {
  for (const char* func : {"softmax", "softmax_gpu", "softmax_rows_gpu"}) {
    const bk::Case& c = *bk::Find(func);
    std::vector<bk::Arg> args = c.make_args(c.small, 7);
    const int64_t cols = c.small.at("cols");
    for (bk::Arg& a : args) {
      if (a.name != "x") continue;
      for (int64_t j = 0; j < 5; ++j) a.data[j] = -INFINITY;               // row 0 starts so
      for (int64_t j = 0; j < cols; j += 2) a.data[cols + j] = -INFINITY;  // row 1, every other
      a.data[3 * cols - 1] = -INFINITY;                                    // row 2, the last
      a.data[4 * cols - 7] = NAN;  // row 3: one NaN makes the whole row NaN, as in the reference
    }
    for (const auto& [name, err] : ErrorsOn(InterpreterFor(c.file), c, args)) {
      EXPECT_LE(err, c.tolerance) << func << " output '" << name << "'";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, InterpCase, ::testing::ValuesIn(AllFuncs()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// The kernel file `file` with `from` replaced by `to` (once).
bir::Interpreter Edited(const std::string& file, const std::string& from, const std::string& to) {
  std::string text = bk::ReadKernelFile(file);
  const size_t at = text.find(from);
  if (at == std::string::npos) throw std::runtime_error("no '" + from + "' in " + file);
  text.replace(at, from.size(), to);
  return bir::Interpreter(bir::Parse(text, file));
}

double MaxError(const std::map<std::string, double>& errors) {
  double m = 0;
  for (const auto& kv : errors) m = std::max(m, kv.second);
  return m;
}

// The check catches a wrong kernel: vector_add with b scaled by 1.0001 in its fast path.
TEST(InterpCheck, AWrongKernelFails) {
  const bk::Case& c = *bk::Find("vector_add");
  bir::Interpreter wrong = Edited(c.file, "c[base + i] = a[base + i] + b[base + i]",
                                  "c[base + i] = a[base + i] + b[base + i] * 1.0001");
  EXPECT_GT(MaxError(Errors(wrong, c, c.small, 1)), c.tolerance);
}

// The interpreter runs a block's threads so that a missing barrier shows: transpose_gpu
// without its barrier reads tile elements no thread has written yet.
TEST(InterpCheck, AMissingBarrierFails) {
  const bk::Case& c = *bk::Find("transpose_gpu");
  bir::Interpreter racy = Edited(c.file, "          barrier\n", "");
  EXPECT_GT(MaxError(Errors(racy, c, c.small, 1)), c.tolerance);
}

}  // namespace
