// SPDX-License-Identifier: Apache-2.0
// The kernel catalog on an old code generator (tests/compat/old_codegen_test.sh runs it): every
// GPU function of the catalog (sdk/kernels, variants included) is built for the device's Target
// by today's libbackplane and run on the device at its small sizes, checked against the
// float64 reference (runner::RunCase). Each one must either
//   pass, or
//   be refused by bp_build with BP_ERR_UNSUPPORTED and the message of docs/abi.md, "Old code
//   generators": "... which needs IR text version N; the code generator target.build.<kind>
//   (plugin ...) reads IR text versions A to B: ...",
// and each function named by --must-pass must pass. A function named by --known-defect
// FUNC=TEXT must fail with TEXT in its error (a defect of the old build that the harness does
// not hold against the negotiation); when it passes, this says so and fails, as the
// conformance kit's --verify-xfails does. Two probes that need more than version 1 and have no
// lowering (C's `%`, version 3; an atomic, version 2) must be refused by that contract.
//
// usage: old_codegen_catalog --plugin LIBRARY --device TYPE:ID
//          [--must-pass FUNC]... [--known-defect FUNC=TEXT]...
// Exit 0 when all holds, 1 otherwise, 2 for a usage error. One line a function on stdout.
#include <backplane/backplane.hpp>
#include <backplane/kernels/catalog.hpp>
#include <backplane/runner/runner.hpp>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace {

using backplane::Error;

struct Options {
  std::string plugin;  // the library, loaded alone (bp_plugin_load)
  std::string device;
  std::set<std::string> must_pass;
  std::map<std::string, std::string> known_defects;  // function -> text its error holds
};

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "old_codegen_catalog: %s\nusage: old_codegen_catalog --plugin LIBRARY --device "
               "TYPE:ID [--must-pass FUNC]... [--known-defect FUNC=TEXT]...\n",
               why.c_str());
  std::exit(2);
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (i + 1 >= argc) Usage("option " + a + " needs a value");
    const std::string v = argv[++i];
    if (a == "--plugin") {
      o.plugin = v;
    } else if (a == "--device") {
      o.device = v;
    } else if (a == "--must-pass") {
      o.must_pass.insert(v);
    } else if (a == "--known-defect") {
      const size_t eq = v.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == v.size())
        Usage("--known-defect takes FUNC=TEXT, not '" + v + "'");
      o.known_defects[v.substr(0, eq)] = v.substr(eq + 1);
    } else {
      Usage("unknown option '" + a + "'");
    }
  }
  if (o.plugin.empty() || o.device.empty()) Usage("--plugin and --device are required");
  std::set<std::string> named = o.must_pass;
  for (const auto& [f, text] : o.known_defects) {
    if (o.must_pass.count(f) != 0) Usage("'" + f + "' is given as a known defect and must pass");
    named.insert(f);
  }
  for (const std::string& f : named) {
    const backplane::kernels::Case* c = backplane::kernels::Find(f);
    if (c == nullptr || !c->needs_threads)
      Usage("'" + f + "' is not a GPU function of the kernel catalog (kernels/catalog.hpp)");
  }
  return o;
}

// Whether `e` is the refusal of docs/abi.md, "Old code generators", by the code generator of
// `kind`. `why` says what is missing when it is not.
bool IsVersionRefusal(const Error& e, const std::string& kind, std::string* why) {
  const std::string m = e.what();
  if (e.kind() != BP_ERR_UNSUPPORTED) {
    *why = "status " + std::to_string(e.kind()) + ", not BP_ERR_UNSUPPORTED (" +
           std::to_string(BP_ERR_UNSUPPORTED) + ")";
    return false;
  }
  for (const std::string& part : {std::string("which needs IR text version"),
                                  std::string("reads IR text versions"), "target.build." + kind}) {
    if (m.find(part) == std::string::npos) {
      *why = "the message lacks \"" + part + "\"";
      return false;
    }
  }
  return true;
}

// A GPU kernel of 64 threads with `body` (over a[tx], into c), which needs IR text version
// `version` and has no lowering to version 1.
struct Probe {
  std::string name;
  std::string body;
  int version;
};

}  // namespace

