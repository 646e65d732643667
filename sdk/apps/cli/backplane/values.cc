// SPDX-License-Identifier: Apache-2.0
#include "values.h"

#include <algorithm>
#include <backplane/ir/half.hpp>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace backplane {
namespace cli {

namespace {

// iree's spellings (f32, i32, ui8, i1) and ours (float32, int32, uint8, bool).
bool ParseDTypeName(const std::string& text, ir::DType* out) {
  if (text == "i1") {
    *out = ir::Bool();
    return true;
  }
  const struct {
    const char* prefix;
    ir::DTypeCode code;
  } short_forms[] = {{"ui", ir::DTypeCode::kUInt},
                     {"u", ir::DTypeCode::kUInt},
                     {"si", ir::DTypeCode::kInt},
                     {"i", ir::DTypeCode::kInt},
                     {"f", ir::DTypeCode::kFloat}};
  for (const auto& s : short_forms) {
    const size_t n = std::strlen(s.prefix);
    if (text.size() <= n || text.compare(0, n, s.prefix) != 0) continue;
    const std::string bits = text.substr(n);
    if (bits.find_first_not_of("0123456789") != std::string::npos) continue;
    const int b = std::atoi(bits.c_str());
    const bool ok = s.code == ir::DTypeCode::kFloat ? (b == 16 || b == 32 || b == 64)
                                                    : (b == 8 || b == 16 || b == 32 || b == 64);
    if (!ok) return false;
    *out = ir::DType{s.code, static_cast<uint8_t>(b), 1};
    return true;
  }
  ir::DType t;
  if (!ir::ParseDType(text, &t) || !t.is_scalar() || t.is_handle()) return false;
  *out = t;
  return true;
}

// "4x3xf32", "4", "f32", "2x3": the extents and the dtype, if any.
bool ParsePrefix(const std::string& prefix, std::vector<int64_t>* dims, ir::DType* dtype,
                 bool* has_dtype) {
  dims->clear();
  *has_dtype = false;
  if (prefix.empty()) return false;
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t x = prefix.find('x', start);
    parts.push_back(prefix.substr(start, x == std::string::npos ? std::string::npos : x - start));
    if (x == std::string::npos) break;
    start = x + 1;
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    const std::string& p = parts[i];
    if (p.empty()) return false;
    if (p.find_first_not_of("0123456789") == std::string::npos) {
      if (p.size() > 18) return false;
      dims->push_back(std::stoll(p));
      continue;
    }
    if (i + 1 != parts.size() || !ParseDTypeName(p, dtype)) return false;
    *has_dtype = true;
  }
  return true;
}

bool IsKeyword(std::string t) {
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) t = t.substr(1);
  return t == "true" || t == "false" || t == "inf" || t == "nan" || t == "infinity";
}

