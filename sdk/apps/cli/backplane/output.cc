// SPDX-License-Identifier: Apache-2.0
#include "output.h"

#include <unistd.h>

#include <backplane/backplane.hpp>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>

namespace backplane {
namespace cli {

OrderedJson JsonDocument(const std::string& command) {
  OrderedJson doc;
  doc["schema_version"] = kJsonSchemaVersion;
  doc["command"] = command;
  return doc;
}

bool PrintJson(const std::string& command, const OrderedJson& doc) {
  std::cout << doc.dump(2, ' ', false, OrderedJson::error_handler_t::replace) << '\n';
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "backplane " << command << ": could not write the JSON to standard output\n";
    return false;
  }
  return true;
}

Progress::Progress(std::string command, bool verbose)
    : command_(std::move(command)), verbose_(verbose), tty_(isatty(STDERR_FILENO) != 0) {}

Progress::~Progress() { Done(); }

void Progress::Step(const std::string& what) {
  if (tty_) {
    // Back to the line's start and clear it: one line that changes, not a scrolling log.
    std::fprintf(stderr, "\r\033[K%s: %s", command_.c_str(), what.c_str());
    std::fflush(stderr);
    open_ = true;
  } else if (verbose_) {
    std::fprintf(stderr, "%s: %s\n", command_.c_str(), what.c_str());
  }
}

void Progress::Done() {
  if (open_) {
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    open_ = false;
  }
}

OrderedJson UnreachableRemoteServers() {
  OrderedJson out = OrderedJson::array();
  const Function servers = Registry::TryGet("remote.servers");
  if (!servers) return out;
  try {
    const OrderedJson all = OrderedJson::parse(servers().AsString());
    for (const OrderedJson& s : all.value("servers", OrderedJson::array())) {
      if (s.value("state", "") != "unreachable") continue;
      out.push_back(
          {{"address", s.value("address", "")},
           {"error", s.contains("error") && s["error"].is_string() ? s["error"] : OrderedJson()}});
    }
  } catch (const std::exception& e) {
    out.push_back({{"address", "(remote.servers)"}, {"error", e.what()}});
  }
  return out;
}

void ReportUnreachableRemoteServers(const std::string& command, const OrderedJson& servers) {
  for (const OrderedJson& s : servers) {
    const std::string error =
        s.contains("error") && s["error"].is_string() ? s["error"].get<std::string>() : "";
    std::cerr << command << ": remote server " << s.value("address", "") << " is unreachable"
              << (error.empty() ? std::string() : ": " + error)
              << "; its devices are missing here (BACKPLANE_REMOTE or remote.attach named it; "
                 "docs/remote.md)\n";
  }
}

}  // namespace cli
}  // namespace backplane
