// SPDX-License-Identifier: Apache-2.0
#include "compiler_flags.h"

#include <backplane/sdk/target.hpp>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace backplane {
namespace cpu {

namespace {

namespace sdk = ::backplane::sdk;

// Why a flag is refused, by what it does. Only the first matching prefix picks the reason:
// anything not on the allowlist is refused whatever it starts with.
constexpr const char* kRunsPrograms =
    "runs, loads or configures another program (a wrapper, the assembler, the linker, a "
    "compiler plugin, a specs file), and a Target must never choose what runs";
constexpr const char* kNamesFiles =
    "names a file or folder to read or write (a response file, headers, libraries, a "
    "sysroot, the output, dumps or profiles), and a Target must never choose those";
constexpr const char* kDefinesMacros =
    "defines or undefines a macro: the generated code reads none, and one could redefine what "
    "its checks rely on";
constexpr const char* kFixedByTheGenerator =
    "changes the language, the output or how it is built and linked, which the c code "
    "generator fixes (the module relies on them)";
constexpr const char* kNotListed = "is not on the list of flags a Target may carry";

struct RefusedPrefix {
  const char* prefix;
  const char* reason;
};

constexpr RefusedPrefix kRefused[] = {
    {"@", kNamesFiles},  // a response file: more options, read from a file
    {"-wrapper", kRunsPrograms},
    {"--wrapper", kRunsPrograms},
    {"-B", kRunsPrograms},
    {"--prefix", kRunsPrograms},
    {"-specs", kRunsPrograms},
    {"--specs", kRunsPrograms},
    {"-fplugin", kRunsPrograms},
    {"-fpass-plugin", kRunsPrograms},
    {"-fuse-ld", kRunsPrograms},
    {"--ld-path", kRunsPrograms},
    {"-fuse-linker-plugin", kRunsPrograms},
    {"-fno-use-linker-plugin", kRunsPrograms},
    {"-flto", kRunsPrograms},
    {"-fintegrated-as", kRunsPrograms},
    {"-fno-integrated-as", kRunsPrograms},
    {"-no-integrated-as", kRunsPrograms},
    {"-X", kRunsPrograms},  // -Xlinker, -Xassembler, -Xpreprocessor, -Xclang, -Xopenmp-target
    {"-Wl,", kRunsPrograms},
    {"-Wa,", kRunsPrograms},
    {"-Wp,", kRunsPrograms},
    {"-mllvm", kRunsPrograms},
    {"-ccc-", kRunsPrograms},
    {"--gcc-toolchain", kRunsPrograms},
    {"--gcc-install-dir", kRunsPrograms},
    {"--driver-mode", kRunsPrograms},
    {"-i", kNamesFiles},  // -include, -imacros, -isystem, -iquote, -idirafter, -isysroot
    {"-I", kNamesFiles},
    {"--sysroot", kNamesFiles},
    {"-L", kNamesFiles},
    {"-l", kNamesFiles},
    {"-T", kNamesFiles},
    {"-o", kNamesFiles},
    {"-M", kNamesFiles},  // dependency files
    {"-save-temps", kNamesFiles},
    {"-dump", kNamesFiles},
    {"-aux-info", kNamesFiles},
    {"-fdump", kNamesFiles},
    {"-fprofile", kNamesFiles},
    {"-fauto-profile", kNamesFiles},
    {"-fopt-info", kNamesFiles},
    {"-fstack-usage", kNamesFiles},
    {"-fcallgraph-info", kNamesFiles},
    {"-fsave-optimization-record", kNamesFiles},
    {"-fdebug-prefix-map", kNamesFiles},
    {"-ffile-prefix-map", kNamesFiles},
    {"-fmacro-prefix-map", kNamesFiles},
    {"-ftest-coverage", kNamesFiles},
    {"--coverage", kNamesFiles},
    {"-finstrument-functions-exclude-file-list", kNamesFiles},
    {"-fcrash-diagnostics-dir", kNamesFiles},
    {"-D", kDefinesMacros},
    {"-U", kDefinesMacros},
    {"-x", kFixedByTheGenerator},
    {"-std", kFixedByTheGenerator},
    {"-ansi", kFixedByTheGenerator},
    {"-c", kFixedByTheGenerator},
    {"-S", kFixedByTheGenerator},
    {"-E", kFixedByTheGenerator},
    {"-shared", kFixedByTheGenerator},
    {"-static", kFixedByTheGenerator},
    {"-fPIC", kFixedByTheGenerator},
    {"-fpic", kFixedByTheGenerator},
    {"-fPIE", kFixedByTheGenerator},
    {"-fpie", kFixedByTheGenerator},
    {"-pie", kFixedByTheGenerator},
    {"-no-pie", kFixedByTheGenerator},
    {"-nostdlib", kFixedByTheGenerator},
    {"-nostartfiles", kFixedByTheGenerator},
    {"-nodefaultlibs", kFixedByTheGenerator},
    {"-fopenmp", kFixedByTheGenerator},
    {"-fno-openmp", kFixedByTheGenerator},
    {"-fwrapv", kFixedByTheGenerator},
    {"-fno-wrapv", kFixedByTheGenerator},
    {"-ftrapv", kFixedByTheGenerator},
    {"-fvisibility", kFixedByTheGenerator},
    {"-fsanitize", kFixedByTheGenerator},
    {"-fno-sanitize", kFixedByTheGenerator},
};

// -f<name> and -fno-<name> a Target may carry: optimisation, vectorization, floating-point
// and hardening choices that change only the code the compiler generates.
const std::set<std::string>& SafeFFlags() {
  static const std::set<std::string> flags = {
      "associative-math",
      "asynchronous-unwind-tables",
      "builtin",
      "cx-limited-range",
      "fast-math",
      "finite-math-only",
      "gcse",
      "inline",
      "inline-functions",
      "inline-small-functions",
      "ivopts",
      "jump-tables",
      "loop-interchange",
      "loop-unroll-and-jam",
      "math-errno",
      "merge-all-constants",
      "omit-frame-pointer",
      "optimize-sibling-calls",
      "peel-loops",
      "plt",
      "predictive-commoning",
      "prefetch-loop-arrays",
      "reciprocal-math",
      "rounding-math",
      "schedule-insns",
      "schedule-insns2",
      "semantic-interposition",
      "signaling-nans",
      "signed-zeros",
      "slp-vectorize",
      "split-loops",
      "stack-clash-protection",
      "stack-protector",
      "stack-protector-all",
      "stack-protector-strong",
      "strict-aliasing",
      "trapping-math",
      "tree-loop-distribution",
      "tree-loop-vectorize",
      "tree-slp-vectorize",
      "tree-vectorize",
      "unroll-all-loops",
      "unroll-loops",
      "unsafe-math-optimizations",
      "unswitch-loops",
      "unwind-tables",
      "vectorize",
  };
  return flags;
}

// -f<name>=<value> a Target may carry, with the values each takes.
const std::map<std::string, std::set<std::string>>& ValuedFFlags() {
  static const std::map<std::string, std::set<std::string>> flags = {
      {"cf-protection", {"full", "branch", "return", "none", "check"}},
      {"excess-precision", {"fast", "standard", "16"}},
      {"fp-contract", {"off", "on", "fast", "fast-honor-pragmas"}},
      {"simd-cost-model", {"unlimited", "dynamic", "cheap", "very-cheap"}},
      {"vect-cost-model", {"unlimited", "dynamic", "cheap", "very-cheap"}},
  };
  return flags;
}

bool StartsWith(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

// Whether `s` is not empty, starts with a letter or digit, and has only letters, digits and
// the characters of `extra`.
bool IsWord(const std::string& s, const char* extra) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && std::strchr(extra, c) == nullptr) {
      return false;
    }
  }
  return true;
}

