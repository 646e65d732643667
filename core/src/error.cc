// SPDX-License-Identifier: Apache-2.0
// The per-thread error slot: every failing call leaves its kind and message here.
#include <new>
#include <string>

#include "common.h"

namespace backplane {
namespace core {
namespace {

struct ErrorSlot {
  bp_status_t kind = BP_OK;
  std::string message;
};

ErrorSlot& Slot() {
  thread_local ErrorSlot slot;
  return slot;
}

}  // namespace

__thread uint64_t t_error_sequence __attribute__((tls_model("initial-exec"))) = 0;

bp_status_t SetError(bp_status_t kind, const std::string& message) noexcept {
  ErrorSlot& slot = Slot();
  slot.kind = kind;
  ++t_error_sequence;
  try {
    slot.message = message;
  } catch (...) {
    slot.message.clear();  // out of memory while reporting: keep the kind at least
  }
  return kind;
}

std::string LastErrorMessage() { return Slot().message; }

bp_status_t StatusFromCurrentException() noexcept {
  try {
    throw;
  } catch (const CoreError& e) {
    return SetError(e.kind(), e.what());
  } catch (const std::bad_alloc&) {
    return SetError(BP_ERR_OUT_OF_MEMORY, "out of host memory");
  } catch (const std::exception& e) {
    return SetError(BP_ERR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return SetError(BP_ERR_INTERNAL, "internal error: unknown exception");
  }
}

void CheckPluginStatus(bp_status_t status, uint64_t sequence_before, const std::string& context) {
  if (status == BP_OK) return;
  if (status < 0 || status > BP_ERR_INTERNAL) {
    Fail(BP_ERR_PLUGIN, context + ": returned unknown status " + std::to_string(status));
  }
  if (ErrorSequence() == sequence_before) {
    Fail(status, context + ": failed (" + bp_error_kind_name(status) +
                     ") without an error message; the plugin should call error_set");
  }
  // A message that already starts with the context ("target.build.cuda: NVRTC ...") keeps
  // it once: a plugin that names itself is not named twice.
  const std::string message = LastErrorMessage();
  if (message.size() > context.size() && message.compare(0, context.size(), context) == 0 &&
      (message[context.size()] == ':' || message[context.size()] == ' ')) {
    Fail(status, message);
  }
  Fail(status, context + ": " + message);
}

}  // namespace core
}  // namespace backplane

extern "C" {

BP_EXPORT bp_status_t bp_error_set(bp_status_t kind, const char* message) {
  return backplane::core::SetError(kind, message != nullptr ? message : "");
}

BP_EXPORT bp_status_t bp_error_last(bp_status_t* out_kind, const char** out_message) {
  const auto& slot = backplane::core::Slot();
  if (out_kind != nullptr) *out_kind = slot.kind;
  if (out_message != nullptr) *out_message = slot.message.c_str();
  return BP_OK;
}

BP_EXPORT bp_status_t bp_error_clear(void) {
  auto& slot = backplane::core::Slot();
  slot.kind = BP_OK;
  slot.message.clear();
  return BP_OK;
}

BP_EXPORT const char* bp_error_kind_name(bp_status_t kind) {
  switch (kind) {
    case BP_OK:
      return "ok";
    case BP_ERR_INVALID_ARGUMENT:
      return "invalid argument";
    case BP_ERR_NOT_FOUND:
      return "not found";
    case BP_ERR_ALREADY_EXISTS:
      return "already exists";
    case BP_ERR_OUT_OF_MEMORY:
      return "out of memory";
    case BP_ERR_UNSUPPORTED:
      return "unsupported";
    case BP_ERR_VERSION_MISMATCH:
      return "version mismatch";
    case BP_ERR_PLUGIN:
      return "plugin error";
    case BP_ERR_DEVICE:
      return "device error";
    case BP_ERR_TYPE:
      return "type error";
    case BP_ERR_INTERNAL:
      return "internal error";
    default:
      return "unknown error kind";
  }
}

}  // extern "C"
