// SPDX-License-Identifier: Apache-2.0
#include "npy.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <map>
#include <string>
#include <vector>

namespace backplane {
namespace cli {

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
const char* const kHowToSave = "write it with numpy.save (docs/cli.md, \"Inputs and outputs\")";

// Reads exactly `n` bytes unless the file ends first; returns how many were read, or -1.
ssize_t ReadFully(int fd, void* buf, size_t n) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got = ::read(fd, static_cast<char*>(buf) + done, n - done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return static_cast<ssize_t>(done);
}

// A parser for the header: a Python dict literal of string keys and values that are strings,
// True/False or tuples of non-negative integers, as numpy.lib.format writes it.
class HeaderParser {
 public:
  explicit HeaderParser(const std::string& text) : text_(text) {}

  struct Value {
    enum class Kind { kString, kBool, kTuple } kind = Kind::kString;
    std::string s;
    bool b = false;
    std::vector<int64_t> tuple;
  };

  // "" or what is wrong.
  std::string Parse(std::map<std::string, Value>* out) {
    Skip();
    if (!Eat('{')) return Where("expected '{' starting the header dict");
    Skip();
    while (!Eat('}')) {
      std::string key;
      if (!String(&key)) return Where("expected a quoted key");
      Skip();
      if (!Eat(':')) return Where("expected ':' after key '" + key + "'");
      Skip();
      Value v;
      if (std::string e = ParseValue(&v); !e.empty()) return e;
      if (out->count(key) != 0) return Where("key '" + key + "' given twice");
      (*out)[key] = v;
      Skip();
      if (Eat(',')) {
        Skip();
        continue;
      }
      if (!Eat('}')) return Where("expected ',' or '}'");
      break;
    }
    Skip();
    if (pos_ != text_.size()) return Where("text after the header dict");
    return "";
  }

 private:
  std::string Where(const std::string& what) const {
    return what + " at byte " + std::to_string(pos_) + " of the header";
  }
  void Skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }
  bool Eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool Word(const char* w) {
    const size_t n = std::strlen(w);
    if (text_.compare(pos_, n, w) != 0) return false;
    pos_ += n;
    return true;
  }
  bool String(std::string* out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return false;
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == std::string::npos || end - pos_ > 256) return false;
    *out = text_.substr(pos_, end - pos_);
    if (out->find('\\') != std::string::npos) return false;  // numpy writes no escapes
    pos_ = end + 1;
    return true;
  }
  std::string ParseValue(Value* v) {
    if (pos_ < text_.size() && (text_[pos_] == '\'' || text_[pos_] == '"')) {
      v->kind = Value::Kind::kString;
      return String(&v->s) ? "" : Where("bad string");
    }
    if (Word("True")) {
      v->kind = Value::Kind::kBool;
      v->b = true;
      return "";
    }
    if (Word("False")) {
      v->kind = Value::Kind::kBool;
      v->b = false;
      return "";
    }
    if (Eat('(')) {
      v->kind = Value::Kind::kTuple;
      Skip();
      while (!Eat(')')) {
        if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
          return Where("expected a non-negative integer in the shape");
        }
        int64_t n = 0;
        while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
          const int digit = text_[pos_++] - '0';
          if (n > (std::numeric_limits<int64_t>::max() - digit) / 10) {
            return Where("an extent of the shape larger than 2^63 - 1");
          }
          n = n * 10 + digit;
        }
        if (v->tuple.size() >= kMaxNpyDims) {
          return Where("more than " + std::to_string(kMaxNpyDims) + " dimensions");
        }
        v->tuple.push_back(n);
        Skip();
        if (Eat(',')) {
          Skip();
          continue;
        }
        if (!Eat(')')) return Where("expected ',' or ')' in the shape");
        break;
      }
      return "";
    }
    if (pos_ < text_.size() && text_[pos_] == '[') {
      return "the dtype is a structured (record) dtype, which a kernel's buffer cannot take; "
             "save a plain array of one dtype";
    }
    return Where("expected a string, True, False or a tuple");
  }

  const std::string& text_;
  size_t pos_ = 0;
};

