// SPDX-License-Identifier: Apache-2.0
// The work of the packed-call benchmarks (function_call_bench.cc) and of the instruction
// count (function_call_count.cc): one body, so both measure the same call.
#ifndef BACKPLANE_TESTS_BENCH_ADD3_H_
#define BACKPLANE_TESTS_BENCH_ADD3_H_

#include <backplane/c_api.h>

#include <cstdint>

namespace benchwork {

// Kept out of line (and out of interprocedural analysis) so the baseline pays a real call, as
// the packed function's body does.
__attribute__((noinline, noipa)) inline int64_t Add3(int64_t a, int64_t b, int64_t c) {
  return a + b + c;
}

// The same work as a packed function body: what a plugin registers.
inline bp_status_t Add3Packed(void* /*resource*/, const bp_value_t* args, int32_t num_args,
                              bp_value_t* out_result) {
  if (num_args != 3 || args[0].type != BP_VALUE_INT || args[1].type != BP_VALUE_INT ||
      args[2].type != BP_VALUE_INT) {
    return bp_error_set(BP_ERR_INVALID_ARGUMENT, "bench.add3 takes 3 integers");
  }
  out_result->type = BP_VALUE_INT;
  out_result->u.v_int64 = Add3(args[0].u.v_int64, args[1].u.v_int64, args[2].u.v_int64);
  return BP_OK;
}

}  // namespace benchwork

#endif  // BACKPLANE_TESTS_BENCH_ADD3_H_
