// SPDX-License-Identifier: Apache-2.0
#include "report.h"

#include <unistd.h>

#include <nlohmann/json.hpp>
#include <sstream>

namespace backplane {
namespace conformance {

namespace {

const char* Label(const std::string& status) {
  if (status == "passed") return "PASS ";
  if (status == "failed") return "FAIL ";
  if (status == "xfail") return "XFAIL";
  if (status == "xpass") return "XPASS";
  if (status == "unsupported") return "UNSUP";
  return "SKIP ";
}

// The text a failure shows: the message, and the signal or timeout.
std::string FailureText(const TestResult& r) { return r.message; }

// XML text: the five entities escaped, and characters XML 1.0 cannot hold replaced.
std::string Xml(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        if (c < 0x20 && c != '\n' && c != '\t' && c != '\r') {
          out += '?';
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out;
}

// Output a plugin printed may be any bytes: keep valid UTF-8, replace the rest.
std::string CleanUtf8(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 0x2;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += '?';
      ++i;
    }
  }
  return out;
}

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", s);
  return buf;
}

}  // namespace

int RunReport::Count(const std::string& status) const {
  int n = 0;
  for (const Outcome& o : outcomes) n += o.status == status ? 1 : 0;
  return n;
}

bool RunReport::Ok() const {
  return Count("failed") == 0 && (!verify_xfails || Count("xpass") == 0);
}

void PrintOutcome(const Outcome& o, size_t index, size_t total, bool verbose, FILE* out) {
  const int width = static_cast<int>(std::to_string(total).size());
  std::fprintf(out, "[%*zu/%zu] %s %s", width, index, total, Label(o.status), o.test->name.c_str());
  if (o.status == "passed" || o.status == "xpass" || o.status == "failed" || o.status == "xfail") {
    std::fprintf(out, "  (%.2f s)", o.result.seconds);
  }
  std::fprintf(out, "\n");
  const std::string pad(static_cast<size_t>(width) * 2 + 4, ' ');
  if (o.status == "failed" || o.status == "xfail") {
    std::fprintf(out, "%s%s: %s\n", pad.c_str(), o.test->name.c_str(),
                 FailureText(o.result).c_str());
  } else if ((o.status == "skipped" || o.status == "unsupported") && !o.result.message.empty()) {
    std::fprintf(out, "%s%s\n", pad.c_str(), o.result.message.c_str());
  }
  if (!o.expectation.empty()) std::fprintf(out, "%s%s\n", pad.c_str(), o.expectation.c_str());
  if (o.status == "failed" || verbose) {
    for (const std::string& d : o.result.details)
      std::fprintf(out, "%s  %s\n", pad.c_str(), d.c_str());
  }
  if (o.status == "failed" && !o.result.output.empty()) {
    std::fprintf(out, "%s  --- what the test printed ---\n", pad.c_str());
    std::istringstream lines(CleanUtf8(o.result.output));
    std::string line;
    while (std::getline(lines, line)) std::fprintf(out, "%s  | %s\n", pad.c_str(), line.c_str());
  }
  std::fflush(out);
}

void PrintSummary(const RunReport& r, FILE* out) {
  std::fprintf(out, "\nbackplane-conformance %s: plugin '%s' %s (%s)", r.kit_version.c_str(),
               r.plugin.name.c_str(), r.plugin.version.c_str(), r.plugin.library.c_str());
  if (!r.device.empty()) {
    std::fprintf(out, " on %s '%s'", r.device.c_str(), r.device_name.c_str());
  }
  std::fprintf(out,
               "\n  %d passed, %d failed, %d expected failures, %d unexpected passes, "
               "%d unsupported, %d skipped (%zu tests, %.1f s)\n",
               r.Count("passed"), r.Count("failed"), r.Count("xfail"), r.Count("xpass"),
               r.Count("unsupported"), r.Count("skipped"), r.outcomes.size(), r.seconds);
  for (const std::string& note : r.notes) std::fprintf(out, "  note: %s\n", note.c_str());
  for (const Outcome& o : r.outcomes) {
    if (o.status == "failed") {
      std::fprintf(out, "  FAILED %s: %s\n", o.test->name.c_str(), FailureText(o.result).c_str());
    }
    if (o.status == "xpass") {
      std::fprintf(out, "  %s %s passed, but %s\n",
                   r.verify_xfails ? "XPASS (fails --verify-xfails)" : "XPASS",
                   o.test->name.c_str(), o.expectation.c_str());
    }
  }
  if (!r.Ok()) {
    std::fprintf(out, "NOT CONFORMANT\n");
  } else if (r.Subset()) {
    // A pass of some tests says nothing of the others: no verdict, and the line says why.
    std::fprintf(out,
                 "PASSED, NO VERDICT: %s chose %zu of the kit's %zu tests; run them all (no "
                 "--test or --exclude) for a conformance verdict\n",
                 r.tests.empty()      ? "--exclude"
                 : r.excludes.empty() ? "--test"
                                      : "--test and --exclude",
                 r.outcomes.size(), r.all_tests);
  } else {
    std::fprintf(out, "CONFORMANT (every test that applies passed or is expected to fail)\n");
  }
}