// The elements of "1, 2 3,[4]": split at commas and spaces, brackets ignored.
std::vector<std::string> Tokens(const std::string& values) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : values) {
    if (c == ',' || c == '[' || c == ']' || std::isspace(static_cast<unsigned char>(c))) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

bool LooksLikeValue(const std::string& t) {
  if (IsKeyword(t)) return true;
  bool digit = false;
  for (char c : t) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (std::isdigit(u)) {
      digit = true;
    } else if (!std::isxdigit(u) && c != 'x' && c != 'X' && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  return digit;
}

// Splits `text` at its '=' into the prefix (may be empty) and the values.
void Split(const std::string& text, std::string* prefix, std::string* values) {
  const size_t eq = text.find('=');
  *prefix = eq == std::string::npos ? "" : text.substr(0, eq);
  *values = eq == std::string::npos ? text : text.substr(eq + 1);
}

std::string RangeText(ir::DType t) {
  if (t.is_bool()) return "true, false, 1 or 0";
  if (t.is_float()) {
    return t.bits == 16   ? "at most 65504 in magnitude"
           : t.bits == 32 ? "at most 3.4e38 in magnitude"
                          : "a double";
  }
  if (t.is_uint()) {
    return t.bits == 64 ? "0 to 18446744073709551615"
                        : "0 to " + std::to_string((uint64_t{1} << t.bits) - 1);
  }
  if (t.bits == 64) return "-9223372036854775808 to 9223372036854775807";
  return std::to_string(-(int64_t{1} << (t.bits - 1))) + " to " +
         std::to_string((int64_t{1} << (t.bits - 1)) - 1);
}

size_t ElementBytes(ir::DType t) { return t.is_bool() ? 1 : t.bits / 8; }

// Stores `tok` as one element of dtype `t` at `dst`; "" or why not.
std::string StoreElement(const std::string& tok, ir::DType t, uint8_t* dst) {
  const std::string bad = "'" + tok + "' is not " + ir::ToString(t) + " (" + RangeText(t) + ")";
  if (t.is_bool()) {
    if (tok == "true" || tok == "1") {
      *dst = 1;
    } else if (tok == "false" || tok == "0") {
      *dst = 0;
    } else {
      return bad;
    }
    return "";
  }
  char* end = nullptr;
  errno = 0;
  if (t.is_float()) {
    const double v = std::strtod(tok.c_str(), &end);
    if (end != tok.c_str() + tok.size() || end == tok.c_str()) return bad;
    if ((errno == ERANGE && std::isinf(v)) ||
        (std::isfinite(v) && ((t.bits == 16 && std::fabs(v) > 65504.0) ||
                              (t.bits == 32 && std::fabs(v) > static_cast<double>(FLT_MAX))))) {
      return bad + ": out of range";
    }
    if (t.bits == 16) {
      const uint16_t h = ir::FloatToHalf(static_cast<float>(v));
      std::memcpy(dst, &h, 2);
    } else if (t.bits == 32) {
      const float f = static_cast<float>(v);
      std::memcpy(dst, &f, 4);
    } else {
      std::memcpy(dst, &v, 8);
    }
    return "";
  }
  if (t.is_uint() && tok.find('-') != std::string::npos) return bad + ": negative";
  const bool hex = tok.find("0x") != std::string::npos || tok.find("0X") != std::string::npos;
  uint64_t bits = 0;
  if (t.is_uint()) {
    const unsigned long long v = std::strtoull(tok.c_str(), &end, hex ? 16 : 10);
    if (end != tok.c_str() + tok.size() || end == tok.c_str()) return bad;
    if (errno == ERANGE || (t.bits < 64 && v > (uint64_t{1} << t.bits) - 1)) {
      return bad + ": out of range";
    }
    bits = v;
  } else {
    const long long v = std::strtoll(tok.c_str(), &end, hex ? 16 : 10);
    if (end != tok.c_str() + tok.size() || end == tok.c_str()) return bad;
    const int64_t lo =
        t.bits == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (t.bits - 1));
    const int64_t hi =
        t.bits == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (t.bits - 1)) - 1;
    if (errno == ERANGE || v < lo || v > hi) return bad + ": out of range";
    bits = static_cast<uint64_t>(v);
  }
  std::memcpy(dst, &bits, ElementBytes(t));  // little-endian: the low bytes first
  return "";
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string s;
  for (int64_t d : shape) s += (s.empty() ? "" : "x") + std::to_string(d);
  return s;
}