bool IsDigits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  }
  return true;
}

// A CPU or architecture name: "skylake", "x86-64-v3", "armv8.2-a+crypto", "native".
bool IsCpuName(const std::string& s) { return s.size() <= 64 && IsWord(s, "_.+-"); }

bool IsAllowed(const std::string& f) {
  static const std::set<std::string> kExact = {
      "-O",        "-O0",       "-O1",       "-O2",    "-O3",    "-Os",     "-Oz",
      "-Og",       "-Ofast",    "-g",        "-g0",    "-g1",    "-g2",     "-g3",
      "-ggdb",     "-ggdb0",    "-ggdb1",    "-ggdb2", "-ggdb3", "-gdwarf", "-gdwarf-2",
      "-gdwarf-3", "-gdwarf-4", "-gdwarf-5", "-w"};
  if (kExact.count(f) != 0) return true;
  for (const char* p : {"-march=", "-mtune=", "-mcpu="}) {
    if (StartsWith(f, p)) return IsCpuName(f.substr(std::strlen(p)));
  }
  if (StartsWith(f, "-W")) {
    // A warning: -Wall, -Wno-unused, -Werror, -Wstrict-overflow=2. Not -Wl, -Wa, -Wp.
    const std::string w = f.substr(2);
    const size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    return name.size() > 1 && IsWord(name, "-") &&
           (eq == std::string::npos || IsWord(w.substr(eq + 1), "-"));
  }
  if (StartsWith(f, "-m")) {
    // A machine option: -mavx2, -mno-fma, -mprefer-vector-width=256, -mfpu=neon-fp-armv8.
    const std::string m = f.substr(2);
    const size_t eq = m.find('=');
    const std::string name = m.substr(0, eq);
    return name != "llvm" && IsWord(name, "_.-") &&
           (eq == std::string::npos || IsWord(m.substr(eq + 1), "_.,+-"));
  }
  if (StartsWith(f, "-f")) {
    const std::string rest = f.substr(2);
    const size_t eq = rest.find('=');
    if (eq == std::string::npos) {
      const std::string name = StartsWith(rest, "no-") ? rest.substr(3) : rest;
      return SafeFFlags().count(name) != 0;
    }
    const std::string name = rest.substr(0, eq), value = rest.substr(eq + 1);
    auto it = ValuedFFlags().find(name);
    if (it != ValuedFFlags().end()) return it->second.count(value) != 0;
    // -falign-functions=32, -falign-loops=16:11:8 (alignment, with gcc's max-skip forms).
    for (const char* align : {"align-functions", "align-loops", "align-jumps", "align-labels"}) {
      if (name == align) {
        return IsDigits(value.substr(0, 1)) &&
               value.find_first_not_of("0123456789:") == std::string::npos;
      }
    }
    return false;
  }
  return false;
}

