// SPDX-License-Identifier: Apache-2.0
#include <algorithm>
#include <backplane/ir/error.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/check.hpp>
#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace backplane {
namespace runner {

namespace {

// IEEE binary16 <-> float, rounding to nearest even: the interpreter's float16 storage.
using ir::FloatToHalf;
using ir::HalfToFloat;

size_t ElementBytes(ir::DType t) { return static_cast<size_t>((t.bits + 7) / 8); }

DLDataType ToDL(ir::DType t) { return DLDataType{static_cast<uint8_t>(t.code), t.bits, t.lanes}; }

void CheckSupported(const std::string& func, const std::string& name, ir::DType t) {
  const bool ok =
      t.lanes == 1 &&
      ((t.is_float() && (t.bits == 16 || t.bits == 32 || t.bits == 64)) ||
       (t.is_integer() && (t.bits == 8 || t.bits == 16 || t.bits == 32 || t.bits == 64)) ||
       (t.is_bool() && t.bits == 8));
  if (!ok) {
    throw Error(BP_ERR_UNSUPPORTED, "function '" + func + "': parameter '" + name + "' has dtype " +
                                        ir::ToString(t) +
                                        ", which the checker cannot fill or compare (it takes "
                                        "scalar bool, int/uint 8..64 and float16/32/64)");
  }
}

// Element k as a double / from a double; int64 and uint64 through their own paths below.
double Load(const uint8_t* p, ir::DType t) {
  auto get = [p](auto tag) {
    decltype(tag) v;
    std::memcpy(&v, p, sizeof(v));
    return v;
  };
  if (t.is_float()) {
    if (t.bits == 16) return HalfToFloat(get(uint16_t{}));
    if (t.bits == 32) return get(float{});
    return get(double{});
  }
  if (t.is_int()) {
    if (t.bits == 8) return get(int8_t{});
    if (t.bits == 16) return get(int16_t{});
    if (t.bits == 32) return get(int32_t{});
    return static_cast<double>(get(int64_t{}));
  }
  if (t.bits == 8) return get(uint8_t{});
  if (t.bits == 16) return get(uint16_t{});
  if (t.bits == 32) return get(uint32_t{});
  return static_cast<double>(get(uint64_t{}));
}

void Store(uint8_t* p, ir::DType t, double v) {
  auto put = [p](auto x) { std::memcpy(p, &x, sizeof(x)); };
  if (t.is_float()) {
    if (t.bits == 16) return put(FloatToHalf(static_cast<float>(v)));
    if (t.bits == 32) return put(static_cast<float>(v));
    return put(v);
  }
  // Integer and bool fills are small non-negative whole numbers: exact in every width.
  const auto u = static_cast<uint64_t>(v);
  std::memcpy(p, &u, ElementBytes(t));  // little-endian
}

// The raw bits of an integer element (zero-extended), for exact comparison.
int64_t LoadBits(const uint8_t* p, ir::DType t) {
  int64_t v = 0;
  std::memcpy(&v, p, ElementBytes(t));
  return v;
}

std::string Range(ir::DType t) {
  if (t.is_bool()) return "true, false, 1 or 0";
  if (t.is_int()) {
    return std::to_string(t.bits == 64 ? std::numeric_limits<int64_t>::min()
                                       : -(int64_t{1} << (t.bits - 1))) +
           ".." +
           std::to_string(t.bits == 64 ? std::numeric_limits<int64_t>::max()
                                       : (int64_t{1} << (t.bits - 1)) - 1);
  }
  if (t.is_uint()) {
    return "0.." +
           std::to_string(t.bits == 64 ? std::numeric_limits<int64_t>::max()
                                       : (int64_t{1} << t.bits) - 1) +
           (t.bits == 64 ? " (a call passes integers as int64)" : "");
  }
  if (t.bits == 16) return "finite values up to 65504 in magnitude, inf or nan";
  if (t.bits == 32) return "finite values up to 3.4e38 in magnitude, inf or nan";
  return "any double";
}

std::string Example(ir::DType t, const std::string& name) {
  if (t.is_bool()) return name + "=true";
  if (t.is_float()) return name + "=1.5";
  if (t.is_uint()) return name + "=7";
  return name + "=-7";
}

std::string Describe(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

}  // namespace

size_t CheckArg::count() const {
  size_t n = 1;
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

double CheckArg::Element(size_t k) const {
  return Load(bytes.data() + k * ElementBytes(dtype), dtype);
}

void ParseScalar(const std::string& func, const ir::Var& param, const std::string& text,
                 CheckArg* out) {
  const ir::DType t = param.dtype();
  const std::string name = param.name();
  CheckSupported(func, name, t);
  auto fail = [&](const std::string& why) {
    throw Error(BP_ERR_INVALID_ARGUMENT, "'" + name + "=" + text + "': parameter '" + name +
                                             "' of function '" + func + "' is " + ir::ToString(t) +
                                             " (" + Range(t) + "); " + why + "; give e.g. " +
                                             Example(t, name));
  };
  out->name = name;
  out->dtype = t;
  out->is_buffer = false;
  if (text.empty()) fail("the value is empty");
  if (t.is_bool()) {
    if (text == "true" || text == "1") {
      out->i = 1;
    } else if (text == "false" || text == "0") {
      out->i = 0;
    } else {
      fail("'" + text + "' is not a bool");
    }
    return;
  }
  char* end = nullptr;
  errno = 0;
  if (t.is_float()) {
    const double v = std::strtod(text.c_str(), &end);
    if (end != text.c_str() + text.size()) fail("'" + text + "' is not a number");
    if (std::isfinite(v) && ((t.bits == 16 && std::fabs(v) > 65504.0) ||
                             (t.bits == 32 && std::fabs(v) > static_cast<double>(FLT_MAX)))) {
      fail("it is out of the dtype's range");
    }
    if (errno == ERANGE && std::isinf(v)) fail("it is out of the dtype's range");
    out->f = v;
    return;
  }
  if (t.is_uint() && text.find('-') != std::string::npos) fail("it is negative");
  // Decimal, or hex with 0x; never octal (a leading zero is decimal: 010 is ten).
  const bool hex = text.find("0x") != std::string::npos || text.find("0X") != std::string::npos;
  const long long v = std::strtoll(text.c_str(), &end, hex ? 16 : 10);
  if (end != text.c_str() + text.size() || end == text.c_str()) {
    fail("'" + text + "' is not a whole number");
  }
  if (errno == ERANGE) fail("it is out of range");
  const int64_t lo = t.is_uint()    ? 0
                     : t.bits == 64 ? std::numeric_limits<int64_t>::min()
                                    : -(int64_t{1} << (t.bits - 1));
  const int64_t hi = t.bits == 64  ? std::numeric_limits<int64_t>::max()
                     : t.is_uint() ? (int64_t{1} << t.bits) - 1
                                   : (int64_t{1} << (t.bits - 1)) - 1;
  if (v < lo || v > hi) fail("it is out of range");
  out->i = v;
}

std::vector<CheckArg> MakeCheckArgs(const ir::PrimFunc& f,
                                    const std::map<std::string, std::string>& values,
                                    uint64_t seed) {
  std::string scalar_names;
  for (const ir::Param& p : f.params) {
    if (!p.is_buffer()) scalar_names += (scalar_names.empty() ? "" : ", ") + p.var().name();
  }
  for (const auto& [name, text] : values) {
    bool found = false;
    for (const ir::Param& p : f.params) found = found || (!p.is_buffer() && p.var().name() == name);
    if (!found) {
      throw Error(BP_ERR_INVALID_ARGUMENT, "'" + name + "=" + text + "': function '" + f.name +
                                               "' has no scalar parameter '" + name +
                                               "'; its scalar parameters are: " +
                                               (scalar_names.empty() ? "none" : scalar_names));
    }
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.1, 1.0);
  std::uniform_real_distribution<double> scale(0.5, 2.0);
  std::vector<CheckArg> args(f.params.size());
  std::vector<ir::ArgView> views(f.params.size());
  for (size_t i = 0; i < f.params.size(); ++i) {
    const ir::Param& p = f.params[i];
    CheckArg& a = args[i];
    if (p.is_buffer()) {
      a.name = p.buffer().name();
      a.dtype = p.buffer().dtype();
      a.is_buffer = true;
      CheckSupported(f.name, a.name, a.dtype);
      continue;
    }
    auto it = values.find(p.var().name());
    if (it != values.end()) {
      ParseScalar(f.name, p.var(), it->second, &a);
    } else if (p.var().dtype().is_float()) {
      a.name = p.var().name();
      a.dtype = p.var().dtype();
      a.f = scale(rng);
    } else {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "function '" + f.name + "' needs a value for its scalar parameter '" +
                      p.var().name() + "' (" + ir::ToString(p.var().dtype()) +
                      "); give it with --dim " + p.var().name() + "=VALUE");
    }
    views[i] = a.dtype.is_float() ? ir::FloatArg(a.f) : ir::IntArg(a.i);
  }
  for (size_t i = 0; i < f.params.size(); ++i) {
    CheckArg& a = args[i];
    if (!a.is_buffer) continue;
    for (const ir::Expr& d : f.params[i].buffer()->shape) {
      const int64_t extent = ir::EvalIntExpr(f, d, views);
      if (extent < 0) {
        throw Error(BP_ERR_INVALID_ARGUMENT,
                    "function '" + f.name + "': buffer '" + a.name + "' gets a negative extent " +
                        std::to_string(extent) + " from the scalar values; give other sizes");
      }
      a.shape.push_back(extent);
    }
    const size_t n = a.count();
    const size_t elem = ElementBytes(a.dtype);
    if (n > (size_t{1} << 32) / elem) {
      throw Error(BP_ERR_INVALID_ARGUMENT, "function '" + f.name + "': buffer '" + a.name +
                                               "' would hold " + std::to_string(n) +
                                               " elements, more than the checker's 4 GiB per "
                                               "buffer; give smaller sizes");
    }
    a.bytes.resize(n * elem);
    std::uniform_int_distribution<int> small(0, a.dtype.is_bool() ? 1 : 9);
    for (size_t k = 0; k < n; ++k) {
      Store(a.bytes.data() + k * elem, a.dtype, a.dtype.is_float() ? unit(rng) : small(rng));
    }
  }
  return args;
}

double RelativeTolerance(ir::DType t) {
  if (!t.is_float()) return 0;
  if (t.bits == 16) return 1e-2;
  if (t.bits == 32) return 1e-4;
  return 1e-10;
}

// ---- Oracle ---------------------------------------------------------------------------------

struct Oracle::Impl {
  ir::Interpreter main;
  std::vector<ir::Interpreter> kernels;  // run by main's packed calls
  explicit Impl(ir::IRModule m) : main(std::move(m)) {}
};

Oracle::Oracle(ir::IRModule ir) {
  try {
    impl_ = std::make_shared<Impl>(std::move(ir));
  } catch (const ir::Error& e) {
    throw Error(
        BP_ERR_INVALID_ARGUMENT,
        std::string("the IR does not verify, so the interpreter cannot run it: ") + e.what());
  }
}

Oracle Oracle::FromModule(const Module& m) {
  auto ir_of = [](const Module& mod) -> ir::IRModule {
    const std::string text = mod.InspectSource("ir");
    if (text.empty()) {
      throw Error(BP_ERR_NOT_FOUND,
                  "the module (kind " + mod.Kind() +
                      ") does not keep its IR, so the interpreter has nothing to run; pass the "
                      "kernel file it was built from (backplane run --ir FILE.bpir, or "
                      "runner::Oracle(ir::Parse(text, file)))");
    }
    try {
      return ir::Parse(text, "the IR kept by the " + mod.Kind() + " module");
    } catch (const ir::Error& e) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "the IR kept by the " + mod.Kind() + " module does not parse: " + e.what());
    }
  };
  Oracle o(ir_of(m));
  auto impl = std::const_pointer_cast<Impl>(o.impl_);
  std::vector<Module> todo = m.Imports();
  for (size_t i = 0; i < todo.size(); ++i) {
    try {
      impl->kernels.emplace_back(ir_of(todo[i]));
    } catch (const ir::Error& e) {
      throw Error(BP_ERR_INVALID_ARGUMENT, "the IR kept by the imported " + todo[i].Kind() +
                                               " module does not verify: " + e.what());
    }
    for (Module& more : todo[i].Imports()) todo.push_back(more);
  }
  return o;
}