int main(int argc, char** argv) {
  namespace kernels = backplane::kernels;
  namespace runner = backplane::runner;
  const Options o = ParseOptions(argc, argv);
  backplane::Device dev;
  backplane::Target target;
  try {
    backplane::Check(bp_plugin_load(o.plugin.c_str()));
    dev = backplane::Device::Parse(o.device);
    target = backplane::Target::FromDevice(dev);
  } catch (const Error& e) {
    std::fprintf(stderr, "old_codegen_catalog: FAILED: no device %s with a Target from %s: %s\n",
                 o.device.c_str(), o.plugin.c_str(), e.what());
    return 1;
  }
  const std::string kind = target.Kind();
  int passed = 0, refused = 0, defects = 0, failed = 0;
  auto fail = [&](const std::string& func, const std::string& why) {
    std::printf("%-18s FAILED   %s\n", func.c_str(), why.c_str());
    ++failed;
  };
  for (const kernels::Case& c : kernels::Catalog()) {
    if (!c.needs_threads) continue;  // CPU kernels go to CPU targets only
    runner::Result r;
    std::string built;        // "" when it built; else why bp_build failed
    std::string not_refusal;  // then why that is not an IR-version refusal
    try {
      const backplane::Module m = backplane::Build(runner::KernelSource(c), target);
      r = runner::RunCase(c, m, dev, c.small, 1);
    } catch (const Error& e) {
      std::string why;
      if (IsVersionRefusal(e, kind, &why)) {
        if (o.must_pass.count(c.func) != 0) {
          fail(c.func, std::string("refused, but it must pass: ") + e.what());
        } else {
          std::printf("%-18s refused  %s\n", c.func.c_str(), e.what());
          ++refused;
        }
        continue;
      }
      built = e.what();
      not_refusal = why;
    }
    const std::string error = !built.empty() ? built : r.ok ? "" : r.error;
    const auto defect = o.known_defects.find(c.func);
    if (defect != o.known_defects.end()) {
      if (error.empty()) {
        fail(c.func, "passes now, where it was listed as a known defect of the old build ('" +
                         defect->second + "'): take it off the list");
      } else if (error.find(defect->second) == std::string::npos) {
        fail(c.func, "failed otherwise than its known defect ('" + defect->second + "'): " + error);
      } else {
        std::printf("%-18s defect   (known, of the old build) %s\n", c.func.c_str(), error.c_str());
        ++defects;
      }
      continue;
    }
    if (!built.empty()) {
      fail(c.func,
           "bp_build failed and it is not an IR-version refusal (" + not_refusal + "): " + built);
    } else if (!r.ok) {
      fail(c.func, "did not match the float64 reference: " + r.error);
    } else {
      std::printf("%-18s ok       max relative error %.3g (tolerance %g)\n", c.func.c_str(),
                  r.max_error, c.tolerance);
      ++passed;
    }
  }
  // What no lowering brings to version 1 is refused by name, before the code generator sees it.
  const std::vector<Probe> probes = {
      {"probe_mod", "c[tx] = a[tx] % 7", 3},
      {"probe_atomic", "atomic_add(c[0], a[tx])", 2},
  };
  for (const Probe& p : probes) {
    const std::string text = "func " + p.name +
                             "(a: buffer<int32>[64], c: buffer<int32>[64]) {\n"
                             "  for bx in thread(blockIdx.x, 0, 1) {\n"
                             "    for tx in thread(threadIdx.x, 0, 64) {\n"
                             "      " +
                             p.body + "\n    }\n  }\n}\n";
    const std::string needs = "which needs IR text version " + std::to_string(p.version);
    try {
      backplane::Build(text, target);
      fail(p.name, "built, where the code generator reads version 1 and `" + p.body + "` " + needs);
    } catch (const Error& e) {
      std::string why;
      const std::string m = e.what();
      if (!IsVersionRefusal(e, kind, &why)) {
        fail(p.name, "not refused as the contract says (" + why + "): " + m);
      } else if (m.find(needs) == std::string::npos ||
                 m.find("function '" + p.name) == std::string::npos) {
        fail(p.name, "the refusal does not name the function '" + p.name +
                         "' (or its kernel) and say \"" + needs + "\": " + m);
      } else {
        std::printf("%-18s refused  %s\n", p.name.c_str(), m.c_str());
      }
    }
  }
  std::printf(
      "\n%d passed, %d refused by IR text version, %d known defects of the old build, %d failed "
      "(%s on %s)\n",
      passed, refused, defects, failed, kind.c_str(), o.device.c_str());
  if (passed == 0) {
    std::fprintf(stderr, "old_codegen_catalog: FAILED: no catalog kernel passed on %s\n",
                 o.device.c_str());
    return 1;
  }
  return failed == 0 ? 0 : 1;
}
