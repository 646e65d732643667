// SPDX-License-Identifier: Apache-2.0
// The CPU plugin's TargetKinds: `c` (C source compiled by a host C compiler, on device type
// cpu) and the cpu tags. `llvm` is declared when LLVM code generation exists.
#ifndef BACKPLANE_PLUGINS_CPU_TARGET_H_
#define BACKPLANE_PLUGINS_CPU_TARGET_H_

#include <string>

namespace backplane {
namespace cpu {

// The LLVM-style triple of the machine the plugin runs on, e.g. "x86_64-linux-gnu": the
// default of the `c` kind's "mtriple".
std::string HostTriple();

// The instruction set level of this machine's CPU as a compiler's -march names it, for
// Target::FromDevice: on x86-64 the highest of x86-64-v4 (AVX-512), x86-64-v3 (AVX2, FMA),
// x86-64-v2 and x86-64 whose every feature the CPU reports; "" on other architectures.
std::string HostArchLevel();

// Checks and completes the attributes of a `c` Target (JSON object text in and out):
// opt-level is 0..3, num-cores >= 1, cc and mtriple are not empty, what reaches the
// compiler's command line is what a Target may carry (cc, mtriple, mcpu, march, mattr and
// cflags: compiler_flags.h), and "fast-math": true turns on the six fast-math-* flags. Throws
// backplane::Error naming the attribute. `from_host_cpu`: the Target is built from this
// machine's CPU (FromDevice), so a Target that names no architecture gets HostArchLevel().
std::string CanonicalizeC(const std::string& attrs_json, bool from_host_cpu = false);

// Registers the kind `c` and the cpu tags. Called from the plugin's entry point.
void RegisterTargetKinds();

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_TARGET_H_