const ir::PrimFunc& Oracle::Function(const std::string& name) const {
  const ir::PrimFunc* f = impl_->main.module().Find(name);
  if (f == nullptr) {
    std::string names;
    for (const ir::PrimFunc& g : impl_->main.module().functions()) {
      names += (names.empty() ? "" : ", ") + g.name;
    }
    throw Error(BP_ERR_NOT_FOUND, "the IR has no function '" + name + "'; it has: " + names);
  }
  return *f;
}

void Oracle::Run(const std::string& func, std::vector<CheckArg>* args) const {
  std::vector<ir::ArgView> views;
  views.reserve(args->size());
  for (CheckArg& a : *args) {
    if (!a.is_buffer) {
      views.push_back(a.dtype.is_float() ? ir::FloatArg(a.f) : ir::IntArg(a.i));
    } else {
      views.push_back(ir::BufferArg(a.bytes.empty() ? nullptr : a.bytes.data(), a.dtype,
                                    static_cast<int>(a.shape.size()), a.shape.data()));
    }
  }
  const Impl& impl = *impl_;
  ir::PackedCall call = [&impl](const std::string& name, const std::vector<ir::ArgView>& cargs) {
    for (const ir::Interpreter& k : impl.kernels) {
      if (k.module().Find(name) != nullptr) {
        k.Run(name, cargs);
        return int64_t{0};
      }
    }
    throw Error(BP_ERR_NOT_FOUND, "the host code calls '" + name +
                                      "', which no imported module's IR holds; the interpreter "
                                      "cannot run it (pass the kernel file with --ir)");
  };
  try {
    impl.main.Run(func, views, call);
  } catch (const ir::Error& e) {
    throw Error(BP_ERR_INVALID_ARGUMENT, std::string("the interpreter: ") + e.what());
  }
}

