// SPDX-License-Identifier: Apache-2.0
// The run's outcomes and the three reports: the console, JSON (--json) and JUnit XML
// (--junit). docs/conformance.md describes the formats.
#ifndef BACKPLANE_SDK_CONFORMANCE_REPORT_H_
#define BACKPLANE_SDK_CONFORMANCE_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "conformance.h"
#include "isolate.h"

namespace backplane {
namespace conformance {

// A test's final status:
//   passed       it ran and passed
//   failed       it ran and failed (a check, an unexpected error, a crash or a timeout)
//   xfail        it failed, as an expected-failures entry says it does
//   xpass        an expected-failures entry says it fails, but it passed
//   unsupported  an unsupported-features entry names it; it did not run
//   skipped      it does not apply to this plugin (no device, no code generator, ...)
struct Outcome {
  const TestCase* test = nullptr;
  TestResult result;
  std::string status;
  std::string expectation;  // the matching entry's reason and where it is, if any
};

struct RunReport {
  std::string kit_version;
  std::string plugin_spec;  // what the command line named
  PluginInfo plugin;
  std::string device;       // "simaccel:0", or "" when the plugin has none
  std::string device_name;  // its BP_ATTR_DEVICE_NAME
  // What the search path says about the plugin beside its tests: the plugins it shadows,
  // or the one a host would load in its place (docs/discovery.md).
  std::vector<std::string> notes;
  std::vector<Outcome> outcomes;
  double seconds = 0;
  std::string timestamp;  // ISO 8601, when the run started
  bool verify_xfails = false;
  // The --test and --exclude globs, and how many tests the kit has: a run that they leave
  // tests out of is a subset, whose pass is no conformance verdict.
  std::vector<std::string> tests;
  std::vector<std::string> excludes;
  size_t all_tests = 0;

  int Count(const std::string& status) const;
  // True when everything not expected to fail or unsupported passed (or did not apply), and,
  // under --verify-xfails, every expected failure failed.
  bool Ok() const;
  // True when --test or --exclude left some of the kit's tests out (an --exclude that matches
  // nothing leaves the run whole).
  bool Subset() const { return outcomes.size() < all_tests; }
  // The verdict: Ok() over every test of the kit.
  bool Conformant() const { return Ok() && !Subset(); }
};

// One line for a finished test ("PASS  device.copy.host_to_device  0.01 s"), with its
// message and a tail of its output when it failed.
void PrintOutcome(const Outcome& o, size_t index, size_t total, bool verbose, FILE* out);
// The summary after the run.
void PrintSummary(const RunReport& r, FILE* out);
std::string ToJson(const RunReport& r);
std::string ToJUnit(const RunReport& r);

}  // namespace conformance
}  // namespace backplane

#endif  // BACKPLANE_SDK_CONFORMANCE_REPORT_H_
