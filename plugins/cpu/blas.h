// SPDX-License-Identifier: Apache-2.0
// Vendor library functions the cpu plugin registers for generated code to call through
// call_packed (docs/ir.md): blas.sgemm over OpenBLAS.
#ifndef BACKPLANE_PLUGINS_CPU_BLAS_H_
#define BACKPLANE_PLUGINS_CPU_BLAS_H_

namespace backplane {
namespace cpu {

// Registers blas.sgemm(m, n, k, alpha, a, b, beta, c): c = alpha * a @ b + beta * c for
// row-major float32 tensors a [m, k], b [k, n], c [m, n] on the CPU.
void RegisterBlas();

}  // namespace cpu
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_CPU_BLAS_H_
