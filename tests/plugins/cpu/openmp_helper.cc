// SPDX-License-Identifier: Apache-2.0
// A host program for cpu/openmp_test.cc, which runs it with chosen OpenMP environment variables
// set and unset. It loads the cpu plugin named by argv[1], then builds and runs a kernel with a
// parallel loop for the Target argv[2] (default "c"), and prints one JSON object:
//   {"before": {cpu:0's openmp_* properties}, "after": {the same after the kernel ran},
//    "env_after": {each variable Backplane may set: its value, or null},
//    "affinity_before": N, "affinity_after": N,   (CPUs in this thread's affinity mask)
//    "error": "...", "error_kind": N}             (only when the build or the call failed)
// With --host-openmp first, it loads libgomp itself before the plugin, as a host that uses
// OpenMP does. What the runtime itself read, the test learns from the runtime's own report on
// stderr (OMP_DISPLAY_ENV, KMP_SETTINGS).
#include <dlfcn.h>
#include <sched.h>
#include <stdlib.h>

#include <backplane/backplane.hpp>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace {

namespace bp = backplane;

const char* kScale = R"(# backplane-ir 1
func scale(n: int32, a: buffer<float32>[n]) {
  for i in parallel(0, n) {
    a[i] = a[i] * 3.0
  }
}
)";

nlohmann::json OpenMpProperties() {
  nlohmann::json out = nlohmann::json::object();
  bp::DeviceAPI cpu = bp::DeviceAPI::Get(bp::Device("cpu", 0));
  for (const std::string& key : cpu.ListProperties()) {
    if (key.rfind("openmp_", 0) == 0) out[key] = cpu.GetProperty(key).AsString();
  }
  return out;
}

int AffinityCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : -1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && args[0] == "--host-openmp") {
    if (dlopen("libgomp.so.1", RTLD_NOW | RTLD_GLOBAL) == nullptr) {
      std::printf("{\"error\": \"cannot load libgomp.so.1\"}\n");
      return 2;
    }
    args.erase(args.begin());
  }
  if (args.empty() || bp_plugin_load(args[0].c_str()) != BP_OK) {
    const char* message = nullptr;
    bp_error_last(nullptr, &message);
    std::printf(
        "{\"error\": %s}\n",
        nlohmann::json(message != nullptr ? message : "no plugin path given").dump().c_str());
    return 2;
  }
  nlohmann::json out;
  out["affinity_before"] = AffinityCpus();
  out["before"] = OpenMpProperties();
  try {
    bp::Target target = bp::Target::Parse(args.size() > 1 ? args[1] : "c");
    bp::Module m(bp::Function::Get("target.build.c")(kScale, target.object()).AsObject());
    const int64_t n = 1000;
    bp::Tensor a = bp::Tensor::Empty({n}, DLDataType{kDLFloat, 32, 1}, bp::Device("cpu", 0));
    a.CopyFrom(std::vector<float>(n, 2.0f));
    m.GetFunction("scale")(n, a.dl());
    if (a.ToVector<float>() != std::vector<float>(n, 6.0f)) out["error"] = "wrong answer";
  } catch (const bp::Error& e) {
    out["error"] = e.what();
    out["error_kind"] = static_cast<int>(e.kind());
  }
  out["after"] = OpenMpProperties();
  out["affinity_after"] = AffinityCpus();
  nlohmann::json env = nlohmann::json::object();
  for (const char* name : {"OMP_WAIT_POLICY", "OMP_PROC_BIND"}) {
    const char* v = getenv(name);
    env[name] = v != nullptr ? nlohmann::json(v) : nlohmann::json(nullptr);
  }
  out["env_after"] = env;
  std::printf("%s\n", out.dump().c_str());
  std::fflush(stdout);
  return 0;
}