// Element k of `a` as text and as JSON, exact for integers of any width.
std::string ElementText(const runner::CheckArg& a, size_t k, OrderedJson* json) {
  const uint8_t* p = a.bytes.data() + k * ElementBytes(a.dtype);
  const ir::DType t = a.dtype;
  if (t.is_bool()) {
    if (json != nullptr) *json = *p != 0;
    return *p != 0 ? "true" : "false";
  }
  if (t.is_integer()) {
    uint64_t bits = 0;
    std::memcpy(&bits, p, ElementBytes(t));
    if (t.is_uint()) {
      if (json != nullptr) *json = bits;
      return std::to_string(bits);
    }
    const int shift = 64 - t.bits;
    const int64_t v = static_cast<int64_t>(bits << shift) >> shift;  // sign-extended
    if (json != nullptr) *json = v;
    return std::to_string(v);
  }
  const double v = a.Element(k);
  if (json != nullptr) *json = v;
  char buf[48];
  std::snprintf(buf, sizeof(buf), t.bits == 64 ? "%.16g" : t.bits == 32 ? "%.7g" : "%.5g", v);
  return buf;
}

// The elements from `k` of dimension `dim` on, nested as numpy prints them.
std::string Nested(const runner::CheckArg& a, size_t dim, size_t* k, OrderedJson* json) {
  std::string s = "[";
  *json = OrderedJson::array();
  const int64_t n = a.shape.empty() ? 1 : a.shape[dim];
  for (int64_t i = 0; i < n; ++i) {
    OrderedJson item;
    if (i > 0) s += ", ";
    if (dim + 1 < a.shape.size()) {
      s += Nested(a, dim + 1, k, &item);
    } else {
      s += ElementText(a, (*k)++, &item);
    }
    json->push_back(item);
  }
  return s + "]";
}

}  // namespace

bool IsInlineValue(const std::string& text) {
  if (text.empty() || text[0] == '@') return false;
  std::string prefix, values;
  Split(text, &prefix, &values);
  std::vector<int64_t> dims;
  ir::DType dtype;
  bool has_dtype = false;
  if (text.find('=') != std::string::npos && !ParsePrefix(prefix, &dims, &dtype, &has_dtype)) {
    return false;
  }
  if (values.find('=') != std::string::npos) return false;
  const std::vector<std::string> tokens = Tokens(values);
  if (tokens.empty()) return false;
  for (const std::string& t : tokens) {
    if (!LooksLikeValue(t)) return false;
  }
  return true;
}

bool InlineScalarText(const std::string& text, std::string* value, ir::DType* dtype,
                      bool* has_dtype) {
  std::string prefix;
  Split(text, &prefix, value);
  std::vector<int64_t> dims;
  *has_dtype = false;
  if (text.find('=') != std::string::npos &&
      (!ParsePrefix(prefix, &dims, dtype, has_dtype) || !dims.empty())) {
    return false;
  }
  const std::vector<std::string> tokens = Tokens(*value);
  if (tokens.size() != 1) return false;
  *value = tokens[0];
  return true;
}