// The dtype of a descr such as "<f4"; "" or what is wrong.
std::string DTypeOfDescr(const std::string& descr, ir::DType* out) {
  if (descr.size() < 3) return "dtype '" + descr + "' is not a numeric dtype numpy writes";
  const char order = descr[0];
  const char kind = descr[1];
  const std::string size_text = descr.substr(2);
  int size = 0;
  for (char c : size_text) {
    if (!std::isdigit(static_cast<unsigned char>(c)) || size > 64) {
      return "dtype '" + descr + "' is not a numeric dtype numpy writes";
    }
    size = size * 10 + (c - '0');
  }
  if (order != '<' && order != '>' && order != '|' && order != '=') {
    return "dtype '" + descr + "' has byte order '" + std::string(1, order) +
           "', not one of < > | =";
  }
  if (order == '>' && size > 1) {
    return "dtype '" + descr + "' is big-endian; Backplane reads little-endian data: save " +
           "arr.astype(arr.dtype.newbyteorder('<'))";
  }
  if (kind == 'f' && (size == 2 || size == 4 || size == 8)) {
    *out = ir::Float(size * 8);
  } else if (kind == 'i' && (size == 1 || size == 2 || size == 4 || size == 8)) {
    *out = ir::Int(size * 8);
  } else if (kind == 'u' && (size == 1 || size == 2 || size == 4 || size == 8)) {
    *out = ir::UInt(size * 8);
  } else if (kind == 'b' && size == 1) {
    *out = ir::Bool();
  } else {
    return "dtype '" + descr +
           "' is not one a kernel takes (bool, int8..int64, uint8..uint64, float16, float32, "
           "float64)";
  }
  return "";
}

}  // namespace

