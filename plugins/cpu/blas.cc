// SPDX-License-Identifier: Apache-2.0
#include "blas.h"

#include <cblas.h>

#include <backplane/sdk/kernel_args.hpp>
#include <backplane/sdk/plugin.hpp>
#include <string>
#include <vector>

namespace backplane {
namespace cpu {

namespace {

// A row-major float32 matrix on the CPU with the given shape, or an Error naming it.
float* Matrix(const bp_value_t& v, const char* name, int64_t rows, int64_t cols) {
  DLTensor* t = sdk::TensorOf(v);
  const std::string who = std::string("blas.sgemm: argument '") + name + "'";
  if (t == nullptr) throw Error(BP_ERR_TYPE, who + " must be a tensor");
  if (t->device.device_type != kDLCPU) {
    throw Error(BP_ERR_INVALID_ARGUMENT, who + " must be on the CPU; copy it to cpu:0 first");
  }
  if (t->dtype.code != kDLFloat || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    throw Error(BP_ERR_INVALID_ARGUMENT, who + " must be float32");
  }
  if (t->ndim != 2 || t->shape[0] != rows || t->shape[1] != cols) {
    std::string shape;
    for (int i = 0; i < t->ndim; ++i) shape += (i ? ", " : "") + std::to_string(t->shape[i]);
    throw Error(BP_ERR_INVALID_ARGUMENT, who + " has shape [" + shape + "], expected [" +
                                             std::to_string(rows) + ", " + std::to_string(cols) +
                                             "]");
  }
  if (t->strides != nullptr && (t->strides[1] != 1 || t->strides[0] != cols)) {
    throw Error(BP_ERR_INVALID_ARGUMENT, who + " must be row-major and compact");
  }
  return reinterpret_cast<float*>(static_cast<char*>(t->data) + t->byte_offset);
}

}  // namespace

void RegisterBlas() {
  sdk::RegisterFunction("blas.sgemm", [](PackedArgs args) {
    if (args.size() != 8) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "blas.sgemm takes 8 arguments (m, n, k, alpha, a, b, beta, c), got " +
                      std::to_string(args.size()));
    }
    const int64_t m = args.Int(0), n = args.Int(1), k = args.Int(2);
    if (m < 0 || n < 0 || k < 0 || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
      throw Error(BP_ERR_INVALID_ARGUMENT, "blas.sgemm: m, n and k must be in 0..2^31-1");
    }
    const float* a = Matrix(args[4], "a", m, k);
    const float* b = Matrix(args[5], "b", k, n);
    float* c = Matrix(args[7], "c", m, n);
    if (m == 0 || n == 0) return sdk::NoneValue();
    const int mi = static_cast<int>(m), ni = static_cast<int>(n), ki = static_cast<int>(k);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, mi, ni, ki,
                static_cast<float>(args.Float(3)), a, ki > 0 ? ki : 1, b, ni,
                static_cast<float>(args.Float(6)), c, ni);
    return sdk::NoneValue();
  });
}

}  // namespace cpu
}  // namespace backplane
