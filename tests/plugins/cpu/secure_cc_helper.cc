// SPDX-License-Identifier: Apache-2.0
// A host program for cpu/secure_process_test.cc, which runs a copy of it set-user-ID to
// another user (so the kernel marks the process AT_SECURE, as for any setuid program) with a
// hostile environment. It loads the cpu plugin named by argv[1], then builds and runs a small
// kernel for each Target in argv[2..], and prints one line per step:
//   secure <getauxval(AT_SECURE)>
//   ok <target>                        the kernel built and gave the right answer
//   error <status> <target>: <message> the build or the call failed
#include <sys/auxv.h>
#include <unistd.h>

#include <backplane/backplane.hpp>
#include <cstdio>
#include <string>
#include <vector>

// A set-user-ID process cannot be traced, not even by LeakSanitizer's own helper thread, so
// under the sanitizer presets the leak check at exit would fail the run; it has nothing to
// find here that the other tests do not already cover.
extern "C" int __lsan_is_turned_off() { return 1; }

namespace {

const char* kScale = R"(# backplane-ir 1
func scale(n: int32, a: buffer<float32>[n]) {
  for i in serial(0, n) {
    a[i] = a[i] * 3.0
  }
}
)";

}  // namespace

int main(int argc, char** argv) {
  std::printf("secure %lu\n", getauxval(AT_SECURE));
  if (argc < 2 || bp_plugin_load(argv[1]) != BP_OK) {
    const char* message = nullptr;
    bp_error_last(nullptr, &message);
    std::printf("error load %s\n", message != nullptr ? message : "no plugin path given");
    return 2;
  }
  namespace bp = backplane;
  for (int i = 2; i < argc; ++i) {
    const std::string text = argv[i];
    try {
      bp::Target target = bp::Target::Parse(text);
      bp::Module m(bp::Function::Get("target.build.c")(kScale, target.object()).AsObject());
      bp::Tensor a = bp::Tensor::Empty({4}, DLDataType{kDLFloat, 32, 1}, bp::Device("cpu", 0));
      a.CopyFrom(std::vector<float>{1, 2, 3, 4});
      m.GetFunction("scale")(4, a.dl());
      const bool right = a.ToVector<float>() == std::vector<float>{3, 6, 9, 12};
      std::printf("%s %s\n", right ? "ok" : "error wrong-answer", text.c_str());
    } catch (const bp::Error& e) {
      std::printf("error %d %s: %s\n", static_cast<int>(e.kind()), text.c_str(), e.what());
    }
  }
  std::fflush(stdout);
  return 0;
}