// ---- Comparing ------------------------------------------------------------------------------

std::string CompareBuffer(const std::string& func, const CheckArg& got, const CheckArg& want,
                          const CheckOptions& options, double* max_ratio) {
  const ir::DType t = want.dtype;
  const size_t n = want.count();
  const size_t elem = ElementBytes(t);
  if (got.bytes.size() != want.bytes.size()) {
    return "function '" + func + "', buffer '" + want.name + "': the device gave " +
           std::to_string(got.bytes.size()) + " bytes, the interpreter " +
           std::to_string(want.bytes.size());
  }
  double worst = 0;
  size_t bad = 0;
  size_t first = 0;
  double first_got = 0;
  double first_want = 0;
  double first_allowed = 0;
  std::string first_got_text;
  std::string first_want_text;
  if (!t.is_float()) {
    for (size_t k = 0; k < n; ++k) {
      const int64_t g = LoadBits(got.bytes.data() + k * elem, t);
      const int64_t w = LoadBits(want.bytes.data() + k * elem, t);
      if (g != w) {
        if (bad++ == 0) {
          first = k;
          if (t.is_uint() && t.bits == 64) {
            first_got_text = std::to_string(static_cast<uint64_t>(g));
            first_want_text = std::to_string(static_cast<uint64_t>(w));
          } else if (t.bits == 64) {
            first_got_text = std::to_string(g);
            first_want_text = std::to_string(w);
          } else {
            first_got_text = Describe(got.Element(k));
            first_want_text = Describe(want.Element(k));
          }
        }
        worst = INFINITY;
      }
    }
  } else {
    const double rtol = options.rtol >= 0 ? options.rtol : RelativeTolerance(t);
    const double tiny = t.bits == 16 ? 6.103515625e-05 : t.bits == 32 ? FLT_MIN : DBL_MIN;
    double scale = 0;
    for (size_t k = 0; k < n; ++k) {
      const double w = want.Element(k);
      if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
    }
    for (size_t k = 0; k < n; ++k) {
      const double g = got.Element(k);
      const double w = want.Element(k);
      const double allowed = rtol * std::max(std::fabs(w), 1e-3 * scale) + tiny;
      double ratio;
      if (std::isnan(w) || std::isnan(g)) {
        ratio = std::isnan(w) && std::isnan(g) ? 0 : INFINITY;
      } else if (std::isinf(w) || std::isinf(g)) {
        ratio = g == w ? 0 : INFINITY;
      } else {
        ratio = std::fabs(g - w) / allowed;
      }
      worst = std::max(worst, ratio);
      if (ratio > 1) {
        if (bad++ == 0) {
          first = k;
          first_got = g;
          first_want = w;
          first_allowed = allowed;
          first_got_text = Describe(g);
          first_want_text = Describe(w);
        }
      }
    }
  }
  if (max_ratio != nullptr) *max_ratio = std::max(*max_ratio, worst);
  if (bad == 0) return "";
  // The index per dimension, for a multi-dimensional buffer.
  std::string where = std::to_string(first);
  if (want.shape.size() > 1) {
    std::vector<int64_t> idx(want.shape.size());
    size_t rest = first;
    for (size_t d = want.shape.size(); d-- > 0;) {
      idx[d] = static_cast<int64_t>(rest % static_cast<size_t>(want.shape[d]));
      rest /= static_cast<size_t>(want.shape[d]);
    }
    where += " [";
    for (size_t d = 0; d < idx.size(); ++d) where += (d ? ", " : "") + std::to_string(idx[d]);
    where += "]";
  }
  std::string tol;
  if (t.is_float()) {
    char buf[200];
    std::snprintf(buf, sizeof(buf), "error %.3g, allowed %.3g (relative tolerance %.3g for %s)",
                  std::fabs(first_got - first_want), first_allowed,
                  options.rtol >= 0 ? options.rtol : RelativeTolerance(t), ir::ToString(t).c_str());
    tol = buf;
  } else {
    tol = "exact for " + ir::ToString(t);
  }
  return "function '" + func + "', buffer '" + want.name + "': first difference at index " + where +
         " of " + std::to_string(n) + ": got " + first_got_text + ", the interpreter " + "gives " +
         first_want_text + " (" + tol + "); " + std::to_string(bad) + " of " + std::to_string(n) +
         " elements differ";
}

