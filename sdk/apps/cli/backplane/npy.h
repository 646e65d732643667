// SPDX-License-Identifier: Apache-2.0
// NumPy's .npy format (versions 1.0, 2.0 and 3.0; numpy.lib.format), for `backplane run
// --input NAME=FILE.npy` and `--output NAME=FILE.npy`. Reading is defensive: the file is
// anyone's, so a bad magic, a header that is not the documented dict, an unknown dtype, a
// shape whose size overflows, or data shorter or longer than the shape says is refused with a
// message that names the file and what is wrong; nothing is allocated beyond the bytes the
// file really holds.
#ifndef BACKPLANE_TOOLS_NPY_H_
#define BACKPLANE_TOOLS_NPY_H_

#include <backplane/ir/ir.hpp>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace backplane {
namespace cli {

// The largest .npy header read (numpy writes a few hundred bytes; version 1.0 caps it at
// 64 KiB, and numpy itself refuses headers over 10,000 bytes by default).
constexpr size_t kMaxNpyHeaderBytes = size_t{1} << 20;
// The most dimensions an array may have (numpy's own limit).
constexpr size_t kMaxNpyDims = 64;

struct NpyArray {
  ir::DType dtype;             // the element dtype (bool is stored as one byte, 0 or 1)
  std::string descr;           // the dtype as the file spells it, e.g. "<f4"
  std::vector<int64_t> shape;  // row-major (C order) extents
  std::vector<uint8_t> bytes;  // the elements, little-endian, C order
};

// "(1000,)", "(3, 4)", "()": a shape as numpy prints it.
std::string NpyShapeText(const std::vector<int64_t>& shape);

// The .npy spelling of `t` ("<f4", "|b1"), or "" when numpy has no such dtype.
std::string NpyDescr(ir::DType t);

// Reads `path` into `*out`. Returns "" on success, else the message (no command prefix),
// which names the file. Refused: big-endian data of more than one byte an element, Fortran
// order with two or more dimensions, dtypes other than bool, int8..int64, uint8..uint64,
// float16, float32 and float64, object or structured arrays.
std::string ReadNpy(const std::string& path, NpyArray* out);

// Writes `bytes` (C order, little-endian) as an .npy file of version 1.0 (2.0 if the header
// does not fit). Returns "" or the message naming the file.
std::string WriteNpy(const std::string& path, ir::DType dtype, const std::vector<int64_t>& shape,
                     const std::vector<uint8_t>& bytes);

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_NPY_H_