// `s` for a message: quoted, cut at 80 characters.
std::string Shown(const std::string& s) {
  return "'" + (s.size() > 80 ? s.substr(0, 77) + "..." : s) + "'";
}

}  // namespace

std::string CFlagRefusal(const std::string& flag) {
  if (IsAllowed(flag)) return "";
  for (const RefusedPrefix& r : kRefused) {
    if (StartsWith(flag, r.prefix)) return r.reason;
  }
  return kNotListed;
}

void CheckCFlags(const std::vector<std::string>& flags) {
  for (const std::string& flag : flags) {
    if (flag.empty()) {
      sdk::ThrowTargetAttrError("cflags",
                                "has an empty flag; remove it (separate flags with commas, "
                                "e.g. -cflags=-O2,-g)");
    }
    const std::string why = CFlagRefusal(flag);
    if (why.empty()) continue;
    sdk::ThrowTargetAttrError(
        "cflags",
        "has " + Shown(flag) + ", which " + why +
            ". A Target is data: its cflags may hold only optimisation and code-generation "
            "flags (-O<level>, -g, -march=, -mtune=, -mcpu=, -m<feature>, -mno-<feature>, "
            "-W<warning> and the -f flags docs/security.md lists under \"Targets\"). Remove it; "
            "to run another compiler or pass other options, configure the host: BACKPLANE_CC "
            "names the compiler (a wrapper of your own may add options)");
  }
}

void CheckCompilerName(const std::string& cc) {
  // [triple-]cc|gcc|clang[-version]: the last '-'-separated words are the compiler and its
  // optional version; the words before them, if any, the triple.
  bool ok = cc.size() <= 100 && IsWord(cc, "_.-") && cc.find("..") == std::string::npos;
  if (ok) {
    std::vector<std::string> words;
    for (size_t start = 0;;) {
      const size_t dash = cc.find('-', start);
      words.push_back(cc.substr(start, dash - start));
      if (dash == std::string::npos) break;
      start = dash + 1;
    }
    const bool versioned = words.size() > 1 && IsWord(words.back(), ".") &&
                           std::isdigit(static_cast<unsigned char>(words.back()[0]));
    const std::string& name = words[words.size() - (versioned ? 2 : 1)];
    ok = name == "cc" || name == "gcc" || name == "clang";
    for (const std::string& w : words) ok = ok && !w.empty();
  }
  if (!ok) {
    sdk::ThrowTargetAttrError(
        "cc", "is " + Shown(cc) +
                  "; a Target may name its compiler only by a plain name: cc (the host's "
                  "compiler), gcc or clang, with an optional triple in front and version "
                  "behind (aarch64-linux-gnu-gcc, clang-16), never a path or arguments. To "
                  "run another compiler, configure the host: set BACKPLANE_CC");
  }
}

void CheckTriple(const std::string& triple) {
  if (triple.size() > 100 || !IsWord(triple, "_.-") || triple.find("--") != std::string::npos ||
      triple.back() == '-') {
    sdk::ThrowTargetAttrError("mtriple", "is " + Shown(triple) +
                                             "; expected a target triple: words of letters, "
                                             "digits, '_' and '.' joined by '-', e.g. "
                                             "x86_64-linux-gnu or aarch64-linux-gnu");
  }
}

void CheckCpuName(const std::string& attr, const std::string& value) {
  if (!IsCpuName(value)) {
    sdk::ThrowTargetAttrError(attr, "is " + Shown(value) +
                                        "; expected a CPU or architecture name of letters, "
                                        "digits, '_', '.', '+' and '-', e.g. skylake, "
                                        "x86-64-v3, armv8.2-a+crypto or native");
  }
}

void CheckFeature(const std::string& feature) {
  if (feature.size() < 2 || (feature[0] != '+' && feature[0] != '-') ||
      !IsWord(feature.substr(1), "_.-") || feature.substr(1) == "llvm") {
    sdk::ThrowTargetAttrError("mattr", "has " + Shown(feature) +
                                           "; expected +feature or -feature (letters, digits, "
                                           "'_', '.' and '-'), e.g. +avx2,-fma");
  }
}

}  // namespace cpu
}  // namespace backplane
