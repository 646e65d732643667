// SPDX-License-Identifier: Apache-2.0
// SetDevice and memory: data space (alignment, distinct allocations, zero-size and huge
// requests, freeing), the workspace and its fallback to data space, and handles the plugin
// must refuse (BP-PLUGIN-6, BP-PLUGIN-10).
#include <algorithm>
#include <backplane/backplane.hpp>
#include <mutex>
#include <random>
#include <thread>

#include "conformance.h"
#include "device_util.h"

namespace backplane {
namespace conformance {

namespace {

constexpr DLDataType kU8{kDLUInt, 8, 1};

std::string HandleText(const void* p) { return Hex(reinterpret_cast<uintptr_t>(p), 1); }

// Writes random bytes into `d` and reads them back; fails naming `what`.
void RoundTrip(const DataSpace& d, uint64_t seed, const std::string& what) {
  if (d.size() == 0) return;
  const std::vector<uint8_t> want = RandomBytes(d.size(), seed);
  std::vector<uint8_t> got = DifferentBytes(want, seed + 1);
  Copy(HostAt(const_cast<uint8_t*>(want.data())), At(d), d.size(), nullptr,
       what + " (to the device)");
  Sync(d.device(), nullptr, what);
  Copy(At(d), HostAt(got.data()), d.size(), nullptr, what + " (back to the host)");
  Sync(d.device(), nullptr, what);
  ExpectBytes(got.data(), want.data(), d.size(),
              "a " + std::to_string(d.size()) + "-byte round trip through " + what);
}

void SetDevice(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  if (ctx.api->set_device == nullptr)
    ctx.Detail("no set_device entry: the device needs no activation");
  for (int32_t id = 0; id < std::min(ctx.device_count, 8); ++id) {
    const DLDevice d{ctx.dev.device_type, id};
    CheckCall(bp_device_set(d), "set_device(" + DeviceString(d) + ")");
  }
  CheckCall(bp_device_set(ctx.dev), "set_device(" + DeviceString(ctx.dev) + ")");
  // Each thread activates the device and uses it.
  std::mutex mu;
  std::string problem;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        CheckCall(bp_device_set(ctx.dev),
                  "set_device(" + DeviceString(ctx.dev) + ") on thread " + std::to_string(t));
        DataSpace d(ctx.dev, 4097);
        RoundTrip(d, 50 + t,
                  "a data space allocated after set_device on thread " + std::to_string(t));
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (problem.empty()) problem = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (!problem.empty()) Fail(problem);
}

void MissingDevice(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  const DLDevice missing{ctx.dev.device_type, ctx.device_count};
  const std::string name = DeviceString(missing) + " (past the last device)";
  std::vector<std::string> problems;
  if (ctx.api->set_device != nullptr) {
    const bp_status_t st = bp_device_set(missing);
    if (st == BP_OK)
      problems.push_back("set_device(" + name + ") returned BP_OK");
    else
      ctx.Detail("set_device: " + TakeError(st));
  }
  void* p = nullptr;
  bp_status_t st = bp_device_alloc_data_space(missing, 64, 64, kU8, &p);
  if (st == BP_OK) {
    problems.push_back("alloc_data_space(" + name + ", 64 bytes) returned BP_OK");
    if (bp_device_free_data_space(missing, p) != BP_OK) bp_error_clear();
  } else {
    ctx.Detail("alloc_data_space: " + TakeError(st));
  }
  if (ctx.api->create_stream != nullptr) {
    bp_stream_t s = nullptr;
    st = bp_device_stream_create(missing, &s);
    if (st == BP_OK && s != nullptr) {
      problems.push_back("create_stream(" + name + ") gave a stream");
      if (bp_device_stream_free(missing, s) != BP_OK) bp_error_clear();
    } else if (st != BP_OK) {
      ctx.Detail("create_stream: " + TakeError(st));
    }
  }
  if (!problems.empty()) {
    std::string all;
    for (const auto& p2 : problems) all += (all.empty() ? "" : "; ") + p2;
    Fail(all + "; a device that does not exist is an error (BP-PLUGIN-10)");
  }
}

void Alignment(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  uint64_t seed = 1;
  for (size_t align = 1; align <= 4096; align *= 2) {
    for (size_t size : {size_t{1}, size_t{100}, size_t{4097}}) {
      DataSpace d(ctx.dev, size, align);
      if (ctx.HostMemory() && reinterpret_cast<uintptr_t>(d.handle()) % align != 0) {
        Fail("alloc_data_space(" + std::to_string(size) + " bytes, alignment " +
             std::to_string(align) + ") returned " + HandleText(d.handle()) +
             ", which is not aligned to " + std::to_string(align));
      }
      RoundTrip(
          d, ++seed,
          "a " + std::to_string(size) + "-byte data space aligned to " + std::to_string(align));
    }
  }
  if (!ctx.HostMemory()) {
    ctx.Detail(
        "data space may be an opaque handle (BP-PLUGIN-6), so only host memory's "
        "addresses are checked for alignment; every allocation here was used");
  }
}

void Distinct(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  const std::vector<size_t> sizes = {1,     3, 8, 64,   100,   255, 4096, 4097,
                                     65536, 1, 3, 4097, 12345, 64,  7,    2048};
  std::vector<DataSpace> spaces;
  for (size_t s : sizes) spaces.emplace_back(ctx.dev, s);
  for (size_t i = 0; i < spaces.size(); ++i) {
    if (spaces[i].handle() == nullptr) {
      Fail("alloc_data_space(" + std::to_string(sizes[i]) + " bytes) returned a null handle");
    }
    for (size_t j = 0; j < i; ++j) {
      if (spaces[i].handle() == spaces[j].handle()) {
        Fail("alloc_data_space returned handle " + HandleText(spaces[i].handle()) +
             " twice (data spaces " + std::to_string(j) + " and " + std::to_string(i) +
             ", both alive)");
      }
      if (ctx.HostMemory()) {
        const auto a = reinterpret_cast<uintptr_t>(spaces[i].handle());
        const auto b = reinterpret_cast<uintptr_t>(spaces[j].handle());
        if (a < b + sizes[j] && b < a + sizes[i]) {
          Fail("data space " + std::to_string(i) + " [" + HandleText(spaces[i].handle()) + ", +" +
               std::to_string(sizes[i]) + ") overlaps data space " + std::to_string(j) + " [" +
               HandleText(spaces[j].handle()) + ", +" + std::to_string(sizes[j]) + ")");
        }
      }
    }
  }
  std::vector<std::vector<uint8_t>> patterns;
  for (size_t i = 0; i < spaces.size(); ++i) {
    patterns.push_back(RandomBytes(sizes[i], 1000 + i));
    Copy(HostAt(patterns[i].data()), At(spaces[i]), sizes[i], nullptr,
         "writing data space " + std::to_string(i));
  }
  Sync(ctx.dev, nullptr, "writing every data space");
  for (size_t i = 0; i < spaces.size(); ++i) {
    std::vector<uint8_t> got = DifferentBytes(patterns[i], 7 + i);
    Copy(At(spaces[i]), HostAt(got.data()), sizes[i], nullptr,
         "reading data space " + std::to_string(i));
    Sync(ctx.dev, nullptr, "reading data space " + std::to_string(i));
    try {
      ExpectBytes(got.data(), patterns[i].data(), sizes[i],
                  "data space " + std::to_string(i) + " (" + std::to_string(sizes[i]) + " bytes)");
    } catch (const TestFailure& e) {
      Fail(std::string(e.what()) + " after all " + std::to_string(spaces.size()) +
           " live data spaces were written, each with its own pattern: allocations overlap");
    }
  }
}

void ZeroSize(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  for (int round = 0; round < 3; ++round) {
    DataSpace a(ctx.dev, 0);
    DataSpace b(ctx.dev, 0);
    DataSpace c(ctx.dev, 4097);
    RoundTrip(c, 60 + round, "a data space allocated beside two zero-size ones");
    b.Free();
    a.Free();
    c.Free();
  }
}

void Huge(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  std::vector<std::pair<size_t, std::string>> requests = {
      {SIZE_MAX, "SIZE_MAX"},
      {SIZE_MAX - 63, "SIZE_MAX - 63 (overflows when rounded up to the alignment)"},
      {size_t{1} << 62, "2^62"},
      {size_t{1} << 60, "2^60"}};
  bp_value_t total;
  if (!ctx.HostMemory() &&
      bp_device_get_attr(ctx.dev, BP_ATTR_TOTAL_GLOBAL_MEMORY, &total) == BP_OK &&
      total.type == BP_VALUE_INT && total.u.v_int64 > 0 && total.u.v_int64 < (int64_t{1} << 58)) {
    requests.push_back({static_cast<size_t>(total.u.v_int64) * 2, "twice total_global_memory"});
  }
  bp_error_clear();
  for (const auto& [size, text] : requests) {
    void* p = nullptr;
    const bp_status_t st = bp_device_alloc_data_space(ctx.dev, size, 64, kU8, &p);
    if (st == BP_OK) {
      if (bp_device_free_data_space(ctx.dev, p) != BP_OK) bp_error_clear();
      Fail("alloc_data_space(" + std::to_string(size) + " bytes = " + text +
           ") succeeded (handle " + HandleText(p) +
           "); a request the device cannot hold fails with BP_ERR_OUT_OF_MEMORY (BP-PLUGIN-10)");
    }
    ctx.Detail(text + ": " + TakeError(st));
  }
  DataSpace after(ctx.dev, 4097);
  RoundTrip(after, 70, "a data space allocated after the refused requests");
}

void FreeChurn(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  auto available = [&]() -> int64_t {
    bp_value_t v;
    if (bp_device_get_attr(ctx.dev, BP_ATTR_AVAILABLE_GLOBAL_MEMORY, &v) != BP_OK) {
      bp_error_clear();
      return -1;
    }
    if (v.type == BP_VALUE_OBJECT) bp_object_release(v.u.v_obj);
    return v.type == BP_VALUE_INT ? v.u.v_int64 : -1;
  };
  {
    // The driver's own first-use allocations (staging, page tables) are made before the count.
    DataSpace warm(ctx.dev, 4097);
    RoundTrip(warm, 79, "a data space before the churn");
    warm.Free();
  }
  const int64_t before = available();
  std::mt19937_64 rng(5);
  std::vector<DataSpace> live;
  for (int i = 0; i < 400; ++i) {
    if (live.empty() || (live.size() < 32 && rng() % 3 != 0)) {
      live.emplace_back(ctx.dev, rng() % 16385);
    } else {
      const size_t k = rng() % live.size();
      live[k].Free();
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (i % 50 == 49 && !live.empty()) {
      RoundTrip(live[rng() % live.size()], 80 + i,
                "a data space after " + std::to_string(i + 1) + " allocations and frees");
    }
  }
  std::shuffle(live.begin(), live.end(), rng);
  for (DataSpace& d : live) d.Free();
  const int64_t after = available();
  // A device whose memory is the host's (device_kind "cpu": PoCL, or a server's cpu:0 through the
  // remote plugin) reports the host's free memory, which every other process moves: not compared.
  bool host_like = false;
  bp_value_t kind;
  if (bp_device_get_attr(ctx.dev, BP_ATTR_DEVICE_KIND, &kind) == BP_OK) {
    if (kind.type == BP_VALUE_OBJECT) {
      const char* text = nullptr;
      size_t size = 0;
      if (bp_string_get(kind.u.v_obj, &text, &size) == BP_OK && text != nullptr)
        host_like = std::string(text, size) == "cpu";
      bp_object_release(kind.u.v_obj);
    }
  } else {
    bp_error_clear();
  }
  if (!ctx.HostMemory() && !host_like && before >= 0 && after >= 0 &&
      after + (int64_t{1} << 20) < before) {
    Fail("available_global_memory was " + std::to_string(before) +
         " bytes before 400 allocations and frees and " + std::to_string(after) +
         " after every one was freed: freed data space is not returned");
  }
}

void Workspace(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  if ((ctx.api->alloc_workspace == nullptr) != (ctx.api->free_workspace == nullptr)) {
    Fail(std::string("only ") +
         (ctx.api->alloc_workspace != nullptr ? "alloc_workspace" : "free_workspace") +
         " is set; alloc_workspace and free_workspace are a pair, and with one missing the core "
         "falls back to data space for both, so a workspace would be freed as data space");
  }
  if (ctx.api->alloc_workspace != nullptr) {
    ctx.Detail("the plugin provides the workspace");
  } else {
    // The fallback: a workspace block is data space, so it takes copies like one.
    ctx.Detail("no workspace entries: the core falls back to data space (the contract's default)");
    void* block = nullptr;
    CheckCall(bp_device_alloc_workspace(ctx.dev, 4097, kU8, &block), "alloc_workspace(4097 bytes)");
    const std::vector<uint8_t> data = RandomBytes(4097, 95);
    std::vector<uint8_t> back = DifferentBytes(data, 96);
    Copy(HostAt(const_cast<uint8_t*>(data.data())), Place{ctx.dev, block, 0}, 4097, nullptr,
         "a copy into a workspace block that fell back to data space");
    Copy(Place{ctx.dev, block, 0}, HostAt(back.data()), 4097, nullptr, "a copy out of it");
    Sync(ctx.dev, nullptr, "copies through a workspace block");
    ExpectBytes(back.data(), data.data(), 4097,
                "a round trip through a workspace block (data space)");
    CheckCall(bp_device_free_workspace(ctx.dev, block), "free_workspace(4097 bytes)");
  }
  const std::vector<size_t> sizes = {0, 1, 64, 4097, size_t{1} << 20, 3};
  std::mutex mu;
  std::string problem;
  auto round = [&](const std::string& where) {
    std::vector<void*> blocks;
    for (size_t s : sizes) {
      void* p = nullptr;
      CheckCall(bp_device_alloc_workspace(ctx.dev, s, kU8, &p),
                "alloc_workspace(" + std::to_string(s) + " bytes) " + where);
      if (p == nullptr && s > 0)
        Fail("alloc_workspace(" + std::to_string(s) + " bytes) " + where + " returned null");
      for (size_t j = 0; j < blocks.size(); ++j) {
        if (p != nullptr && p == blocks[j] && s > 0 && sizes[j] > 0) {
          Fail("alloc_workspace returned " + HandleText(p) + " twice " + where + ", both alive");
        }
      }
      if (ctx.HostMemory() && s > 0)
        std::fill_n(static_cast<uint8_t*>(p), s, static_cast<uint8_t>(s));
      blocks.push_back(p);
    }
    if (ctx.HostMemory()) {
      for (size_t j = 0; j < blocks.size(); ++j) {
        for (size_t b = 0; b < sizes[j]; ++b) {
          if (static_cast<uint8_t*>(blocks[j])[b] != static_cast<uint8_t>(sizes[j])) {
            Fail("workspace block " + std::to_string(j) + " (" + std::to_string(sizes[j]) +
                 " bytes) " + where + " was overwritten by another live block: byte " +
                 std::to_string(b));
          }
        }
      }
    }
    for (size_t j = blocks.size(); j-- > 0;) {
      CheckCall(bp_device_free_workspace(ctx.dev, blocks[j]),
                "free_workspace(" + std::to_string(sizes[j]) + " bytes) " + where);
    }
  };
  for (int r = 0; r < 3; ++r) round("in round " + std::to_string(r + 1));
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      try {
        for (int r = 0; r < 10; ++r) round("on thread " + std::to_string(t));
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mu);
        if (problem.empty()) problem = e.what();
      }
    });
  }
  for (auto& th : threads) th.join();
  if (!problem.empty()) Fail(problem);
}

