// SPDX-License-Identifier: Apache-2.0
// The trace layer through the CLI: `backplane demo --trace FILE` on cpu:0 with the example
// layer call_counter below it, and the file checked against the Chrome trace-event format
// (the JSON Object Format: required keys per phase, pid/tid numbers, the "M" names), against
// call_counter's independent counts of the same run (every copy and launch, the bytes), and
// for consistent times (dur >= 0, the spans of one track nested or apart, flows forwards).
// Then the options: a cap on events, an unknown option, a file that cannot be written, and
// `backplane info --layer trace:...` listing it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "subprocess.h"

#ifndef BACKPLANE_CLI_PATH
#error "BACKPLANE_CLI_PATH must name the built backplane executable"
#endif

namespace {

using Json = nlohmann::json;
namespace sp = backplane::subprocess;
namespace fs = std::filesystem;

uint32_t U(const Json& e, const char* key) { return e[key].get<uint32_t>(); }

std::string Scratch(const std::string& name) {
  const fs::path dir = fs::path(BACKPLANE_TEST_SCRATCH_DIR) / "trace";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  fs::remove(p);
  return p.string();
}

// The tool on the build tree's plugins, cpu only (the other backends' compilers would make
// the run slow), with the test plugins' folder for call_counter.
sp::Result RunCli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {BACKPLANE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  sp::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_LAYERS"};
  options.set_env = {{"BACKPLANE_DISABLE_PLUGINS", "opencl,vulkan,cuda,remote"},
                     {"COLUMNS", "100"}};
  options.timeout_s = 120;
  return sp::Run(argv, options);
}

Json ReadJson(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "no trace file " << path;
  std::stringstream text;
  text << in.rdbuf();
  Json doc = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(doc.is_discarded()) << path << " is not valid JSON";
  return doc.is_discarded() ? Json::object() : doc;
}

// Checks the format of every event; returns the "X" events.
std::vector<Json> CheckFormat(const Json& doc) {
  EXPECT_TRUE(doc.is_object());
  EXPECT_EQ(doc.value("displayTimeUnit", ""), "ns");
  const Json& events = doc["traceEvents"];
  EXPECT_TRUE(events.is_array());
  std::map<uint32_t, std::string> process_names;
  std::set<std::pair<uint32_t, uint32_t>> named_threads, used_threads;
  std::vector<Json> spans;
  for (const Json& e : events) {
    EXPECT_TRUE(e.is_object()) << e;
    if (!e.is_object()) continue;
    const std::string ph = e.value("ph", "");
    EXPECT_TRUE(ph == "X" || ph == "M" || ph == "s" || ph == "f") << e;
    EXPECT_TRUE(e["pid"].is_number_unsigned()) << e;
    EXPECT_TRUE(e["name"].is_string()) << e;
    if (ph == "M") {
      const std::string name = e["name"];
      EXPECT_TRUE(name == "process_name" || name == "thread_name" || name == "process_sort_index" ||
                  name == "process_labels")
          << e;
      EXPECT_TRUE(e["args"].is_object()) << e;
      if (name == "process_name") {
        EXPECT_TRUE(e["args"]["name"].is_string()) << e;
        if (e["args"]["name"].is_string()) process_names[U(e, "pid")] = e["args"]["name"];
      }
      if (name == "thread_name") {
        EXPECT_TRUE(e["tid"].is_number_unsigned()) << e;
        EXPECT_TRUE(e["args"]["name"].is_string()) << e;
        named_threads.insert({U(e, "pid"), U(e, "tid")});
      }
      continue;
    }
    EXPECT_TRUE(e["tid"].is_number_unsigned()) << e;
    EXPECT_TRUE(e["ts"].is_number()) << e;
    EXPECT_TRUE(e["cat"].is_string()) << e;
    used_threads.insert({U(e, "pid"), U(e, "tid")});
    if (ph == "X") {
      EXPECT_TRUE(e["dur"].is_number()) << e;
      EXPECT_GE(e["dur"].get<double>(), 0) << e;
      EXPECT_GE(e["ts"].get<double>(), 0) << e;
      spans.push_back(e);
    } else {
      EXPECT_TRUE(e["id"].is_number_unsigned()) << e;
      if (ph == "f") {
        EXPECT_EQ(e.value("bp", ""), "e") << e;
      }
    }
  }
  EXPECT_EQ(process_names[1], "host");
  for (const auto& [pid, tid] : used_threads) {
    EXPECT_TRUE(process_names.count(pid)) << "pid " << pid << " has no process_name";
    EXPECT_TRUE(named_threads.count({pid, tid}))
        << "pid " << pid << " tid " << tid << " has no thread_name";
  }
  return spans;
}

// The spans of each track nest or lie apart (no partial overlap), in nanoseconds.
void CheckNesting(const std::vector<Json>& spans) {
  std::map<std::pair<uint32_t, uint32_t>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  for (const Json& e : spans) {
    const int64_t ts = std::llround(e["ts"].get<double>() * 1000);
    const int64_t dur = std::llround(e["dur"].get<double>() * 1000);
    tracks[{U(e, "pid"), U(e, "tid")}].push_back({ts, ts + dur});
  }
  for (auto& [track, list] : tracks) {
    // Longer first at one start, so a parent comes before its child.
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    std::vector<int64_t> open;  // ends of the enclosing spans
    for (const auto& [begin, end] : list) {
      while (!open.empty() && open.back() <= begin) open.pop_back();
      if (!open.empty()) {
        ASSERT_LE(end, open.back())
            << "track pid " << track.first << " tid " << track.second << ": the span [" << begin
            << ", " << end << ") ns overlaps one that ends at " << open.back();
      }
      open.push_back(end);
    }
  }
}

// call_counter's summary line for `entry` on cpu: (calls, bytes).
std::pair<uint64_t, uint64_t> Counted(const std::string& err, const std::string& entry) {
  std::smatch m;
  const std::regex line("call_counter: cpu " + entry + " ([0-9]+) calls, ([0-9]+) bytes");
  if (!std::regex_search(err, m, line)) return {0, 0};
  return {std::stoull(m[1]), std::stoull(m[2])};
}

TEST(TraceLayer, DemoTraceHoldsEveryCopyAndLaunchWithConsistentTimes) {
  const std::string file = Scratch("demo.json");
  sp::Result r = RunCli({"demo", "--size", "small", "-k", "vector_add", "-k", "matmul", "--repeat",
                         "2", "--trace", file, "--plugin-path", BACKPLANE_TEST_PLUGIN_DIR,
                         "--layer", "call_counter"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.out << r.err;
  const Json doc = ReadJson(file);
  const std::vector<Json> spans = CheckFormat(doc);
  CheckNesting(spans);

  std::map<std::string, std::vector<Json>> by_cat;
  std::map<uint32_t, std::string> pid_names;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") pid_names[U(e, "pid")] = e["args"]["name"];
  }
  for (const Json& e : spans) by_cat[e["cat"].get<std::string>()].push_back(e);

  // Every copy, with its bytes, as call_counter (below the trace layer) counted them.
  const auto [copies, copy_bytes] = Counted(r.err, "copy_data_from_to");
  ASSERT_GT(copies, 0u) << "call_counter counted no copy:\n" << r.err;
  EXPECT_EQ(by_cat["copy"].size(), copies);
  uint64_t bytes = 0;
  for (const Json& e : by_cat["copy"]) {
    bytes += e["args"]["bytes"].get<uint64_t>();
    EXPECT_EQ(pid_names[U(e, "pid")], "cpu:0") << e;
  }
  EXPECT_EQ(bytes, copy_bytes);
  EXPECT_EQ(by_cat["api"].size() >= copies, true);

  // Every launch: each module function call on the host track and on cpu:0's stream track.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.err, m, std::regex("call_counter: ([0-9]+) module function")))
      << r.err;
  const uint64_t calls = std::stoull(m[1]);
  EXPECT_GT(calls, 0u);
  EXPECT_EQ(by_cat["call"].size(), calls);
  EXPECT_EQ(by_cat["launch"].size(), calls);
  std::map<std::string, int> launched;
  for (const Json& e : by_cat["launch"]) {
    EXPECT_EQ(pid_names[U(e, "pid")], "cpu:0") << e;
    launched[e["name"].get<std::string>()]++;
  }
  // Each kernel: a checked call and --repeat 2 timed ones at least.
  EXPECT_GE(launched["vector_add"], 3) << doc.dump().substr(0, 2000);
  EXPECT_GE(launched["matmul"], 3);
  // A build per kernel, on the host track.
  ASSERT_EQ(by_cat["build"].size(), 2u);
  for (const Json& e : by_cat["build"]) {
    EXPECT_EQ(e["pid"], 1);
    EXPECT_EQ(e["name"], "build c");
  }

  // Flows: each from a copy to a later launch on the track of each.
  std::map<uint64_t, Json> starts, ends;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "s") starts[e["id"].get<uint64_t>()] = e;
    if (e["ph"] == "f") ends[e["id"].get<uint64_t>()] = e;
  }
  ASSERT_FALSE(starts.empty()) << "no flow from a copy to a launch";
  EXPECT_EQ(starts.size(), ends.size());
  for (const auto& [id, s] : starts) {
    ASSERT_TRUE(ends.count(id)) << "flow " << id << " has no end";
    const Json& f = ends[id];
    EXPECT_LE(s["ts"].get<double>(), f["ts"].get<double>()) << s << f;
    auto starts_a = [&](const std::vector<Json>& list, const Json& point) {
      for (const Json& x : list) {
        if (x["pid"] == point["pid"] && x["tid"] == point["tid"] && x["ts"] == point["ts"]) {
          return true;
        }
      }
      return false;
    };
    EXPECT_TRUE(starts_a(by_cat["copy"], s)) << "flow start is not at a copy: " << s;
    EXPECT_TRUE(starts_a(by_cat["launch"], f)) << "flow end is not at a launch: " << f;
  }
  // cpu has no device events: no device-clock spans, none left unresolved.
  EXPECT_TRUE(by_cat["device"].empty());
  EXPECT_EQ(doc["otherData"]["dropped_events"], 0);
  EXPECT_EQ(doc["otherData"]["events"].get<size_t>(), spans.size());
  // No temporary file is left beside it.
  for (const auto& entry : fs::directory_iterator(fs::path(file).parent_path())) {
    EXPECT_EQ(entry.path().string().find("demo.json.tmp"), std::string::npos) << entry.path();
  }
}

