// SPDX-License-Identifier: Apache-2.0
// What the pieces of the C-family emitter (c_family*.cc) share and the header does not declare.
#ifndef BACKPLANE_CODEGEN_SRC_C_FAMILY_INTERNAL_HPP_
#define BACKPLANE_CODEGEN_SRC_C_FAMILY_INTERNAL_HPP_

#include <backplane/ir/ir.hpp>
#include <vector>

namespace backplane {
namespace codegen {

using ir::BinaryOp;
using ir::DType;
using ir::ExprKind;
using ir::StmtKind;

inline const ir::IntImmNode* AsIntImm(const ir::Expr& e) { return e.As<ir::IntImmNode>(); }

// An access is contiguous when every index is scalar but the last, a ramp of stride 1, and
// the buffer has no declared strides; `base` gets the ramp's base.
inline bool Contiguous(const ir::Buffer& buffer, const std::vector<ir::Expr>& indices,
                       ir::Expr* base) {
  const size_t last = indices.size() - 1;
  bool contiguous = buffer->strides.empty();
  for (size_t k = 0; k < last; ++k) contiguous = contiguous && indices[k].dtype().lanes == 1;
  const ir::RampNode* ramp = indices[last].As<ir::RampNode>();
  contiguous = contiguous && ramp != nullptr && AsIntImm(ramp->stride) != nullptr &&
               AsIntImm(ramp->stride)->value == 1;
  if (contiguous) *base = ramp->base;
  return contiguous;
}

}  // namespace codegen
}  // namespace backplane

#endif  // BACKPLANE_CODEGEN_SRC_C_FAMILY_INTERNAL_HPP_
