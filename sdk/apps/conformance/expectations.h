// SPDX-License-Identifier: Apache-2.0
// Files of expected failures (--xfail) and unsupported features (--unsupported). Each entry
// names a plugin, a device and a test, each a glob (fnmatch: * ? [...]), and a reason.
//
// Text form, one entry a line; '#' starts a comment line; a field with spaces is quoted:
//   # plugin   device                      test                          reason
//   myaccel    "MyAccel X1*"               codegen.set_stream_routes     one queue per device
//   *          *                           device.memory.out_of_bounds   no bounds on device
//   pointers
// JSON form: an array of {"plugin", "device", "test", "reason"} ("plugin" and "device"
// default to "*"), or an object holding that array under "entries".
//
// The device glob matches the device's name (BP_ATTR_DEVICE_NAME) or its "type:id".
#ifndef BACKPLANE_SDK_CONFORMANCE_EXPECTATIONS_H_
#define BACKPLANE_SDK_CONFORMANCE_EXPECTATIONS_H_

#include <string>
#include <vector>

namespace backplane {
namespace conformance {

struct Expectation {
  std::string plugin = "*";
  std::string device = "*";
  std::string test;
  std::string reason;
  std::string where;  // "file:line", for messages
};

class Expectations {
 public:
  // Adds the entries of `path`. Throws std::runtime_error naming the file and line of an
  // entry it cannot read.
  void Read(const std::string& path);
  // The first entry that matches, or nullptr. `devices` are the names the device answers to.
  const Expectation* Match(const std::string& plugin, const std::vector<std::string>& devices,
                           const std::string& test) const;
  const std::vector<Expectation>& entries() const { return entries_; }

 private:
  std::vector<Expectation> entries_;
};

}  // namespace conformance
}  // namespace backplane

#endif  // BACKPLANE_SDK_CONFORMANCE_EXPECTATIONS_H_
