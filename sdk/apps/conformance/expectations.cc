// SPDX-License-Identifier: Apache-2.0
#include "expectations.h"

#include <fnmatch.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace backplane {
namespace conformance {

namespace {

// Splits a line into whitespace-separated fields, a double-quoted field keeping its spaces;
// after `max_fields` the rest of the line (trimmed) is the last field.
std::vector<std::string> Fields(const std::string& line, size_t max_fields, bool* unterminated) {
  std::vector<std::string> out;
  size_t i = 0;
  *unterminated = false;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    if (out.size() + 1 == max_fields) {
      std::string rest = line.substr(i);
      while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\t' || rest.back() == '\r')) {
        rest.pop_back();
      }
      out.push_back(rest);
      break;
    }
    std::string field;
    if (line[i] == '"') {
      const size_t end = line.find('"', i + 1);
      if (end == std::string::npos) {
        *unterminated = true;
        return out;
      }
      field = line.substr(i + 1, end - i - 1);
      i = end + 1;
    } else {
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') {
        field += line[i++];
      }
    }
    out.push_back(field);
  }
  return out;
}

bool Glob(const std::string& pattern, const std::string& text) {
  return fnmatch(pattern.c_str(), text.c_str(), 0) == 0;
}

}  // namespace

void Expectations::Read(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (text[first] == '[' || text[first] == '{')) {
    nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
    if (j.is_discarded()) throw std::runtime_error(path + ": not valid JSON");
    if (j.is_object()) j = j.value("entries", nlohmann::json());
    if (!j.is_array())
      throw std::runtime_error(path + ": expected an array of entries, or {\"entries\": [...]}");
    for (size_t k = 0; k < j.size(); ++k) {
      const auto& e = j[k];
      const std::string where = path + ": entry " + std::to_string(k + 1);
      if (!e.is_object() || !e.contains("test") || !e["test"].is_string()) {
        throw std::runtime_error(where + ": each entry is an object with a \"test\" glob");
      }
      Expectation x;
      x.plugin = e.value("plugin", "*");
      x.device = e.value("device", "*");
      x.test = e["test"].get<std::string>();
      x.reason = e.value("reason", "");
      x.where = where;
      entries_.push_back(x);
    }
    return;
  }
  std::istringstream lines(text);
  std::string line;
  for (int n = 1; std::getline(lines, line); ++n) {
    const size_t start = line.find_first_not_of(" \t\r");
    if (start == std::string::npos || line[start] == '#') continue;
    bool unterminated = false;
    std::vector<std::string> f = Fields(line, 4, &unterminated);
    const std::string where = path + ":" + std::to_string(n);
    if (unterminated) throw std::runtime_error(where + ": a quoted field is not closed");
    if (f.size() < 3) {
      throw std::runtime_error(where +
                               ": expected PLUGIN DEVICE TEST [REASON] (globs; quote a "
                               "field with spaces), got \"" +
                               line + "\"");
    }
    Expectation x;
    x.plugin = f[0];
    x.device = f[1];
    x.test = f[2];
    if (f.size() > 3) {
      x.reason = f[3];
      while (!x.reason.empty() && (x.reason[0] == '#' || x.reason[0] == ' ')) x.reason.erase(0, 1);
    }
    x.where = where;
    entries_.push_back(x);
  }
}

const Expectation* Expectations::Match(const std::string& plugin,
                                       const std::vector<std::string>& devices,
                                       const std::string& test) const {
  for (const Expectation& e : entries_) {
    if (!Glob(e.plugin, plugin) || !Glob(e.test, test)) continue;
    bool device = devices.empty() && Glob(e.device, "");
    for (const std::string& d : devices) device = device || Glob(e.device, d);
    if (device) return &e;
  }
  return nullptr;
}

}  // namespace conformance
}  // namespace backplane
