/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU catalog kernels as the same loops in C (c_twins.c). */
#ifndef BACKPLANE_TESTS_BENCH_C_TWINS_H_
#define BACKPLANE_TESTS_BENCH_C_TWINS_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#define BP_TWIN_RESTRICT __restrict__
#else
#define BP_TWIN_RESTRICT restrict
#endif

void twin_vector_add(int32_t n, const float* BP_TWIN_RESTRICT a, const float* BP_TWIN_RESTRICT b,
                     float* BP_TWIN_RESTRICT c);
void twin_saxpy(int32_t n, float alpha, const float* BP_TWIN_RESTRICT x, float* BP_TWIN_RESTRICT y);
void twin_sum(int32_t n, const float* BP_TWIN_RESTRICT x, float* BP_TWIN_RESTRICT out);
void twin_softmax(int32_t rows, int32_t cols, const float* BP_TWIN_RESTRICT x,
                  float* BP_TWIN_RESTRICT y);
void twin_matmul(int32_t m, int32_t n, int32_t k, const float* BP_TWIN_RESTRICT a,
                 const float* BP_TWIN_RESTRICT b, float* BP_TWIN_RESTRICT c);
void twin_matmul_tiled(int32_t m, int32_t n, int32_t k, const float* BP_TWIN_RESTRICT a,
                       const float* BP_TWIN_RESTRICT b, float* BP_TWIN_RESTRICT c);
void twin_transpose(int32_t m, int32_t n, const float* BP_TWIN_RESTRICT a,
                    float* BP_TWIN_RESTRICT b);
void twin_conv2d(int32_t batch, int32_t c_in, int32_t c_out, int32_t h, int32_t w, int32_t kh,
                 int32_t kw, int32_t pad, const float* BP_TWIN_RESTRICT x,
                 const float* BP_TWIN_RESTRICT f, float* BP_TWIN_RESTRICT y);

#ifdef __cplusplus
}
#endif

#endif /* BACKPLANE_TESTS_BENCH_C_TWINS_H_ */
