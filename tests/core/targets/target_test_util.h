// SPDX-License-Identifier: Apache-2.0
// Helpers for the target tests: parse expecting success or a failure, with the message.
#ifndef BACKPLANE_TESTS_PLUGINS_TARGETS_TARGET_TEST_UTIL_H_
#define BACKPLANE_TESTS_PLUGINS_TARGETS_TARGET_TEST_UTIL_H_

#include <gtest/gtest.h>

#include <backplane/backplane.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "plugins/test_util.h"

namespace bptest {

// Parses `text`; on failure returns the status and message instead of throwing.
inline Status TryParse(const std::string& text) {
  bp_object_t* out = nullptr;
  Status s = Capture(bp_target_parse(text.c_str(), &out));
  bp_object_release(out);
  return s;
}

// The canonical JSON of the Target `text` parses to, as a JSON value.
inline nlohmann::json CanonicalOf(const std::string& text) {
  return nlohmann::json::parse(backplane::Target::Parse(text).ToJson());
}

// Whether `haystack` contains `needle`.
inline bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

// Checks that parsing `text` fails with `kind` and a message that holds each of `needles`.
inline void ExpectParseError(const std::string& text, bp_status_t kind,
                             std::initializer_list<const char*> needles) {
  SCOPED_TRACE("parsing: " + text);
  const Status s = TryParse(text);
  EXPECT_EQ(s.kind, kind) << s;
  for (const char* needle : needles) {
    EXPECT_TRUE(Contains(s.message, needle))
        << "the message does not name '" << needle << "': " << s;
  }
}

// Parses `text`, prints it as canonical JSON, parses that again and checks that both
// Targets and both texts are equal.
inline void ExpectRoundTrip(const std::string& text) {
  SCOPED_TRACE("round trip of: " + text);
  const backplane::Target first = backplane::Target::Parse(text);
  const std::string json = first.ToJson();
  const backplane::Target second = backplane::Target::Parse(json);
  EXPECT_EQ(second.ToJson(), json);
  EXPECT_TRUE(first == second);
  // Canonical means sorted keys, no spaces: what nlohmann-json prints for the same value.
  EXPECT_EQ(nlohmann::json::parse(json).dump(), json);
}

}  // namespace bptest

#endif  // BACKPLANE_TESTS_PLUGINS_TARGETS_TARGET_TEST_UTIL_H_