std::string ParseInlineArray(const std::string& func, const std::string& name, ir::DType dtype,
                             size_t rank, const std::string& text, NpyArray* out) {
  std::string prefix, values;
  Split(text, &prefix, &values);
  std::vector<int64_t> dims;
  bool has_dtype = false;
  ir::DType given = dtype;
  if (text.find('=') != std::string::npos) ParsePrefix(prefix, &dims, &given, &has_dtype);
  const std::vector<std::string> tokens = Tokens(values);
  const std::string param = "parameter '" + name + "' of function '" + func + "' (" +
                            ir::ToString(dtype) + ", " + std::to_string(rank) +
                            (rank == 1 ? " dimension)" : " dimensions)");
  if (tokens.size() > kMaxInlineElements) {
    return "the value has " + std::to_string(tokens.size()) + " elements, more than " +
           std::to_string(kMaxInlineElements) + " an inline input takes; save them in an .npy file";
  }
  if (dims.empty()) {
    if (rank != 1) {
      std::string example;
      for (size_t d = 0; d < rank; ++d) example += (d ? "x" : "") + std::string("2");
      return param + " needs the shape before the values, e.g. " + name + "=" + example + "=" +
             values + " (one value fills the whole shape)";
    }
    dims = {static_cast<int64_t>(tokens.size())};
  }
  size_t count = 1;
  for (int64_t d : dims) {
    if (d != 0 && count > kMaxInlineElements / static_cast<size_t>(d)) {
      count = kMaxInlineElements + 1;
      break;
    }
    count *= static_cast<size_t>(d);
  }
  if (count > kMaxInlineElements) {
    return "shape " + ShapeText(dims) + " has more than " + std::to_string(kMaxInlineElements) +
           " elements, the most an inline input takes; save the array in an .npy file";
  }
  if (tokens.size() != count && tokens.size() != 1) {
    return "shape " + ShapeText(dims) + " holds " + std::to_string(count) + " elements but " +
           std::to_string(tokens.size()) + " values are given; give " + std::to_string(count) +
           " values, or one to fill the shape";
  }
  const size_t width = ElementBytes(given);
  out->dtype = given;
  out->descr =
      has_dtype ? prefix.substr(prefix.rfind('x') == std::string::npos ? 0 : prefix.rfind('x') + 1)
                : ir::ToString(given);
  out->shape = dims;
  // Room for every value given, even for a shape of no elements (whose one value is parsed,
  // for its errors, and dropped).
  out->bytes.assign(std::max(count, tokens.size()) * width, 0);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (std::string e = StoreElement(tokens[i], given, out->bytes.data() + i * width); !e.empty()) {
      return "element " + std::to_string(i) + ": " + e;
    }
  }
  if (tokens.size() == 1) {
    for (size_t i = 1; i < count; ++i) {
      std::memcpy(out->bytes.data() + i * width, out->bytes.data(), width);
    }
  }
  out->bytes.resize(count * width);
  return "";
}

std::string FormatBuffer(const runner::CheckArg& a, size_t limit, bool full, OrderedJson* json) {
  const size_t n = a.count();
  std::string shape = "(";
  for (size_t d = 0; d < a.shape.size(); ++d) {
    shape += (d ? ", " : "") + std::to_string(a.shape[d]);
  }
  shape += a.shape.size() == 1 ? ",)" : ")";
  *json = {{"name", a.name}, {"dtype", ir::ToString(a.dtype)}, {"shape", a.shape}};
  std::string text = a.name + ": " + ir::ToString(a.dtype) + " " + shape + " = ";
  if (full || n <= std::max<size_t>(limit, 6)) {
    size_t k = 0;
    OrderedJson values;
    text += n == 0 ? "[]" : Nested(a, 0, &k, &values);
    (*json)["values"] = n == 0 ? OrderedJson::array() : values;
    return text;
  }
  // Summarised: the first and last three elements in row-major order, and min, max, mean.
  OrderedJson first = OrderedJson::array(), last = OrderedJson::array();
  std::string head, tail;
  for (size_t k = 0; k < 3; ++k) {
    OrderedJson v;
    head += ElementText(a, k, &v) + ", ";
    first.push_back(v);
  }
  for (size_t k = n - 3; k < n; ++k) {
    OrderedJson v;
    tail += ", " + ElementText(a, k, &v);
    last.push_back(v);
  }
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  size_t nans = 0;
  for (size_t k = 0; k < n; ++k) {
    const double v = a.Element(k);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  const double mean = n > nans ? sum / static_cast<double>(n - nans) : NAN;
  char stats[160];
  std::snprintf(stats, sizeof(stats), "min %.7g, max %.7g, mean %.7g", lo, hi, mean);
  text += "[" + head + "..." + tail + "]  (" + stats +
          (nans ? ", " + std::to_string(nans) + " NaN" : "") + "; --print-full shows all " +
          std::to_string(n) + ")";
  (*json)["first"] = first;
  (*json)["last"] = last;
  (*json)["min"] = lo;
  (*json)["max"] = hi;
  (*json)["mean"] = mean;
  (*json)["nan_count"] = nans;
  return text;
}

}  // namespace cli
}  // namespace backplane
