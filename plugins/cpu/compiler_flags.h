// SPDX-License-Identifier: Apache-2.0
// What a `c` Target may put on the C compiler's command line. A Target is data (it may come
// from a user, a file or the network), so it may carry optimisation and code-generation flags
// only: never an option that runs, loads or configures another program, names a file to read
// or write, or changes what the code generator builds. The compiler itself is the host's
// choice (compiler.h); a Target's `cc` may only name one by a compiler's plain name.
// docs/security.md, "Targets", lists the rules; each refusal names the flag and the way out.
#ifndef BACKPLANE_PLUGINS_CPU_COMPILER_FLAGS_H_
#define BACKPLANE_PLUGINS_CPU_COMPILER_FLAGS_H_

#include <string>
#include <vector>

namespace backplane {
namespace cpu {

// Why `flag` may not be among a Target's cflags ("names a file to read ..."), or "" when it
// is on the allowlist: -O<level>, -g<level>, -march=/-mtune=/-mcpu=<name>, -m<feature>[=v],
// -mno-<feature>, -w, -W<warning>, and the -f<flag> / -fno-<flag> of a fixed list of
// optimisation and code-generation flags.
std::string CFlagRefusal(const std::string& flag);

// Each throws the canonicalizer's error (sdk::ThrowTargetAttrError) naming the attribute, the
// value, why it is refused and what to do instead.
// cflags: every flag passes CFlagRefusal.
void CheckCFlags(const std::vector<std::string>& flags);
// cc: "cc" (the host's compiler), or a compiler's plain name: an optional triple prefix,
// then cc, gcc or clang, then an optional version ("gcc", "clang-16",
// "aarch64-linux-gnu-gcc-12"). Never a path, never arguments.
void CheckCompilerName(const std::string& cc);
// mtriple: words of letters, digits, '_' and '.' joined by '-' ("x86_64-linux-gnu").
void CheckTriple(const std::string& triple);
// mcpu, march: a CPU or architecture name ("skylake", "armv8.2-a+crypto", "native").
void CheckCpuName(const std::string& attr, const std::string& value);
// mattr: "+feature" or "-feature", the feature of letters, digits, '_', '.' and '-'.
void CheckFeature(const std::string& feature);

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_COMPILER_FLAGS_H_