// On a device with events (OpenCL on PoCL here), each launch and copy also has a span on its
// stream's device-clock thread, flagged as device clock, and none is left unresolved (the demo
// synchronises its streams).
TEST(TraceLayer, DeviceTimesOnADeviceWithEvents) {
  if (!fs::exists(fs::path(BACKPLANE_PLUGIN_DIR) / "libbackplane_opencl.so")) {
    GTEST_SKIP() << "the opencl plugin is not built";
  }
  const std::string file = Scratch("opencl.json");
  std::vector<std::string> argv = {BACKPLANE_CLI_PATH, "demo",     "--size", "small",   "-k",
                                   "vector_add_gpu",   "--repeat", "2",      "--trace", file};
  sp::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_LAYERS"};
  options.set_env = {{"BACKPLANE_DISABLE_PLUGINS", "vulkan,cuda,remote"}};
  options.timeout_s = 120;
  sp::Result r = sp::Run(argv, options);
  if (r.out.find("opencl:0") == std::string::npos) GTEST_SKIP() << "no opencl device here";
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.out << r.err;
  const Json doc = ReadJson(file);
  const std::vector<Json> spans = CheckFormat(doc);
  CheckNesting(spans);
  std::map<uint32_t, std::string> pid_names, thread_names;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") pid_names[U(e, "pid")] = e["args"]["name"];
  }
  size_t host_side = 0, device_side = 0;
  for (const Json& e : spans) {
    if (pid_names[U(e, "pid")] != "opencl:0") continue;
    if (e["cat"] == "launch" || e["cat"] == "copy") ++host_side;
    if (e["cat"] == "device") {
      ++device_side;
      EXPECT_EQ(e["args"]["clock"], "device") << e;
      EXPECT_TRUE(e["args"]["host_ts"].is_number()) << e;
      EXPECT_GE(U(e, "tid"), 100000u) << "a device-clock span on a host-clock thread: " << e;
    } else {
      EXPECT_LT(U(e, "tid"), 100000u) << e;
    }
  }
  EXPECT_GT(host_side, 0u);
  EXPECT_EQ(device_side, host_side) << "every launch and copy on opencl:0 has device times";
  EXPECT_EQ(doc["otherData"]["unresolved_device_spans"], 0);
}