std::string ToJson(const RunReport& r) {
  nlohmann::json tests = nlohmann::json::array();
  for (const Outcome& o : r.outcomes) {
    nlohmann::json t = {{"name", o.test->name},
                        {"clause", o.test->clause},
                        {"requirement", o.test->requirement},
                        {"status", o.status},
                        {"message", CleanUtf8(o.result.message)},
                        {"details", nlohmann::json::array()},
                        {"seconds", o.result.seconds}};
    for (const std::string& d : o.result.details) t["details"].push_back(CleanUtf8(d));
    if (o.result.started >= 0) t["started"] = o.result.started;
    if (!o.result.failure.empty()) t["failure"] = o.result.failure;
    if (o.result.signal != 0) {
      t["signal"] = o.result.signal;
      t["signal_name"] = SignalText(o.result.signal);
    }
    if (!o.expectation.empty()) t["expectation"] = o.expectation;
    if (!o.result.output.empty()) t["output"] = CleanUtf8(o.result.output);
    tests.push_back(t);
  }
  nlohmann::json j = {
      {"schema_version", 1},
      {"kit", {{"name", "backplane-conformance"}, {"version", r.kit_version}}},
      {"abi", std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR)},
      {"timestamp", r.timestamp},
      {"plugin_spec", r.plugin_spec},
      {"plugin", r.plugin.ToJson()},
      {"device", r.device},
      {"device_name", CleanUtf8(r.device_name)},
      {"notes", r.notes},
      {"verify_xfails", r.verify_xfails},
      {"ok", r.Ok()},
      {"conformant", r.Conformant()},
      {"selection",
       {{"test", r.tests},
        {"exclude", r.excludes},
        {"ran", r.outcomes.size()},
        {"of", r.all_tests}}},
      {"seconds", r.seconds},
      {"summary",
       {{"total", r.outcomes.size()},
        {"passed", r.Count("passed")},
        {"failed", r.Count("failed")},
        {"xfail", r.Count("xfail")},
        {"xpass", r.Count("xpass")},
        {"unsupported", r.Count("unsupported")},
        {"skipped", r.Count("skipped")}}},
      {"tests", tests}};
  return j.dump(2) + "\n";
}

std::string ToJUnit(const RunReport& r) {
  int failures = 0, errors = 0, skipped = 0;
  for (const Outcome& o : r.outcomes) {
    const bool error =
        o.result.failure == "crash" || o.result.failure == "timeout" || o.result.failure == "error";
    if (o.status == "failed" && error) ++errors;
    if ((o.status == "failed" && !error) || (o.status == "xpass" && r.verify_xfails)) ++failures;
    if (o.status == "skipped" || o.status == "unsupported") ++skipped;
  }
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  const std::string suite =
      "backplane-conformance." + (r.plugin.name.empty() ? std::string("plugin") : r.plugin.name);
  std::ostringstream x;
  x << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x << "<testsuites name=\"backplane-conformance\" tests=\"" << r.outcomes.size()
    << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped
    << "\" time=\"" << Seconds(r.seconds) << "\">\n";
  x << "  <testsuite name=\"" << Xml(suite) << "\" tests=\"" << r.outcomes.size()
    << "\" failures=\"" << failures << "\" errors=\"" << errors << "\" skipped=\"" << skipped
    << "\" time=\"" << Seconds(r.seconds) << "\" timestamp=\"" << Xml(r.timestamp)
    << "\" hostname=\"" << Xml(host) << "\">\n";
  x << "    <properties>\n";
  const std::pair<const char*, std::string> props[] = {
      {"plugin", r.plugin.name},
      {"plugin_version", r.plugin.version},
      {"library", r.plugin.library},
      {"device", r.device},
      {"device_name", CleanUtf8(r.device_name)},
      {"kit_version", r.kit_version},
      {"verify_xfails", r.verify_xfails ? "true" : "false"},
      {"conformant", r.Conformant() ? "true" : "false"},
      {"selection", std::to_string(r.outcomes.size()) + " of " + std::to_string(r.all_tests)}};
  for (const auto& [k, v] : props)
    x << "      <property name=\"" << k << "\" value=\"" << Xml(v) << "\"/>\n";
  x << "    </properties>\n";
  for (const Outcome& o : r.outcomes) {
    const std::string& name = o.test->name;
    const std::string classname = name.substr(0, name.rfind('.'));
    x << "    <testcase name=\"" << Xml(name) << "\" classname=\"" << Xml(suite + "." + classname)
      << "\" time=\"" << Seconds(o.result.seconds) << "\"";
    const std::string message = CleanUtf8(o.result.message);
    std::string body;
    if (o.status == "failed") {
      const bool error = o.result.failure == "crash" || o.result.failure == "timeout" ||
                         o.result.failure == "error";
      std::string text = name + ": " + message;
      if (o.result.signal != 0) text += "\nsignal: " + SignalText(o.result.signal);
      for (const std::string& d : o.result.details) text += "\n" + CleanUtf8(d);
      body = std::string("      <") + (error ? "error" : "failure") + " message=\"" + Xml(message) +
             "\" type=\"" + Xml(o.result.failure) + "\">" + Xml(text) + "</" +
             (error ? "error" : "failure") + ">\n";
    } else if (o.status == "xpass" && r.verify_xfails) {
      body = "      <failure message=\"" + Xml("passed, but expected to fail: " + o.expectation) +
             "\" type=\"xpass\"/>\n";
    } else if (o.status == "skipped" || o.status == "unsupported") {
      const std::string why = o.status == "unsupported" ? "unsupported: " + o.expectation : message;
      body = "      <skipped message=\"" + Xml(why) + "\"/>\n";
    }
    std::string out;
    if (o.status == "xfail") out += "expected failure (" + o.expectation + "): " + message + "\n";
    if (o.status == "xpass") out += "unexpected pass (" + o.expectation + ")\n";
    if (!o.result.output.empty() && o.status == "failed") out += CleanUtf8(o.result.output);
    if (body.empty() && out.empty()) {
      x << "/>\n";
      continue;
    }
    x << ">\n" << body;
    if (!out.empty()) x << "      <system-out>" << Xml(out) << "</system-out>\n";
    x << "    </testcase>\n";
  }
  x << "  </testsuite>\n</testsuites>\n";
  return x.str();
}

}  // namespace conformance
}  // namespace backplane
