// SPDX-License-Identifier: Apache-2.0
// Objects, values and packed functions through the C ABI and the C++ host API.
#include <gtest/gtest.h>

#include <atomic>
#include <backplane/backplane.hpp>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace bp = backplane;

namespace {

std::string LastMessage() {
  const char* msg = nullptr;
  bp_error_last(nullptr, &msg);
  return msg;
}

TEST(Object, StringKeepsBytesIncludingNul) {
  const std::string text("caf\xC3\xA9\0tail", 10);
  bp_object_t* s = nullptr;
  ASSERT_EQ(bp_string_create(text.data(), text.size(), &s), BP_OK);
  const char* data = nullptr;
  size_t size = 0;
  ASSERT_EQ(bp_string_get(s, &data, &size), BP_OK);
  EXPECT_EQ(std::string(data, size), text);
  EXPECT_EQ(data[size], '\0');
  int32_t type = 0;
  EXPECT_EQ(bp_object_type(s, &type), BP_OK);
  EXPECT_EQ(type, BP_OBJECT_STRING);
  bp_object_release(s);
}

TEST(Object, BytesRoundTripRandomData) {
  std::mt19937 rng(7);
  std::vector<unsigned char> data(4097);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  bp_object_t* b = nullptr;
  ASSERT_EQ(bp_bytes_create(data.data(), data.size(), &b), BP_OK);
  const void* out = nullptr;
  size_t size = 0;
  ASSERT_EQ(bp_bytes_get(b, &out, &size), BP_OK);
  ASSERT_EQ(size, data.size());
  EXPECT_EQ(std::memcmp(out, data.data(), size), 0);
  bp_object_release(b);
}

TEST(Object, WrongTypeIsATypeErrorNamingBoth) {
  bp::ObjectRef s = bp::MakeString("x");
  const void* out = nullptr;
  size_t size = 0;
  EXPECT_EQ(bp_bytes_get(s.get(), &out, &size), BP_ERR_TYPE);
  EXPECT_NE(LastMessage().find("expected a bytes object, got a string object"), std::string::npos)
      << LastMessage();
}

TEST(Object, NullArgumentsAreErrorsNotCrashes) {
  EXPECT_EQ(bp_string_create(nullptr, 3, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_string_get(nullptr, nullptr, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_array_get(nullptr, 0, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_function_call(nullptr, nullptr, 0, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_object_release(nullptr), BP_OK);
}

TEST(Object, ArrayCopiesStringsAndRetainsObjects) {
  bp::ObjectRef inner = bp::MakeString("inner");
  std::string transient = "transient";
  bp_value_t vals[3];
  vals[0].type = BP_VALUE_INT;
  vals[0].u.v_int64 = -42;
  vals[1].type = BP_VALUE_STR;
  vals[1].u.v_str = transient.c_str();
  vals[2].type = BP_VALUE_OBJECT;
  vals[2].u.v_obj = inner.get();
  bp_object_t* arr = nullptr;
  ASSERT_EQ(bp_array_create(vals, 3, &arr), BP_OK);
  transient.assign("overwritten");
  inner = bp::ObjectRef();  // the array still holds a reference
  size_t n = 0;
  ASSERT_EQ(bp_array_size(arr, &n), BP_OK);
  ASSERT_EQ(n, 3u);
  bp_value_t v;
  ASSERT_EQ(bp_array_get(arr, 0, &v), BP_OK);
  EXPECT_EQ(v.u.v_int64, -42);
  ASSERT_EQ(bp_array_get(arr, 1, &v), BP_OK);
  EXPECT_EQ(bp::GetString(v.u.v_obj), "transient");
  ASSERT_EQ(bp_array_get(arr, 2, &v), BP_OK);
  EXPECT_EQ(bp::GetString(v.u.v_obj), "inner");
  EXPECT_EQ(bp_array_get(arr, 3, &v), BP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(LastMessage().find("index 3 is out of range for an array of 3"), std::string::npos);
  bp_object_release(arr);
}

TEST(Function, TypedCallAndResult) {
  auto f = bp::Function::FromCallable([](bp::PackedArgs args) {
    bp_value_t r;
    r.type = BP_VALUE_FLOAT;
    r.u.v_float64 = static_cast<double>(args.Int(0)) * args.Float(1);
    return bp::Any(r);
  });
  std::mt19937 rng(3);
  for (int i = 0; i < 100; ++i) {
    int64_t a = static_cast<int64_t>(rng() % 100000) - 50000;
    double b = std::uniform_real_distribution<double>(-5, 5)(rng);
    EXPECT_DOUBLE_EQ(f(a, b).AsFloat(), static_cast<double>(a) * b);
  }
}

TEST(Function, ExceptionBecomesStatusWithMessage) {
  auto f = bp::Function::FromCallable([](bp::PackedArgs) -> bp::Any {
    throw std::runtime_error("kernel 'saxpy' needs 3 arguments");
  });
  try {
    f();
    FAIL() << "expected an error";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_INTERNAL);
    EXPECT_NE(std::string(e.what()).find("kernel 'saxpy' needs 3 arguments"), std::string::npos);
  }
}

TEST(Function, WrongArgumentTypeNamesBoth) {
  auto f = bp::Function::FromCallable([](bp::PackedArgs args) {
    (void)args.Int(0);
    return bp::Any();
  });
  try {
    f("not an int");
    FAIL() << "expected an error";
  } catch (const bp::Error& e) {
    EXPECT_EQ(e.kind(), BP_ERR_TYPE);
    EXPECT_NE(std::string(e.what()).find("expected an int value, got str"), std::string::npos)
        << e.what();
  }
}

// A raw C body that throws (written without the SDK's edge wrapper) is contained.
bp_status_t ThrowingBody(void*, const bp_value_t*, int32_t, bp_value_t*) {
  throw std::logic_error("raw body threw");
}

TEST(Function, RawThrowingBodyIsContained) {
  bp_object_t* f = nullptr;
  ASSERT_EQ(bp_function_create(ThrowingBody, nullptr, nullptr, &f), BP_OK);
  bp_value_t out;
  EXPECT_EQ(bp_function_call(f, nullptr, 0, &out), BP_ERR_PLUGIN);
  EXPECT_NE(LastMessage().find("raw body threw"), std::string::npos) << LastMessage();
  bp_object_release(f);
}

// Counts its calls and answers its argument count.
std::atomic<int> g_counted_calls{0};
bp_status_t CountingBody(void*, const bp_value_t*, int32_t n, bp_value_t* out) {
  ++g_counted_calls;
  out->type = BP_VALUE_INT;
  out->u.v_int64 = n;
  return BP_OK;
}

// bp_function_call checks its arguments before the body runs (one unsigned compare covers the
// argument count: 0 and up with args, exactly 0 without), and leaves *out_result untouched when
// they are wrong.
TEST(Function, CallChecksItsArgumentsBeforeTheBody) {
  bp_object_t* f = nullptr;
  ASSERT_EQ(bp_function_create(CountingBody, nullptr, nullptr, &f), BP_OK);
  bp::ObjectRef not_a_function = bp::MakeString("x");
  bp_value_t args[2];
  args[0].type = args[1].type = BP_VALUE_INT;
  args[0].u.v_int64 = args[1].u.v_int64 = 1;
  bp_value_t out;
  g_counted_calls = 0;
  struct Case {
    const bp_object_t* func;
    const bp_value_t* args;
    int32_t n;
    bp_value_t* out;
  };
  for (const Case& c :
       {Case{nullptr, args, 2, &out}, Case{not_a_function.get(), args, 2, &out},
        Case{f, args, 2, nullptr}, Case{f, args, -1, &out}, Case{f, args, INT32_MIN, &out},
        Case{f, nullptr, 1, &out}, Case{f, nullptr, -1, &out}}) {
    out.type = BP_VALUE_FLOAT;
    EXPECT_EQ(bp_function_call(c.func, c.args, c.n, c.out), BP_ERR_INVALID_ARGUMENT) << c.n;
    EXPECT_NE(LastMessage().find("bp_function_call: expected a function object"), std::string::npos)
        << LastMessage();
    EXPECT_EQ(out.type, BP_VALUE_FLOAT);
  }
  EXPECT_EQ(g_counted_calls, 0);
  for (const Case& c : {Case{f, nullptr, 0, &out}, Case{f, args, 0, &out}, Case{f, args, 2, &out},
                        Case{f, args, INT32_MAX, &out}}) {
    ASSERT_EQ(bp_function_call(c.func, c.args, c.n, c.out), BP_OK) << c.n;
    EXPECT_EQ(out.type, BP_VALUE_INT);
    EXPECT_EQ(out.u.v_int64, c.n);
  }
  EXPECT_EQ(g_counted_calls, 4);
  bp_object_release(f);
}

bp_status_t SilentFailure(void*, const bp_value_t*, int32_t, bp_value_t*) { return BP_ERR_DEVICE; }

TEST(Function, FailureWithoutMessageIsExplained) {
  bp_error_clear();
  bp_object_t* f = nullptr;
  ASSERT_EQ(bp_function_create(SilentFailure, nullptr, nullptr, &f), BP_OK);
  bp_value_t out;
  EXPECT_EQ(bp_function_call(f, nullptr, 0, &out), BP_ERR_DEVICE);
  EXPECT_NE(LastMessage().find("without setting an error message"), std::string::npos);
  bp_object_release(f);
}

// A contained body (ABI 1.7) is called as a tail call: the same argument checks first, its
// result and its failure (status and message) as it gave them; unknown flag bits are refused.
bp_status_t FailingWithMessage(void*, const bp_value_t*, int32_t, bp_value_t*) {
  return bp_error_set(BP_ERR_DEVICE, "contained body failed on purpose");
}

TEST(Function, AContainedBodyIsCalledWithTheSameChecksAndKeepsItsMessage) {
  bp_object_t* f = nullptr;
  ASSERT_EQ(
      bp_function_create_with_flags(CountingBody, nullptr, nullptr, BP_FUNCTION_CONTAINED, &f),
      BP_OK);
  std::mt19937_64 rng(39);
  std::vector<bp_value_t> args(64);
  for (bp_value_t& a : args) {
    a.type = BP_VALUE_INT;
    a.u.v_int64 = static_cast<int64_t>(rng() % 1000);
  }
  g_counted_calls = 0;
  for (int i = 0; i < 100; ++i) {
    const int32_t n = static_cast<int32_t>(rng() % args.size());
    bp_value_t out;
    out.type = BP_VALUE_FLOAT;
    ASSERT_EQ(bp_function_call(f, args.data(), n, &out), BP_OK);
    EXPECT_EQ(out.type, BP_VALUE_INT);
    EXPECT_EQ(out.u.v_int64, n);
  }
  EXPECT_EQ(g_counted_calls, 100);
  // Wrong calls never reach the body, contained or not.
  bp_value_t out;
  EXPECT_EQ(bp_function_call(f, args.data(), -1, &out), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_function_call(f, nullptr, 1, &out), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(bp_function_call(f, args.data(), 1, nullptr), BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(g_counted_calls, 100);
  bp_object_release(f);

  ASSERT_EQ(bp_function_create_with_flags(FailingWithMessage, nullptr, nullptr,
                                          BP_FUNCTION_CONTAINED, &f),
            BP_OK);
  EXPECT_EQ(bp_function_call(f, nullptr, 0, &out), BP_ERR_DEVICE);
  EXPECT_EQ(LastMessage(), "contained body failed on purpose");
  bp_object_release(f);

  // C++: FromCallable's body is contained; an exception still becomes a status and message.
  bp::Function thrower = bp::Function::FromCallable([](bp::PackedArgs) -> bp::Any {
    throw bp::Error(BP_ERR_NOT_FOUND, "thrown inside a contained body");
  });
  const bp_status_t st = bp_function_call(thrower.object().get(), nullptr, 0, &out);
  EXPECT_EQ(st, BP_ERR_NOT_FOUND);
  EXPECT_EQ(LastMessage(), "thrown inside a contained body");
}

TEST(Function, UnknownFlagsAreRefused) {
  bp_object_t* f = nullptr;
  for (uint32_t flags : {0x2u, 0x80000000u, 0x3u}) {
    EXPECT_EQ(bp_function_create_with_flags(CountingBody, nullptr, nullptr, flags, &f),
              BP_ERR_INVALID_ARGUMENT)
        << flags;
    EXPECT_EQ(f, nullptr);
    EXPECT_NE(LastMessage().find("unknown flag bits"), std::string::npos) << LastMessage();
  }
  ASSERT_EQ(bp_function_create_with_flags(CountingBody, nullptr, nullptr, 0, &f), BP_OK);
  bp_object_release(f);
  EXPECT_EQ(bp_function_create_with_flags(nullptr, nullptr, nullptr, 0, &f),
            BP_ERR_INVALID_ARGUMENT);
}

TEST(Function, ResourceDeleterRunsOnceWhenLastReferenceGoes) {
  static std::atomic<int> deleted{0};
  deleted = 0;
  bp_object_t* f = nullptr;
  int resource = 5;
  ASSERT_EQ(bp_function_create([](void*, const bp_value_t*, int32_t, bp_value_t*) { return 0; },
                               &resource, [](void* r) { deleted += *static_cast<int*>(r); }, &f),
            BP_OK);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([f] {
      for (int i = 0; i < 1000; ++i) {
        bp_object_retain(f);
        bp_object_release(f);
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(deleted.load(), 0);
  bp_object_release(f);
  EXPECT_EQ(deleted.load(), 5);
}

TEST(Function, ThrowingResourceDeleterDoesNotAbortTheHost) {
  bp_object_t* f = nullptr;
  ASSERT_EQ(
      bp_function_create([](void*, const bp_value_t*, int32_t, bp_value_t*) { return 0; }, nullptr,
                         [](void*) { throw std::runtime_error("deleter failed"); }, &f),
      BP_OK);
  testing::internal::CaptureStderr();
  EXPECT_EQ(bp_object_release(f), BP_OK);  // reaching the next line is the point
  EXPECT_NE(testing::internal::GetCapturedStderr().find("deleter failed"), std::string::npos);
}

TEST(Error, SlotIsPerThread) {
  bp_error_set(BP_ERR_NOT_FOUND, "main thread error");
  std::thread([] {
    bp_status_t kind = -1;
    const char* msg = nullptr;
    bp_error_last(&kind, &msg);
    EXPECT_EQ(kind, BP_OK);
    EXPECT_STREQ(msg, "");
    bp_error_set(BP_ERR_DEVICE, "worker error");
  }).join();
  bp_status_t kind = 0;
  const char* msg = nullptr;
  bp_error_last(&kind, &msg);
  EXPECT_EQ(kind, BP_ERR_NOT_FOUND);
  EXPECT_STREQ(msg, "main thread error");
  bp_error_clear();
  bp_error_last(&kind, &msg);
  EXPECT_EQ(kind, BP_OK);
}

TEST(Error, KindNames) {
  EXPECT_STREQ(bp_error_kind_name(BP_ERR_VERSION_MISMATCH), "version mismatch");
  EXPECT_STREQ(bp_error_kind_name(12345), "unknown error kind");
}

}  // namespace