// ---- Device arguments -----------------------------------------------------------------------

bp_value_t ScalarValue(const CheckArg& a) {
  bp_value_t v{};
  if (a.dtype.is_float()) {
    v.type = BP_VALUE_FLOAT;
    v.u.v_float64 = a.f;
  } else {
    v.type = BP_VALUE_INT;
    v.u.v_int64 = a.i;
  }
  return v;
}

CheckDeviceArgs::CheckDeviceArgs(const std::vector<CheckArg>& args, Device dev) {
  tensors_.resize(args.size());
  values_.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const CheckArg& a = args[i];
    bp_value_t& v = values_[i];
    if (!a.is_buffer) {
      v = ScalarValue(a);
      continue;
    }
    v.reserved0 = 0;
    tensors_[i] = Tensor::Empty(a.shape, ToDL(a.dtype), dev);
    if (!a.bytes.empty()) tensors_[i].CopyFromBytes(a.bytes.data(), a.bytes.size());
    v.type = BP_VALUE_TENSOR;
    v.u.v_tensor = tensors_[i].dl();
  }
}

void CheckDeviceArgs::Download(std::vector<CheckArg>* args) const {
  for (size_t i = 0; i < args->size(); ++i) {
    CheckArg& a = (*args)[i];
    if (!a.is_buffer || a.bytes.empty()) continue;
    tensors_[i].CopyToBytes(a.bytes.data(), a.bytes.size());
  }
}

CheckResult RunChecked(const Module& m, const Oracle& oracle, const std::string& func, Device dev,
                       const std::vector<CheckArg>& args, const CheckOptions& options) {
  CheckResult r;
  try {
    std::vector<CheckArg> want = args;
    oracle.Run(func, &want);
    r.got = args;
    Function fn = m.GetFunction(func);
    CheckDeviceArgs device_args(args, dev);
    fn.CallPacked(device_args.values().data(), static_cast<int32_t>(device_args.values().size()));
    Check(detail::Api()->device_stream_sync(dev.dl, nullptr));
    device_args.Download(&r.got);
    std::string errors;
    for (size_t i = 0; i < args.size(); ++i) {
      if (!args[i].is_buffer) continue;
      const std::string e = CompareBuffer(func, r.got[i], want[i], options, &r.max_ratio);
      if (!e.empty()) errors += (errors.empty() ? "" : "\n") + e;
    }
    r.ok = errors.empty();
    r.error = errors;
  } catch (const std::exception& e) {
    r.ok = false;
    r.error = e.what();
  }
  return r;
}

}  // namespace runner
}  // namespace backplane
