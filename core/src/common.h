// SPDX-License-Identifier: Apache-2.0
// Internals shared by the core's sources: the exception the core throws inside, the edge
// macros that turn it into a status at every exported function, and small helpers.
#ifndef BACKPLANE_CORE_COMMON_H_
#define BACKPLANE_CORE_COMMON_H_

#include <backplane/c_api.h>

#include <exception>
#include <string>

namespace backplane {
namespace core {

// The one exception type used inside the core.
class CoreError : public std::exception {
 public:
  CoreError(bp_status_t kind, std::string message) : kind_(kind), message_(std::move(message)) {}
  bp_status_t kind() const { return kind_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  bp_status_t kind_;
  std::string message_;
};

[[noreturn]] inline void Fail(bp_status_t kind, std::string message) {
  throw CoreError(kind, std::move(message));
}

// Converts the exception being handled into a status and the error slot.
bp_status_t StatusFromCurrentException() noexcept;

// Sets the error slot (the implementation of bp_error_set).
bp_status_t SetError(bp_status_t kind, const std::string& message) noexcept;

// Counts failures recorded on this thread, so a caller can tell whether a callee that
// returned an error also set a message. Read around every call into a plugin, so it is a
// plain integer in the static TLS block (`__thread`: no init guard, no TLS wrapper call).
extern __thread uint64_t t_error_sequence __attribute__((tls_model("initial-exec")));
inline uint64_t ErrorSequence() noexcept { return t_error_sequence; }

// The message in the error slot (empty if none).
std::string LastErrorMessage();

// Converts a status returned by plugin code into a CoreError with `context` prepended.
// If the plugin returned a failure without setting a message, says so.
void CheckPluginStatus(bp_status_t status, uint64_t sequence_before, const std::string& context);

// "1.0" style version text.
inline std::string VersionText(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace core
}  // namespace backplane

// Every exported function body is wrapped in these: nothing thrown inside escapes.
#define BP_API_BEGIN try {
#define BP_API_END                                          \
  }                                                         \
  catch (...) {                                             \
    return ::backplane::core::StatusFromCurrentException(); \
  }                                                         \
  return BP_OK;

#define BP_REQUIRE_ARG(cond, what)                                                             \
  do {                                                                                         \
    if (!(cond))                                                                               \
      ::backplane::core::Fail(BP_ERR_INVALID_ARGUMENT, std::string(__func__) + ": " + (what)); \
  } while (0)

#endif  // BACKPLANE_CORE_COMMON_H_
