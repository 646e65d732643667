// SPDX-License-Identifier: Apache-2.0
// The asan preset's LeakSanitizer configuration, checked on the failure it exists to prevent.
//
// GCC 12's sanitizer runtime (Debian 12) intercepts __tls_get_addr and takes a dynamic TLS
// block whose address is 16 bytes past a page boundary for the pre-2.25 glibc layout: it reads
// the two words before the block as its start and size. Since glibc 2.25 those words belong to
// the allocator, so the leak check's tracer scans a garbage range and dies with "Tracer caught
// signal 11" after the test has passed. Whether a block lands there depends on the heap, which
// made CI fail at random on tests whose plugins or drivers use thread_locals. The preset sets
// intercept_tls_get_addr=0 (CMakePresets.json); these tests fail if that is lost, or if the
// leak check stops reporting leaks.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sanitizer/lsan_interface.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

bool PresetOptionsAreSet() {
  const char* options = std::getenv("ASAN_OPTIONS");
  return options != nullptr && std::strstr(options, "intercept_tls_get_addr=0") != nullptr;
}

TEST(LeakSanitizerTest, ThreadsWithDynamicTlsDoNotCrashTheLeakCheck) {
  ASSERT_TRUE(PresetOptionsAreSet())
      << "ASAN_OPTIONS lacks intercept_tls_get_addr=0; run the tests with 'ctest --preset asan', "
         "which sets it (CMakePresets.json), or the leak check below crashes";
  void* probe = dlopen(BACKPLANE_TLS_PROBE, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(probe, nullptr) << dlerror();
  using TouchFn = int64_t (*)(int64_t);
  auto touch = reinterpret_cast<TouchFn>(dlsym(probe, "bp_test_touch_tls"));
  ASSERT_NE(touch, nullptr) << dlerror();

  // Threads that hold dynamic TLS blocks while the leak check runs, as a plugin's stream workers
  // or a driver's compiler threads do at exit. Without the option one thread is enough to crash
  // the tracer on this runtime; eight make it certain whatever the heap layout.
  constexpr int kThreads = 8;
  std::mutex mutex;
  std::condition_variable changed;
  int ready = 0;
  bool release = false;
  std::vector<int64_t> seen(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      seen[i] = touch(i + 1);
      std::unique_lock<std::mutex> lock(mutex);
      ++ready;
      changed.notify_all();
      changed.wait(lock, [&] { return release; });
    });
  }
  {
    std::unique_lock<std::mutex> lock(mutex);
    changed.wait(lock, [&] { return ready == kThreads; });
  }
  const int leaks = __lsan_do_recoverable_leak_check();
  {
    std::lock_guard<std::mutex> lock(mutex);
    release = true;
  }
  changed.notify_all();
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(leaks, 0) << "the leak check reported leaks (see the report above)";
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(seen[i], i + 1) << "thread " << i;
  dlclose(probe);
}

// The pointer is kept only in a disguised form, and made by a thread that has exited, so no
// stack, register or TLS of a live thread holds it: the leak check must report it.
uintptr_t g_hidden = 0;
constexpr uintptr_t kMask = 0x5a5a5a5a5a5a5a5aULL;

TEST(LeakSanitizerTest, AnUnreachableBlockIsStillReported) {
  std::thread maker([] {
    void* block = std::malloc(777);
    std::memset(block, 0x3c, 777);
    g_hidden = reinterpret_cast<uintptr_t>(block) ^ kMask;
  });
  maker.join();
  const int leaks = __lsan_do_recoverable_leak_check();
  std::free(reinterpret_cast<void*>(g_hidden ^ kMask));  // reachable again: no leak at exit
  EXPECT_EQ(leaks, 1) << "a 777-byte block that nothing points to was not reported; is "
                         "detect_leaks=1 in ASAN_OPTIONS?";
}

}  // namespace
