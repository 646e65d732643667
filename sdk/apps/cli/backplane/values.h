// SPDX-License-Identifier: Apache-2.0
// Values typed on the command line and values printed to it, for `backplane run`: inline
// inputs (`--input a=1,2,3,4`, `--input a=2x3xf32=1,2,3,4,5,6`, `--input a=1000xf32=0`, as
// iree-run-module's `--input=4xf32=1,2,3,4`) and `--print` of the buffers a call wrote (small
// ones in full, large ones summarised).
#ifndef BACKPLANE_TOOLS_VALUES_H_
#define BACKPLANE_TOOLS_VALUES_H_

#include <backplane/ir/ir.hpp>
#include <backplane/runner/check.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "npy.h"
#include "output.h"

namespace backplane {
namespace cli {

// The most elements an inline input may hold: more belongs in an .npy file.
constexpr size_t kMaxInlineElements = size_t{1} << 20;

// Whether `text` (what follows NAME= in --input) is an inline value rather than a file: one or
// more numbers (or true/false) separated by commas or spaces, optionally in brackets, after an
// optional `SHAPE` / `SHAPExDTYPE` / `DTYPE` and `=` ("4xf32=1,2,3,4", "2x3=0", "f32=1.5").
// `@PATH` is always a file, as is anything that is not of that form.
bool IsInlineValue(const std::string& text);

// The text after an inline value's `PREFIX=`, and the dtype that prefix names (false when it
// names none); for a scalar parameter given with --input.
bool InlineScalarText(const std::string& text, std::string* value, ir::DType* dtype,
                      bool* has_dtype);

// Parses inline `text` for buffer parameter `name` (element dtype `dtype`, `rank` dimensions)
// of function `func` into `*out` (its dtype, shape and bytes, as ReadNpy gives a file's): the
// dtype is the prefix's, else the parameter's; the shape the prefix's (one value fills it), else
// (count,). Returns "" or the message (no command prefix): a bad element, named with its index,
// the dtype and its range; a count that does not fit the shape; a rank-2 parameter without a
// shape.
std::string ParseInlineArray(const std::string& func, const std::string& name, ir::DType dtype,
                             size_t rank, const std::string& text, NpyArray* out);

// A buffer as `--print` shows it: "c: float32 (4,) = [1, 2, 3, 4]" when it has at most `limit`
// elements (or `full`), else its first and last three and its min, max and mean. `json` gets
// {"name", "dtype", "shape", "values" (nested lists) or "first"/"last", "min", "max", "mean"}.
std::string FormatBuffer(const runner::CheckArg& a, size_t limit, bool full, OrderedJson* json);

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_VALUES_H_
