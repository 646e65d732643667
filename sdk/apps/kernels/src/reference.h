// SPDX-License-Identifier: Apache-2.0
// The float64 references of the catalog's kernels: each reads the inputs in `args` (as
// make_args made them) and overwrites the outputs.
#ifndef BACKPLANE_KERNELS_SRC_REFERENCE_H_
#define BACKPLANE_KERNELS_SRC_REFERENCE_H_

#include <backplane/kernels/catalog.hpp>
#include <string>
#include <vector>

namespace backplane {
namespace kernels {
namespace detail {

// The argument called `name`; throws std::logic_error if there is none.
const Arg& Named(const std::vector<Arg>& args, const std::string& name);
Arg& Named(std::vector<Arg>& args, const std::string& name);
// The scalar argument called `name`.
double Scalar(const std::vector<Arg>& args, const std::string& name);

void VectorAdd(std::vector<Arg>& args);
void Saxpy(std::vector<Arg>& args);
void Sum(std::vector<Arg>& args);
void Softmax(std::vector<Arg>& args);
void Matmul(std::vector<Arg>& args);
void Transpose(std::vector<Arg>& args);
void Conv2d(std::vector<Arg>& args);

}  // namespace detail
}  // namespace kernels
}  // namespace backplane

#endif  // BACKPLANE_KERNELS_SRC_REFERENCE_H_
