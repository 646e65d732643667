// SPDX-License-Identifier: Apache-2.0
#include "openmp.h"

#include <dlfcn.h>
#include <stdlib.h>

#include <cctype>
#include <cstring>
#include <mutex>
#include <optional>
#include <string>

namespace backplane {
namespace cpu {
namespace openmp {
namespace {

// The OpenMP runtimes a kernel library may link: gcc's, LLVM's (Debian's soname and the plain
// one), Intel's.
constexpr const char* kRuntimes[] = {"libgomp.so.1", "libomp.so.5", "libomp.so", "libiomp5.so"};

// The first runtime in the process, or null.
const char* LoadedRuntime() {
  for (const char* name : kRuntimes) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) {
      dlclose(h);
      return name;
    }
  }
  return nullptr;
}

// Keeps every runtime in the process loaded: closing the last kernel library would otherwise
// unload it under its worker threads (a crash).
void PinRuntimes() {
  for (const char* name : kRuntimes) {
    if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE)) dlclose(h);
  }
}

std::string Lower(std::string s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  s = s.substr(b, e - b);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What the environment says for a group (`main` first): main's value, lowercased, else
// "NAME=value" of each variable set; empty when none is set.
template <size_t N>
std::string FromEnvironment(const char* const (&names)[N]) {
  std::string out;
  for (const char* name : names) {
    const char* v = getenv(name);
    if (v == nullptr) continue;
    if (!out.empty()) out += ", ";
    out += name == names[0] ? Lower(v) : std::string(name) + "=" + v;
  }
  return out;
}

// The setting a group gets when Backplane may still choose.
template <size_t N>
Setting Choose(const char* const (&names)[N], const char* ours) {
  std::string env = FromEnvironment(names);
  if (env.empty()) return Setting{ours, "backplane"};
  return Setting{env, "environment"};
}

// The settings a runtime that was loaded first read from the environment then: the best
// account is the environment now.
template <size_t N>
Setting Host(const char* const (&names)[N]) {
  std::string env = FromEnvironment(names);
  return Setting{env.empty() ? "default" : env, "host"};
}

// The runtime's binding (omp_get_proc_bind), by name; empty if it cannot be asked.
std::string ProcBindOf(const char* runtime) {
  void* h = dlopen(runtime, RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return "";
  std::string out;
  if (void* f = dlsym(h, "omp_get_proc_bind")) {
    static const char* const kNames[] = {"false", "true", "primary", "close", "spread"};
    const int bind = reinterpret_cast<int (*)()>(f)();
    out = bind >= 0 && bind < 5 ? kNames[bind] : std::to_string(bind);
  }
  dlclose(h);
  return out;
}

std::mutex& Mu() {
  static std::mutex mu;
  return mu;
}

// Guarded by Mu().
State& Data() {
  static State state{"pending", "", {}, {}};
  return state;
}

// Records that `runtime` was there before Backplane could choose.
void MarkHost(State& s, const char* runtime) {
  s.settings = "host";
  s.runtime = runtime;
  s.wait_policy = Host(kWaitVariables);
  s.proc_bind = Host(kBindVariables);
}

// Sets `name` to `value` for one load, if the user has not set it; restores it after.
class TemporaryVariable {
 public:
  TemporaryVariable(const char* name, const char* value) : name_(name), value_(value) {
    set_ = getenv(name) == nullptr && setenv(name, value, /*overwrite=*/0) == 0;
  }
  ~TemporaryVariable() {
    // Only our own value: a host thread may have set the variable since.
    const char* now = getenv(name_);
    if (set_ && now != nullptr && std::strcmp(now, value_) == 0) unsetenv(name_);
  }
  TemporaryVariable(const TemporaryVariable&) = delete;
  TemporaryVariable& operator=(const TemporaryVariable&) = delete;

 private:
  const char* name_;
  const char* value_;
  bool set_ = false;
};

}  // namespace

State Current() {
  std::lock_guard<std::mutex> lock(Mu());
  State& s = Data();
  if (s.settings == "pending") {
    // A runtime the host loaded since (or before the plugin) has read its settings already.
    if (const char* runtime = LoadedRuntime()) {
      MarkHost(s, runtime);
      return s;
    }
    State preview = s;
    preview.wait_policy = Choose(kWaitVariables, kWaitPolicy);
    preview.proc_bind = Choose(kBindVariables, kProcBind);
    return preview;
  }
  return s;
}

void* LoadKernelLibrary(const std::string& path) {
  std::unique_lock<std::mutex> lock(Mu());
  State& s = Data();
  if (s.settings == "pending") {
    if (const char* runtime = LoadedRuntime()) MarkHost(s, runtime);
  }
  if (s.settings != "pending") {
    // Settled for good: later loads need not wait for each other.
    lock.unlock();
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle != nullptr) PinRuntimes();
    return handle;
  }
  const Setting wait = Choose(kWaitVariables, kWaitPolicy);
  const Setting bind = Choose(kBindVariables, kProcBind);
  void* handle = nullptr;
  {
    std::optional<TemporaryVariable> wait_var, bind_var;
    if (wait.from == "backplane") wait_var.emplace("OMP_WAIT_POLICY", kWaitPolicy);
    if (bind.from == "backplane") bind_var.emplace("OMP_PROC_BIND", kProcBind);
    // libgomp reads the environment in its constructor, during this dlopen.
    handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    // LLVM's libomp reads it at its first call: make that call now. (dlsym on the handle
    // searches the library's dependencies; libgomp answers without side effects.)
    if (handle != nullptr) {
      if (void* f = dlsym(handle, "omp_get_max_threads")) reinterpret_cast<int (*)()>(f)();
    }
  }
  if (handle == nullptr) return nullptr;
  PinRuntimes();
  if (const char* runtime = LoadedRuntime()) {
    s.settings = "applied";
    s.runtime = runtime;
    s.wait_policy = wait;
    s.proc_bind = bind;
    const std::string asked = ProcBindOf(runtime);
    if (!asked.empty()) s.proc_bind.value = asked;
  }
  // Otherwise the library brought no runtime (a serial kernel built without one): the next
  // library that brings one gets the settings.
  return handle;
}

}  // namespace openmp
}  // namespace cpu
}  // namespace backplane
