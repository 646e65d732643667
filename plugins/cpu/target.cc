// SPDX-License-Identifier: Apache-2.0
// The `c` TargetKind: TVM's CPU attributes (mcpu, march, mtriple, mattr, num-cores,
// opt-level, the fast-math flags) plus what the C code generator needs (cc, cflags).
#include "target.h"

#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/target.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compiler_flags.h"
#include "sysinfo.h"

namespace backplane {
namespace cpu {

namespace {

namespace sdk = ::backplane::sdk;
using Json = nlohmann::json;

constexpr const char* kKind = "c";

// The fast-math flags LLVM knows, each a bool attribute "fast-math-<flag>".
constexpr const char* kFastMathFlags[] = {"nnan", "ninf", "nsz", "arcp", "contract", "reassoc"};

// The type name a JSON value has, for messages.
std::string JsonTypeName(const Json& v) {
  if (v.is_number_integer()) return "integer";
  return v.type_name();
}

int64_t IntAttr(const Json& attrs, const char* name) {
  const Json& v = attrs.at(name);
  if (!v.is_number_integer()) {
    sdk::ThrowTargetAttrError(name, "is a " + JsonTypeName(v) + "; expected an integer");
  }
  return v.get<int64_t>();
}

}  // namespace

std::string HostTriple() {
#if defined(__x86_64__)
  std::string arch = "x86_64";
#elif defined(__aarch64__)
  std::string arch = "aarch64";
#elif defined(__i386__)
  std::string arch = "i686";
#elif defined(__riscv) && __riscv_xlen == 64
  std::string arch = "riscv64";
#elif defined(__powerpc64__) && defined(__LITTLE_ENDIAN__)
  std::string arch = "powerpc64le";
#else
  std::string arch = Machine().arch.empty() ? "unknown" : Machine().arch;
#endif
#if defined(__linux__) && defined(__GLIBC__)
  return arch + "-linux-gnu";
#elif defined(__linux__)
  return arch + "-linux-musl";
#elif defined(__APPLE__)
  return arch + "-apple-darwin";
#else
  return arch + "-unknown-unknown";
#endif
}

std::string HostArchLevel() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const std::string kLevel = [] {  // the CPU does not change: asked once
    __builtin_cpu_init();
    // The features of each level (the x86-64 psABI), as far as __builtin_cpu_supports names
    // them; every CPU with these has the level's others (lzcnt, movbe, f16c, cmpxchg16b, ...).
    const bool v2 = __builtin_cpu_supports("popcnt") && __builtin_cpu_supports("sse3") &&
                    __builtin_cpu_supports("ssse3") && __builtin_cpu_supports("sse4.1") &&
                    __builtin_cpu_supports("sse4.2");
    const bool v3 = v2 && __builtin_cpu_supports("avx") && __builtin_cpu_supports("avx2") &&
                    __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
                    __builtin_cpu_supports("fma");
    const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                    __builtin_cpu_supports("avx512cd") && __builtin_cpu_supports("avx512dq") &&
                    __builtin_cpu_supports("avx512vl");
    return v4 ? "x86-64-v4" : v3 ? "x86-64-v3" : v2 ? "x86-64-v2" : "x86-64";
  }();
  return kLevel;
#else
  return "";
#endif
}

std::string CanonicalizeC(const std::string& attrs_json, bool from_host_cpu) {
  Json attrs = Json::parse(attrs_json, nullptr, /*allow_exceptions=*/false);
  if (!attrs.is_object()) {
    throw Error(BP_ERR_INTERNAL,
                "target kind 'c': the canonicalizer got attributes that are not a JSON object "
                "(a bug in libbackplane; please report it): " +
                    attrs_json.substr(0, 200));
  }
  if (attrs.contains("opt-level")) {
    const int64_t level = IntAttr(attrs, "opt-level");
    if (level < 0 || level > 3) {
      sdk::ThrowTargetAttrError("opt-level",
                                "is " + std::to_string(level) +
                                    "; expected 0, 1, 2 or 3 (0 = no optimisation, 3 = most)");
    }
  }
  if (attrs.contains("num-cores")) {
    const int64_t cores = IntAttr(attrs, "num-cores");
    if (cores < 1) {
      sdk::ThrowTargetAttrError("num-cores",
                                "is " + std::to_string(cores) +
                                    "; expected at least 1 (the cores the code may use), or "
                                    "leave it out");
    }
  }
  for (const char* name : {"cc", "mtriple", "mcpu", "march"}) {
    if (attrs.contains(name) && attrs[name].is_string() && attrs[name].get<std::string>().empty()) {
      sdk::ThrowTargetAttrError(
          name, std::string("is empty; give a value") + (std::string(name) == "cc"
                                                             ? " such as cc, gcc or clang"
                                                             : " or leave the attribute out"));
    }
  }
  // What reaches the compiler's command line: a Target is data, so each is checked against
  // what it may be (compiler_flags.h); the compiler itself is the host's choice.
  auto string_of = [&attrs](const char* name) -> const std::string* {
    auto it = attrs.find(name);
    return it != attrs.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
  };
  auto strings_of = [&attrs](const char* name) {
    std::vector<std::string> out;
    auto it = attrs.find(name);
    if (it != attrs.end() && it->is_array()) {
      for (const Json& e : *it) {
        if (e.is_string()) out.push_back(e.get<std::string>());
      }
    }
    return out;
  };
  if (const std::string* cc = string_of("cc")) CheckCompilerName(*cc);
  if (const std::string* triple = string_of("mtriple")) CheckTriple(*triple);
  for (const char* name : {"mcpu", "march"}) {
    if (const std::string* cpu = string_of(name)) CheckCpuName(name, *cpu);
  }
  for (const std::string& feature : strings_of("mattr")) CheckFeature(feature);
  CheckCFlags(strings_of("cflags"));
  // A Target built from this machine's CPU describes its instruction set, so code built for it
  // uses the CPU's vector units (without it, gcc targets plain x86-64: SSE2, no FMA). The level,
  // not -march=native: a Target is data that another machine may compile for (a remote device's
  // client), and the level means the same there. A Target that names an architecture, a CPU or
  // features, or cross-compiles, is left as it is.
  if (from_host_cpu && !attrs.contains("march") && !attrs.contains("mcpu") &&
      !attrs.contains("mattr") && attrs.value("mtriple", HostTriple()) == HostTriple()) {
    bool flags_name_one = false;
    for (const std::string& flag : strings_of("cflags")) {
      for (const char* p : {"-march=", "-mcpu="}) flags_name_one |= flag.rfind(p, 0) == 0;
    }
    const std::string level = HostArchLevel();
    if (!flags_name_one && !level.empty()) attrs["march"] = level;
  }
  // fast-math is the union of the six flags, as in LLVM: turning it on turns them all on.
  if (attrs.value("fast-math", false)) {
    for (const char* flag : kFastMathFlags) attrs[std::string("fast-math-") + flag] = true;
  }
  return attrs.dump();
}

void RegisterTargetKinds() {
  sdk::TargetKindBuilder builder(kKind, "cpu");
  builder.Keys({"cpu"})
      .Attr<std::string>("mcpu", sdk::kNoDefault,
                         "CPU model to tune for, e.g. skylake, cortex-a72 (none: generic)")
      .Attr<std::string>("march", sdk::kNoDefault,
                         "architecture the code may use, e.g. x86-64-v3, armv8.2-a")
      .Attr<std::string>("mtriple", HostTriple(), "target triple; defaults to this machine's")
      .Attr<std::vector<std::string>>("mattr", sdk::kNoDefault,
                                      "CPU features on (+f) or off (-f), e.g. +avx2,-fma")
      .Attr<int64_t>("num-cores", sdk::kNoDefault, BP_ATTR_MULTI_PROCESSOR_COUNT,
                     "cores that parallel loops may use (>= 1)")
      .Attr<int64_t>("opt-level", 3, "optimisation level, 0..3")
      .Attr<bool>("fast-math", false, "all six fast-math-* flags at once")
      .Attr<bool>("fast-math-nnan", false, "assume no NaN arguments or results")
      .Attr<bool>("fast-math-ninf", false, "assume no infinite arguments or results")
      .Attr<bool>("fast-math-nsz", false, "ignore the sign of zero")
      .Attr<bool>("fast-math-arcp", false, "allow a reciprocal instead of a division")
      .Attr<bool>("fast-math-contract", false, "allow fusing, e.g. a*b+c into an FMA")
      .Attr<bool>("fast-math-reassoc", false, "allow reassociating float operations")
      .Attr<bool>("bounds-check", false,
                  "check every index against its extent: an access out of bounds is an error "
                  "naming the function, buffer, index and extent (slower)")
      .Attr<std::string>("cc", std::string("cc"),
                         "C compiler by plain name: cc (the host's, BACKPLANE_CC), gcc, clang, "
                         "optionally with a triple and version, e.g. aarch64-linux-gnu-gcc")
      .Attr<std::vector<std::string>>("cflags", std::vector<std::string>{},
                                      "extra optimisation and code-generation flags from an "
                                      "allowlist, e.g. -march=native,-funroll-loops")
      .Canonicalizer([](const std::string& attrs_json, const DLDevice* device) {
        return CanonicalizeC(attrs_json, device != nullptr && device->device_type == kDLCPU);
      })
      .Register();

  // TVM's Raspberry Pi 4 (64-bit) tag, as a cross-compilation target for the c kind.
  sdk::RegisterTag("raspberry-pi/4b-aarch64",
                   R"({"kind": "c", "mtriple": "aarch64-linux-gnu", "mcpu": "cortex-a72",)"
                   R"( "mattr": ["+neon"], "num-cores": 4, "cc": "aarch64-linux-gnu-gcc",)"
                   R"( "cflags": ["-mcpu=cortex-a72"]})");
}

}  // namespace cpu
}  // namespace backplane