std::string NpyShapeText(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::string NpyDescr(ir::DType t) {
  if (!t.is_scalar()) return "";
  const int bytes = t.bits / 8;
  if (t.is_bool()) return "|b1";
  const std::string order = bytes == 1 ? "|" : "<";
  if (t.is_float() && (bytes == 2 || bytes == 4 || bytes == 8)) {
    return order + "f" + std::to_string(bytes);
  }
  if ((t.is_int() || t.is_uint()) && (bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8)) {
    return order + (t.is_int() ? "i" : "u") + std::to_string(bytes);
  }
  return "";
}

std::string ReadNpy(const std::string& path, NpyArray* out) {
  const std::string name = "'" + path + "'";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return "cannot read " + name + " (" + std::strerror(errno) + "); give an .npy file (" +
           kHowToSave + ")";
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    return name + " is a directory or cannot be read; give an .npy file (" + kHowToSave + ")";
  }
  unsigned char fixed[12];
  const ssize_t got = ReadFully(fd, fixed, 10);
  if (got < 0) return "cannot read " + name + " (" + std::strerror(errno) + ")";
  if (got < 10 || std::memcmp(fixed, kMagic, kMagicBytes) != 0) {
    return name + " is not an .npy file (it does not start with \\x93NUMPY); " + kHowToSave;
  }
  const int major = fixed[6];
  const int minor = fixed[7];
  size_t header_bytes = 0;
  size_t prefix = 10;
  if (major == 1) {
    header_bytes = fixed[8] | (size_t{fixed[9]} << 8);
  } else if (major == 2 || major == 3) {
    if (ReadFully(fd, fixed + 10, 2) != 2) return name + " is truncated inside its header";
    header_bytes =
        fixed[8] | (size_t{fixed[9]} << 8) | (size_t{fixed[10]} << 16) | (size_t{fixed[11]} << 24);
    prefix = 12;
  } else {
    return name + " is .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
           "; Backplane reads versions 1.0, 2.0 and 3.0";
  }
  if (header_bytes > kMaxNpyHeaderBytes) {
    return name + " declares a header of " + std::to_string(header_bytes) +
           " bytes, more than the " + std::to_string(kMaxNpyHeaderBytes >> 20) +
           " MiB Backplane reads; the file is damaged or not written by numpy";
  }
  std::string header(header_bytes, '\0');
  if (ReadFully(fd, header.data(), header_bytes) != static_cast<ssize_t>(header_bytes)) {
    return name + " is truncated inside its header (declared " + std::to_string(header_bytes) +
           " bytes)";
  }
  std::map<std::string, HeaderParser::Value> dict;
  if (std::string e = HeaderParser(header).Parse(&dict); !e.empty()) {
    return name + " has a header that is not an .npy header dict: " + e;
  }
  using Kind = HeaderParser::Value::Kind;
  for (const auto& [key, value] : dict) {
    if (key != "descr" && key != "fortran_order" && key != "shape") {
      return name + " has a header key '" + key +
             "'; an .npy header holds exactly descr, fortran_order and shape";
    }
  }
  if (dict.count("descr") == 0 || dict["descr"].kind != Kind::kString ||
      dict.count("fortran_order") == 0 || dict["fortran_order"].kind != Kind::kBool ||
      dict.count("shape") == 0 || dict["shape"].kind != Kind::kTuple) {
    return name + "'s header lacks descr (a string), fortran_order (True or False) or shape " +
           "(a tuple)";
  }
  NpyArray a;
  a.descr = dict["descr"].s;
  if (std::string e = DTypeOfDescr(a.descr, &a.dtype); !e.empty()) return name + ": " + e;
  a.shape = dict["shape"].tuple;
  if (dict["fortran_order"].b && a.shape.size() >= 2) {
    return name + " is in Fortran (column-major) order; kernels take C order: save " +
           "numpy.ascontiguousarray(arr)";
  }
  const size_t item = a.dtype.bits / 8;
  uint64_t count = 1;
  for (int64_t e : a.shape) {
    if (e != 0 && count > std::numeric_limits<uint64_t>::max() / 8 / static_cast<uint64_t>(e)) {
      return name + " has shape " + NpyShapeText(a.shape) +
             ", whose size does not fit in 64 bits; the file is damaged";
    }
    count *= static_cast<uint64_t>(e);
  }
  const uint64_t data_bytes = count * item;
  const uint64_t offset = prefix + header_bytes;
  if (S_ISREG(st.st_mode)) {
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size < offset + data_bytes) {
      return name + " is truncated: shape " + NpyShapeText(a.shape) + " of " + a.descr + " needs " +
             std::to_string(data_bytes) + " bytes of data, the file holds " +
             std::to_string(size - offset);
    }
    if (size > offset + data_bytes) {
      return name + " has " + std::to_string(size - offset - data_bytes) +
             " bytes after the data that shape " + NpyShapeText(a.shape) + " of " + a.descr +
             " needs; the file is damaged or not an .npy file";
    }
  }
  // Read in steps, growing the buffer only by what arrived, so a stream that claims a huge
  // shape and ends early costs no more memory than it sent.
  constexpr size_t kStep = size_t{1} << 24;
  uint64_t done = 0;
  while (done < data_bytes) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kStep, data_bytes - done));
    a.bytes.resize(static_cast<size_t>(done) + want);
    const ssize_t n = ReadFully(fd, a.bytes.data() + done, want);
    if (n < 0) return "cannot read " + name + " (" + std::strerror(errno) + ")";
    done += static_cast<uint64_t>(n);
    if (static_cast<size_t>(n) < want) {
      return name + " is truncated: shape " + NpyShapeText(a.shape) + " of " + a.descr + " needs " +
             std::to_string(data_bytes) + " bytes of data, the file holds " + std::to_string(done);
    }
  }
  if (a.dtype.is_bool()) {
    for (uint8_t& b : a.bytes) {
      if (b > 1) return name + " holds a bool that is neither 0 nor 1";
    }
  }
  *out = std::move(a);
  return "";
}

std::string WriteNpy(const std::string& path, ir::DType dtype, const std::vector<int64_t>& shape,
                     const std::vector<uint8_t>& bytes) {
  const std::string descr = NpyDescr(dtype);
  if (descr.empty()) {
    return "cannot write '" + path + "': numpy has no dtype for " + ir::ToString(dtype);
  }
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + NpyShapeText(shape) + ", }";
  // The data starts 64-byte aligned, as numpy writes it: pad the dict with spaces and '\n'.
  size_t prefix = 10;
  if (dict.size() + 1 + prefix > 65535) prefix = 12;
  const size_t total = (prefix + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - prefix - dict.size() - 1, ' ');
  dict += '\n';
  std::string head(kMagic, kMagicBytes);
  head += static_cast<char>(prefix == 10 ? 1 : 2);
  head += '\0';
  const size_t n = dict.size();
  head += static_cast<char>(n & 0xff);
  head += static_cast<char>((n >> 8) & 0xff);
  if (prefix == 12) {
    head += static_cast<char>((n >> 16) & 0xff);
    head += static_cast<char>((n >> 24) & 0xff);
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << head << dict;
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  f.close();
  if (!f) return "cannot write '" + path + "'; check that its folder exists and is writable";
  return "";
}

}  // namespace cli
}  // namespace backplane