// A build through a layer that wraps the code generator still gets the IR text versions the
// plugin's generator reads (the wrapper has none of its own): C's remainder needs version 3,
// which cannot be lowered, so a build given version 1 would be refused. Then `run --trace` of
// the module, and `run --layer` of a layer no plugin declares.
TEST(TraceLayer, BuildAndRunUnderTheLayer) {
  const std::string kernel = Scratch("rem.bpir");
  std::ofstream(kernel) << "func rem(n: int32, x: buffer<int32>[n]) {\n"
                           "  for i in serial(0, n) {\n"
                           "    x[i] = x[i] % 4\n"
                           "  }\n"
                           "}\n";
  const std::string file = Scratch("build.json");
  const std::string module = Scratch("rem.bpmod");
  sp::Options options;
  options.unset_env = {"BACKPLANE_PLUGIN_PATH"};
  options.set_env = {{"BACKPLANE_DISABLE_PLUGINS", "opencl,vulkan,cuda,remote"},
                     {"BACKPLANE_LAYERS", "trace:file=" + file}};
  options.timeout_s = 120;
  sp::Result r = sp::Run({BACKPLANE_CLI_PATH, "build", kernel, "-t", "c", "-o", module}, options);
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  const Json doc = ReadJson(file);
  size_t builds = 0;
  for (const Json& e : CheckFormat(doc)) builds += e["cat"] == "build" && e["name"] == "build c";
  EXPECT_EQ(builds, 1u);

  // `backplane run --trace` on that module: the checked call and the two timed ones.
  const std::string run_file = Scratch("run.json");
  r = RunCli({"run", module, "-f", "rem", "--dim", "n=64", "--allow-native", "-r", "2", "--trace",
              run_file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  const Json run_doc = ReadJson(run_file);
  const std::vector<Json> spans = CheckFormat(run_doc);
  CheckNesting(spans);
  size_t calls = 0, launches = 0;
  for (const Json& e : spans) {
    calls += e["cat"] == "call" && e["name"] == "rem";
    launches += e["cat"] == "launch" && e["name"] == "rem";
  }
  EXPECT_EQ(calls, 3u);
  EXPECT_EQ(launches, 3u);
  r = RunCli({"run", module, "-f", "rem", "--layer", "no_such_layer"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("--layer no_such_layer: layer 'no_such_layer'"), std::string::npos) << r.err;
}

TEST(TraceLayer, MaxEventsKeepsTheFirstAndCountsTheRest) {
  const std::string file = Scratch("capped.json");
  sp::Result r = RunCli({"info", "-l", "--layer", "trace:file=" + file + ":max_events=5"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  const Json doc = ReadJson(file);
  const std::vector<Json> spans = CheckFormat(doc);
  EXPECT_EQ(spans.size(), 5u);
  EXPECT_GT(doc["otherData"]["dropped_events"].get<uint64_t>(), 0u);
  bool labelled = false;
  for (const Json& e : doc["traceEvents"]) {
    labelled = labelled || (e["ph"] == "M" && e["name"] == "process_labels" &&
                            e["args"]["labels"].get<std::string>().find("dropped ") == 0);
  }
  EXPECT_TRUE(labelled);
}

TEST(TraceLayer, AnUnknownOptionIsRefusedByName) {
  sp::Result r = RunCli({"demo", "--size", "small", "-k", "vector_add", "--layer",
                         "trace:file=" + Scratch("x.json") + ":colour=red"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("unknown option 'colour'"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("file=PATH"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("max_events=N"), std::string::npos) << r.err;
  r = RunCli({"info", "-l", "--layer", "trace:max_events=lots"});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("max_events=lots"), std::string::npos) << r.err;
}

TEST(TraceLayer, AFileThatCannotBeWrittenIsRefusedAtOnce) {
  const std::string file = Scratch("no-such-folder") + "/t.json";
  sp::Result r = RunCli({"demo", "--size", "small", "-k", "vector_add", "--trace", file});
  EXPECT_EQ(r.exit_code, 2) << r.Describe();
  EXPECT_NE(r.err.find("--trace " + file), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("cannot create a file there"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(TraceLayer, InfoListsTheActiveLayersAndTheirPlugin) {
  const std::string file = Scratch("info.json");
  sp::Result r = RunCli({"info", "--json", "--layer", "trace:file=" + file, "--plugin-path",
                         BACKPLANE_TEST_PLUGIN_DIR, "--layer", "call_counter"});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  const Json doc = Json::parse(r.out, nullptr, false);
  ASSERT_TRUE(doc.is_object()) << r.out;
  EXPECT_EQ(doc["layers"], Json::array({"trace:file=" + file, "call_counter"}));
  bool listed = false;
  for (const Json& p : doc["plugins"]) {
    listed = listed || (p.value("name", "") == "trace" && p.value("state", "") == "loaded");
  }
  EXPECT_TRUE(listed) << doc["plugins"].dump(1);

  r = RunCli({"info", "--layer", "trace:file=" + file});
  ASSERT_EQ(r.exit_code, 0) << r.Describe() << "\n" << r.err;
  EXPECT_NE(r.out.find("Layers: 1 active"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1. trace:file=" + file), std::string::npos) << r.out;
  r = RunCli({"info"});
  EXPECT_NE(r.out.find("Layers: 0 active"), std::string::npos) << r.out;
}

}  // namespace
