// SPDX-License-Identifier: Apache-2.0
// The trace layer under calls from several threads at once, through the C API in a child
// process (the file is written when it exits): every call of every thread is in the file, on
// its thread's own track, nested or apart, with the right bytes.
#include <backplane/c_api.h>
#include <gtest/gtest.h>

#include <backplane/backplane.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr int kThreads = 4;
constexpr int kRounds = 200;
constexpr int64_t kFloats = 64;

// Each thread: alloc, copy its floats in, copy them back out, check, free; kRounds times.
void Work(int thread) {
  const DLDevice cpu{kDLCPU, 0};
  const DLDataType f32{kDLFloat, 32, 1};
  std::vector<float> in(kFloats), out(kFloats);
  int64_t shape[1] = {kFloats};
  for (int r = 0; r < kRounds; ++r) {
    for (int64_t i = 0; i < kFloats; ++i) in[i] = static_cast<float>(thread * 100000 + r + i);
    void* data = nullptr;
    backplane::Check(bp_device_alloc_data_space(cpu, kFloats * 4, 64, f32, &data));
    DLTensor host{in.data(), cpu, 1, f32, shape, nullptr, 0};
    DLTensor dev{data, cpu, 1, f32, shape, nullptr, 0};
    DLTensor back{out.data(), cpu, 1, f32, shape, nullptr, 0};
    backplane::Check(bp_device_copy_data_from_to(&host, &dev, nullptr));
    backplane::Check(bp_device_copy_data_from_to(&dev, &back, nullptr));
    backplane::Check(bp_device_stream_sync(cpu, nullptr));
    if (out != in) std::abort();
    backplane::Check(bp_device_free_data_space(cpu, data));
  }
}

TEST(TraceLayerThreads, EveryCallOfEveryThreadOnItsOwnTrack) {
  const fs::path dir = fs::path(BACKPLANE_TEST_SCRATCH_DIR) / "trace";
  fs::create_directories(dir);
  const std::string file = (dir / "threads.json").string();
  fs::remove(file);
  EXPECT_EXIT(
      {
        backplane::EnableLayers("trace:file=" + file);
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) threads.emplace_back(Work, t);
        for (std::thread& t : threads) t.join();
        std::exit(0);
      },
      testing::ExitedWithCode(0), "");
  std::ifstream in(file);
  ASSERT_TRUE(in.good()) << "no trace file " << file;
  std::stringstream text;
  text << in.rdbuf();
  const Json doc = Json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(doc.is_object()) << "not a JSON object";

  std::map<std::string, int> api;                      // entry -> calls
  std::map<uint32_t, std::map<std::string, int>> per;  // host tid -> entry -> calls
  std::set<uint32_t> named;
  uint64_t copy_bytes = 0;
  int copies = 0;
  for (const Json& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name" && e["pid"] == 1)
      named.insert(e["tid"].get<uint32_t>());
    if (e["ph"] != "X") continue;
    EXPECT_GE(e["dur"].get<double>(), 0) << e;
    if (e["cat"] == "api") {
      api[e["name"].get<std::string>()]++;
      per[e["tid"].get<uint32_t>()][e["name"].get<std::string>()]++;
    }
    if (e["cat"] == "copy") {
      ++copies;
      copy_bytes += e["args"]["bytes"].get<uint64_t>();
    }
  }
  const int calls = kThreads * kRounds;
  EXPECT_EQ(api["alloc_data_space"], calls);
  EXPECT_EQ(api["free_data_space"], calls);
  EXPECT_EQ(api["copy_data_from_to"], 2 * calls);
  EXPECT_EQ(api["stream_sync"], calls);
  EXPECT_EQ(copies, 2 * calls);
  EXPECT_EQ(copy_bytes, static_cast<uint64_t>(2 * calls * kFloats * 4));
  // A track per thread, each with its own calls: kRounds of each entry.
  int worker_tracks = 0;
  for (const auto& [tid, entries] : per) {
    EXPECT_TRUE(named.count(tid)) << "host tid " << tid << " has no thread_name";
    if (entries.count("alloc_data_space") == 0) continue;  // the main thread's own calls
    ++worker_tracks;
    EXPECT_EQ(entries.at("alloc_data_space"), kRounds) << "tid " << tid;
    EXPECT_EQ(entries.at("copy_data_from_to"), 2 * kRounds) << "tid " << tid;
  }
  EXPECT_EQ(worker_tracks, kThreads);
  EXPECT_EQ(doc["otherData"]["dropped_events"], 0);
}

}  // namespace
