// SPDX-License-Identifier: Apache-2.0
// What the construct clauses (tests_constructs.cc) share with the structural ones
// (tests_structural.cc: loops, shared memory and barriers, atomics, vector views): the size of
// their buffers, their seeds, their inputs and the run that compares a kernel with the IR
// interpreter.
#ifndef BACKPLANE_CONFORMANCE_CONSTRUCTS_H_
#define BACKPLANE_CONFORMANCE_CONSTRUCTS_H_

#include <backplane/ir/ir.hpp>
#include <backplane/runner/check.hpp>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "conformance.h"

namespace backplane {
namespace conformance {
namespace constructs {

constexpr int64_t kElements = 512;  // per buffer: 8 blocks of 64 threads on a GPU

// A stable seed for a clause (FNV-1a of its name): a failure's inputs are the same wherever
// the kit is built.
uint64_t SeedOf(const std::string& clause);
// kElements random int32 elements in [-1000, 1000].
std::vector<uint8_t> SmallI32(uint64_t seed);
// kElements floats of `t`: uniform in [lo, hi], or with `positive_exp` positive normal values
// of every exponent.
std::vector<uint8_t> DomainElements(ir::DType t, double lo_value, double hi_value,
                                    bool positive_exp, uint64_t seed);
// A buffer argument holding `bytes`, and one of `count` elements every byte `fill`.
runner::CheckArg Buffer(const std::string& name, const std::string& dtype,
                        std::vector<uint8_t> bytes);
runner::CheckArg Filled(const std::string& name, const std::string& dtype, size_t count,
                        uint8_t fill);
// The kernel's text: the body for i in [0, kElements), as a serial loop on a CPU and as 8
// blocks of 64 threads on a GPU.
std::string KernelText(const std::string& params, const std::string& body, bool gpu);
// Builds `text_for(gpu)` for every code generator of the device, runs `construct` on `args`
// there and on the interpreter, and compares every buffer bit for bit (or, with `ulp_bound`,
// floats within it); tests_constructs.cc says the rest.
void RunExact(
    Context& ctx, const std::string& clause, const std::function<std::string(bool gpu)>& text_for,
    const std::vector<runner::CheckArg>& args, bool optional,
    const std::function<double(const std::string& kind, size_t k, double ulp)>& ulp_bound = {},
    int64_t view_shift = 0);

// The clauses of tests_structural.cc, registered where AddConstructTests lists them.
void AddStructuralTests(std::vector<TestCase>* out, unsigned needs);

}  // namespace constructs
}  // namespace conformance
}  // namespace backplane

#endif  // BACKPLANE_CONFORMANCE_CONSTRUCTS_H_