// Whether a copy (already issued with status `st`) was refused, at the call or at the sync.
bool Refused(bp_status_t st, DLDevice dev, std::string* error) {
  if (st != BP_OK) {
    *error = TakeError(st);
    return true;
  }
  const bp_status_t s2 = bp_device_stream_sync(dev, nullptr);
  if (s2 != BP_OK) {
    *error = "at stream_sync: " + TakeError(s2);
    return true;
  }
  return false;
}

void BadHandle(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  std::vector<uint8_t> host = RandomBytes(64, 90);
  std::vector<std::string> problems;
  std::string error;
  void* bogus = reinterpret_cast<void*>(uintptr_t{0x5eed5eed0000ull});
  bp_status_t st = bp_device_free_data_space(ctx.dev, bogus);
  if (st == BP_OK)
    problems.push_back("free_data_space of " + HandleText(bogus) +
                       ", which it never allocated, returned BP_OK");
  else
    ctx.Detail("free of a handle never allocated: " + TakeError(st));
  if (!Refused(RawCopy(HostAt(host.data()), Place{ctx.dev, bogus}, 64, nullptr), ctx.dev, &error)) {
    problems.push_back("a copy to " + HandleText(bogus) + ", which it never allocated, succeeded");
  } else {
    ctx.Detail("copy to a handle never allocated: " + error);
  }
  DataSpace d(ctx.dev, 64);
  void* freed = d.handle();
  d.Free();
  if (!Refused(RawCopy(HostAt(host.data()), Place{ctx.dev, freed}, 64, nullptr), ctx.dev, &error)) {
    problems.push_back("a copy to a freed data space succeeded");
  } else {
    ctx.Detail("copy to a freed data space: " + error);
  }
  st = bp_device_free_data_space(ctx.dev, freed);
  if (st == BP_OK)
    problems.push_back("freeing a data space twice returned BP_OK");
  else
    ctx.Detail("second free: " + TakeError(st));
  DataSpace after(ctx.dev, 4097);
  RoundTrip(after, 91, "a data space allocated after the refused handles");
  if (!problems.empty()) {
    std::string all;
    for (const auto& p : problems) all += (all.empty() ? "" : "; ") + p;
    Fail(all + "; a plugin validates the handles it is given (BP-PLUGIN-6)");
  }
}

