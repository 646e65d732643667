// SPDX-License-Identifier: Apache-2.0
// The float16 kernel the GPU code generators' tests share (opencl, vulkan): float16 buffers, a
// float16 scalar, a shared float16 array across a barrier and + - * / max, each rounded to half.
// A test builds kHalfMixText for its Target, runs it on HalfMixInputs(seed) through RunHalfMix and
// compares with HalfMixReference (the IR interpreter's result) bit for bit.
#ifndef BACKPLANE_TESTS_PLUGINS_HALF_MIX_H_
#define BACKPLANE_TESTS_PLUGINS_HALF_MIX_H_

#include <backplane/backplane.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <cstdint>
#include <random>
#include <vector>

namespace bptest {

constexpr const char* kHalfMixText = R"(# backplane-ir 1
func half_mix(n: int32, s: float16, a: buffer<float16>[n], b: buffer<float16>[n], o: buffer<float16>[n]) {
  for t in thread(threadIdx.x, 0, 64) {
    alloc tile: float16[64] shared
    tile[t] = a[t] * s + b[t]
    barrier
    o[t] = (tile[63 - t] - b[t]) / (max(tile[t], a[t]) + float16(1.5))
  }
}
)";
constexpr int64_t kHalfMixN = 64;
constexpr double kHalfMixScale = 1.25;  // s

// The inputs a and b for `seed`: 64 finite halves each from 2^-5 to 2^3, either sign (random
// sign, exponent and significand).
struct HalfMixInputs {
  std::vector<uint16_t> a, b;
  explicit HalfMixInputs(uint32_t seed) : a(kHalfMixN), b(kHalfMixN) {
    std::mt19937 rng(seed);
    for (uint16_t& h : a) h = static_cast<uint16_t>((rng() & 0x83ff) | ((10 + rng() % 8) << 10));
    for (uint16_t& h : b) h = static_cast<uint16_t>((rng() & 0x83ff) | ((10 + rng() % 8) << 10));
  }
};

// o as the IR interpreter computes it.
inline std::vector<uint16_t> HalfMixReference(const HalfMixInputs& in) {
  namespace ir = backplane::ir;
  const int64_t shape = kHalfMixN;
  std::vector<uint16_t> a = in.a, b = in.b, want(kHalfMixN, 0);
  ir::Interpreter(ir::Parse(kHalfMixText))
      .Run("half_mix", {ir::IntArg(kHalfMixN), ir::FloatArg(kHalfMixScale),
                        ir::BufferArg(a.data(), ir::Float16(), 1, &shape),
                        ir::BufferArg(b.data(), ir::Float16(), 1, &shape),
                        ir::BufferArg(want.data(), ir::Float16(), 1, &shape)});
  return want;
}

// o as `m` computes it on `dev` (every element written over 0xffff first).
inline std::vector<uint16_t> RunHalfMix(const backplane::Module& m, backplane::Device dev,
                                        const HalfMixInputs& in) {
  const DLDataType f16{kDLFloat, 16, 1};
  const size_t bytes = kHalfMixN * 2;
  backplane::Tensor ta = backplane::Tensor::Empty({kHalfMixN}, f16, dev);
  backplane::Tensor tb = backplane::Tensor::Empty({kHalfMixN}, f16, dev);
  backplane::Tensor to = backplane::Tensor::Empty({kHalfMixN}, f16, dev);
  ta.CopyFromBytes(in.a.data(), bytes);
  tb.CopyFromBytes(in.b.data(), bytes);
  m.GetFunction("half_mix")(kHalfMixN, kHalfMixScale, ta.dl(), tb.dl(), to.dl());
  std::vector<uint16_t> got(kHalfMixN, 0xffff);
  to.CopyToBytes(got.data(), bytes);
  return got;
}

}  // namespace bptest

#endif  // BACKPLANE_TESTS_PLUGINS_HALF_MIX_H_
