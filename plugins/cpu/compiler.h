// SPDX-License-Identifier: Apache-2.0
// Runs the system C compiler for the c code generator, with a disk cache of the results.
#ifndef BACKPLANE_PLUGINS_CPU_COMPILER_H_
#define BACKPLANE_PLUGINS_CPU_COMPILER_H_

#include <backplane/backplane.hpp>
#include <string>
#include <vector>

namespace backplane {
namespace cpu {

// How to compile: the compiler and its flags, derived from a `c` Target.
struct CompileOptions {
  std::string cc;                  // the Target's cc: "cc" or a compiler's plain name
  std::vector<std::string> flags;  // everything between cc and the file names
  std::string triple;              // the Target's mtriple
  int num_threads = 0;             // the Target's num-cores (0: not set)
};

// The compiler and flags for `target` (kind `c`): -O<opt-level>, -march/-mtune or -mcpu, one
// -m<feature> per mattr, the fast-math flags, then the Target's cflags. A Target whose mtriple
// is not this machine's and whose cc is the default "cc" uses "<mtriple>-gcc". What a Target
// may carry is checked here again (compiler_flags.h): Error(BP_ERR_INVALID_ARGUMENT) if not.
CompileOptions OptionsFromTarget(const Target& target);

// The program that compiles for the Target's `cc`. The compiler is host configuration, never
// the Target's: "cc" is the host's compiler, $BACKPLANE_CC when the host sets it (read with
// secure_getenv), else "cc" on PATH; a plain name the Target gives ("gcc", "clang-16",
// "aarch64-linux-gnu-gcc") is looked up on PATH. In a secure process (AT_SECURE: set-user-ID,
// set-group-ID) neither PATH nor BACKPLANE_CC counts: "cc" is the compiler CMake found at
// configure time (BACKPLANE_CONFIGURED_CC), else /usr/bin/cc, and a name is /usr/bin/<name> or
// /bin/<name>, each used only if it and its folders are root's (or this process's effective
// user's) and no one else may write them; the compiler then runs with a fixed environment.
// Error(BP_ERR_NOT_FOUND) when none qualifies.
std::string CompilerProgram(const std::string& cc);

// Where compiled kernels are cached: $XDG_CACHE_HOME/backplane/c, else ~/.cache/backplane/c.
// Created (mode 0700) on first use. A folder that another user owns or that others may write
// to is not used (a shared library loaded from it would run their code); then a private
// temporary folder serves this process instead.
std::string CacheDir();

// Compiles `source` to a shared library and returns its path in the cache. A library
// compiled before from the same source with the same compiler (its --version) and flags is
// reused without running the compiler. A compiler that cannot be run, or that fails, is an
// Error naming the compiler, its messages and the generated line they point at.
std::string CompileSharedLibrary(const std::string& source, const CompileOptions& options);

// Stores `library` (the bytes of a shared library) in the cache and returns its path.
std::string CacheLibraryBytes(const std::string& library);

// The bytes of a file (throws an Error naming it on failure).
std::string ReadFileBytes(const std::string& path);

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_COMPILER_H_
