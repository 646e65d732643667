// SPDX-License-Identifier: Apache-2.0
// Helpers of the IR tests: host tensors as ArgViews, kernel files, errors.
#ifndef BACKPLANE_TESTS_IR_IR_TEST_UTIL_HPP_
#define BACKPLANE_TESTS_IR_IR_TEST_UTIL_HPP_

#include <gtest/gtest.h>

#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace irtest {

namespace bir = backplane::ir;

template <typename T>
bir::DType DTypeOf();
template <>
inline bir::DType DTypeOf<float>() {
  return bir::Float32();
}
template <>
inline bir::DType DTypeOf<double>() {
  return bir::Float64();
}
template <>
inline bir::DType DTypeOf<int8_t>() {
  return bir::Int(8);
}
template <>
inline bir::DType DTypeOf<int32_t>() {
  return bir::Int32();
}
template <>
inline bir::DType DTypeOf<int64_t>() {
  return bir::Int64();
}
template <>
inline bir::DType DTypeOf<uint8_t>() {
  return bir::UInt(8);
}
template <>
inline bir::DType DTypeOf<uint64_t>() {
  return bir::UInt(64);
}

// A compact row-major host tensor.
template <typename T>
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<T> data;

  explicit Tensor(std::vector<int64_t> s, T fill = T()) : shape(std::move(s)) {
    int64_t n = 1;
    for (int64_t e : shape) n *= e;
    data.assign(static_cast<size_t>(n), fill);
  }
  bir::ArgView View(void* user = nullptr) {
    return bir::BufferArg(data.data(), DTypeOf<T>(), static_cast<int>(shape.size()), shape.data(),
                          nullptr, user);
  }
  T& operator[](size_t k) { return data[k]; }
  // Uniform values in [lo, hi).
  Tensor& Random(unsigned seed, double lo = -1, double hi = 1) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> dist(lo, hi);
    for (T& x : data) x = static_cast<T>(dist(rng));
    return *this;
  }
};

inline std::string ReadKernel(const std::string& name) {
  std::ifstream in(std::string(BACKPLANE_IR_KERNEL_DIR) + "/" + name);
  EXPECT_TRUE(in.good()) << name;
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline bir::Interpreter KernelInterpreter(const std::string& file) {
  return bir::Interpreter(bir::Parse(ReadKernel(file), file));
}

// The message of the Error that `fn` throws, with its kind; "no error" if it throws none.
inline std::string ErrorOf(const std::function<void()>& fn,
                           bir::ErrorKind kind = bir::ErrorKind::kValue) {
  try {
    fn();
  } catch (const bir::Error& e) {
    EXPECT_EQ(static_cast<int>(e.kind()), static_cast<int>(kind)) << e.what();
    return e.what();
  }
  return "no error";
}

// |got - want| within an absolute plus a relative tolerance.
inline ::testing::AssertionResult Near(double got, double want, double tol = 1e-4) {
  if (std::abs(got - want) <= tol * (1 + std::abs(want))) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", want " << want;
}

}  // namespace irtest

#endif  // BACKPLANE_TESTS_IR_IR_TEST_UTIL_HPP_