void OutOfBounds(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  std::vector<uint8_t> host = RandomBytes(128, 92);
  DataSpace d(ctx.dev, 64);
  std::string error;
  struct Case {
    size_t offset, n;
  };
  for (const Case c : {Case{0, 65}, Case{60, 16}, Case{64, 1}, Case{size_t{1} << 40, 8}}) {
    const std::string what = std::to_string(c.n) + " bytes at offset " + std::to_string(c.offset) +
                             " of a 64-byte data space";
    if (!Refused(RawCopy(HostAt(host.data()), At(d, c.offset), c.n, nullptr), ctx.dev, &error)) {
      Fail("a copy of " + what +
           " into it succeeded; a copy past the end of a data space is an error (BP-PLUGIN-6)");
    }
    ctx.Detail(what + ", to the device: " + error);
    if (!Refused(RawCopy(At(d, c.offset), HostAt(host.data()), c.n, nullptr), ctx.dev, &error)) {
      Fail("a copy of " + what +
           " out of it succeeded; a copy past the end of a data space is an error (BP-PLUGIN-6)");
    }
  }
  RoundTrip(d, 93, "the data space after the refused copies");
}

}  // namespace

void AddMemoryTests(std::vector<TestCase>* out) {
  out->push_back({"device.set_device",
                  "SetDevice makes a device active on the calling thread; every existing device "
                  "can be set, from any thread, and used after",
                  "BP-PLUGIN-9", kNeedsDevice, SetDevice});
  out->push_back({"device.missing_device",
                  "a device id past the last device is an error for SetDevice, AllocDataSpace and "
                  "CreateStream, never a crash",
                  "BP-PLUGIN-10", kNeedsDevice, MissingDevice});
  out->push_back({"device.memory.alignment",
                  "AllocDataSpace honours every power-of-two alignment (checked on host addresses; "
                  "opaque handles are used)",
                  "BP-PLUGIN-6", kNeedsDevice, Alignment});
  out->push_back(
      {"device.memory.distinct",
       "live data spaces are distinct and do not overlap: each keeps the pattern written "
       "to it through a copy",
       "BP-PLUGIN-6", kNeedsDevice, Distinct});
  out->push_back({"device.memory.zero_size",
                  "a zero-size AllocDataSpace gives a valid handle that FreeDataSpace accepts",
                  "BP-PLUGIN-6", kNeedsDevice, ZeroSize});
  out->push_back({"device.memory.huge",
                  "a request no device can hold (2^60 bytes, SIZE_MAX) is a clean error, and the "
                  "device works after",
                  "BP-PLUGIN-10", kNeedsDevice, Huge});
  out->push_back({"device.memory.free",
                  "FreeDataSpace releases data space: hundreds of allocations and frees in any "
                  "order keep working and give the memory back",
                  "BP-PLUGIN-6", kNeedsDevice | kNeedsDeviceAlone, FreeChurn});
  out->push_back({"device.memory.workspace",
                  "AllocWorkspace/FreeWorkspace work as a pair, from several threads; without them "
                  "the workspace falls back to data space",
                  "BP-PLUGIN-9", kNeedsDevice, Workspace});
  out->push_back({"device.memory.bad_handle",
                  "a handle the plugin never allocated, or freed already, is refused by "
                  "FreeDataSpace and CopyDataFromTo",
                  "BP-PLUGIN-6, BP-PLUGIN-10", kNeedsDevice | kNeedsOpaqueMemory, BadHandle});
  out->push_back({"device.memory.out_of_bounds",
                  "a copy past the end of a data space (size or byte_offset too large) is refused",
                  "BP-PLUGIN-6, BP-PLUGIN-10", kNeedsDevice | kNeedsOpaqueMemory, OutOfBounds});
}

}  // namespace conformance
}  // namespace backplane
