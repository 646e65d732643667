// SPDX-License-Identifier: Apache-2.0
// The run every construct clause ends in (constructs.h): a kernel built for each code
// generator of the device, run there and on the IR interpreter, and every element compared bit
// for bit or within an ulp bound, with the first difference named.
#include "constructs.h"

#include <algorithm>
#include <backplane/hash.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/ir.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/check.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "conformance.h"
#include "device_util.h"

namespace backplane {
namespace conformance {
namespace constructs {

// The kernel's text: c[i] = expr for i in [0, kElements), as a serial loop on a CPU and as
// 8 blocks of 64 threads on a GPU.
std::string KernelText(const std::string& params, const std::string& body, bool gpu) {
  std::string text = "func construct(" + params + ") {\n";
  if (gpu) {
    text += "  for bx in thread(blockIdx.x, 0, " + std::to_string(kElements / 64) +
            ") {\n"
            "    for tx in thread(threadIdx.x, 0, 64) {\n"
            "      let i: int32 = bx * 64 + tx\n      " +
            body +
            "\n"
            "    }\n"
            "  }\n";
  } else {
    text += "  for i in serial(0, " + std::to_string(kElements) + ") {\n    " + body + "\n  }\n";
  }
  return text + "}\n";
}

namespace {

uint16_t HalfBits(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

bool IsNaN(const uint8_t* p, const std::string& dtype) {
  if (dtype == "float16") return (HalfBits(p) & 0x7fffu) > 0x7c00u;
  if (dtype == "float32") {
    float f;
    std::memcpy(&f, p, 4);
    return std::isnan(f);
  }
  if (dtype == "float64") {
    double d;
    std::memcpy(&d, p, 8);
    return std::isnan(d);
  }
  return false;
}

// |got - want| in units in the last place of `want` (its dtype's spacing at |want|; at least
// the spacing of the smallest normal, so a result near zero is judged by an absolute error of
// that size). Infinite: one of them infinite or NaN and the other not the same.
double UlpError(const uint8_t* got, const uint8_t* want, const std::string& dtype,
                double* ulp_out) {
  double g, w, ulp;
  if (dtype == "float32") {
    float gf, wf;
    std::memcpy(&gf, got, 4);
    std::memcpy(&wf, want, 4);
    g = gf;
    w = wf;
    const float a = std::max(std::fabs(wf), std::numeric_limits<float>::min());
    ulp = static_cast<double>(std::nextafter(a, INFINITY) - a);
  } else {
    std::memcpy(&g, got, 8);
    std::memcpy(&w, want, 8);
    const double a = std::max(std::fabs(w), std::numeric_limits<double>::min());
    ulp = std::nextafter(a, static_cast<double>(INFINITY)) - a;
  }
  *ulp_out = ulp;
  if (!std::isfinite(g) || !std::isfinite(w)) return g == w ? 0 : INFINITY;
  return std::fabs(g - w) / ulp;
}

// " by more than 3 ulp (the worst by 7.5)", or "" for an exact comparison.
std::string BoundText(double bound, double worst) {
  if (bound <= 0) return "";
  char text[96];
  std::snprintf(text, sizeof(text), " by more than their bound (up to %g ulp; the worst by %.3g)",
                bound, worst);
  return text;
}

bool IsSubnormal(const uint8_t* p, const std::string& dtype) {
  if (dtype == "float16") {
    const uint16_t h = HalfBits(p);
    return (h & 0x7c00u) == 0 && (h & 0x03ffu) != 0;
  }
  if (dtype == "float32") {
    float f;
    std::memcpy(&f, p, 4);
    return std::fpclassify(f) == FP_SUBNORMAL;
  }
  if (dtype == "float64") {
    double d;
    std::memcpy(&d, p, 8);
    return std::fpclassify(d) == FP_SUBNORMAL;
  }
  return false;
}

std::string ElementText(const uint8_t* p, const std::string& dtype) {
  char buf[96];
  if (dtype == "float32") {
    float f;
    uint32_t u;
    std::memcpy(&f, p, 4);
    std::memcpy(&u, p, 4);
    std::snprintf(buf, sizeof(buf), "%.9g (0x%08x)", static_cast<double>(f), u);
  } else if (dtype == "float64") {
    double d;
    uint64_t u;
    std::memcpy(&d, p, 8);
    std::memcpy(&u, p, 8);
    std::snprintf(buf, sizeof(buf), "%.17g (0x%016llx)", d, static_cast<unsigned long long>(u));
  } else if (dtype == "float16") {
    const uint16_t h = HalfBits(p);
    std::snprintf(buf, sizeof(buf), "%.5g (0x%04x)", static_cast<double>(ir::HalfToFloat(h)), h);
  } else if (dtype == "int64") {
    int64_t v;
    std::memcpy(&v, p, 8);
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(v));
  } else if (dtype == "uint64") {
    uint64_t v;
    std::memcpy(&v, p, 8);
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(v));
  } else if (dtype == "uint32") {
    uint32_t v;
    std::memcpy(&v, p, 4);
    std::snprintf(buf, sizeof(buf), "%u", v);
  } else if (dtype == "int8" || dtype == "uint8" || dtype == "int16" || dtype == "uint16") {
    const bool wide = dtype.find("16") != std::string::npos;
    const bool is_unsigned = dtype[0] == 'u';
    int v = 0;
    if (wide) {
      uint16_t u;
      std::memcpy(&u, p, 2);
      v = is_unsigned ? static_cast<int>(u) : static_cast<int>(static_cast<int16_t>(u));
    } else {
      v = is_unsigned ? static_cast<int>(p[0]) : static_cast<int>(static_cast<int8_t>(p[0]));
    }
    std::snprintf(buf, sizeof(buf), "%d", v);
  } else {
    int32_t v;
    std::memcpy(&v, p, 4);
    std::snprintf(buf, sizeof(buf), "%d", v);
  }
  return buf;
}

// Calls `construct` of `m` with every buffer of *args a view `shift` elements into a tensor of
// `shift` more elements (the ones before the view hold a pattern), then downloads the views
// into *args and fails when an element before a view changed.
void CallWithShiftedViews(Context& ctx, const std::string& clause, const Module& m, int64_t shift,
                          std::vector<runner::CheckArg>* args) {
  std::vector<Tensor> whole(args->size());
  std::vector<DLTensor> views(args->size());
  std::vector<bp_value_t> values(args->size());
  const uint8_t kPattern = 0x5a;
  for (size_t i = 0; i < args->size(); ++i) {
    const runner::CheckArg& a = (*args)[i];
    bp_value_t& v = values[i];
    if (!a.is_buffer) {
      v = runner::ScalarValue(a);
      continue;
    }
    v.reserved0 = 0;
    const size_t width = a.bytes.size() / a.count();
    const size_t before = static_cast<size_t>(shift) * width;
    std::vector<uint8_t> bytes(before, kPattern);
    bytes.insert(bytes.end(), a.bytes.begin(), a.bytes.end());
    const DLDataType dl{static_cast<uint8_t>(a.dtype.is_float() ? kDLFloat
                                             : a.dtype.is_int() ? kDLInt
                                                                : kDLUInt),
                        a.dtype.bits, 1};
    whole[i] = Tensor::Empty({static_cast<int64_t>(a.count()) + shift}, dl, Device(ctx.dev));
    whole[i].CopyFromBytes(bytes.data(), bytes.size());
    views[i] = *whole[i].dl();
    views[i].shape = const_cast<int64_t*>(a.shape.data());
    views[i].ndim = static_cast<int32_t>(a.shape.size());
    views[i].byte_offset += before;
    v.type = BP_VALUE_TENSOR;
    v.u.v_tensor = &views[i];
  }
  std::vector<std::vector<uint8_t>> downloaded(args->size());
  try {
    m.GetFunction("construct").CallPacked(values.data(), static_cast<int32_t>(values.size()));
    for (size_t i = 0; i < args->size(); ++i) {
      const runner::CheckArg& a = (*args)[i];
      if (!a.is_buffer) continue;
      const size_t width = a.bytes.size() / a.count();
      downloaded[i].resize(static_cast<size_t>(shift) * width + a.bytes.size());
      whole[i].CopyToBytes(downloaded[i].data(), downloaded[i].size());
    }
  } catch (const Error& e) {
    // A device may require an alignment of a buffer's offset (Vulkan's
    // minStorageBufferOffsetAlignment) and refuse the view naming it: nothing to check there.
    // A device that runs calls asynchronously (remote) reports the refusal at the download.
    const std::string what = e.what();
    if (what.find("byte_offset") != std::string::npos &&
        what.find("OffsetAlignment") != std::string::npos) {
      Skip(DeviceString(ctx.dev) + " refuses a view " + std::to_string(shift) +
           " elements into its tensor: " + what);
    }
    throw;
  }
  for (size_t i = 0; i < args->size(); ++i) {
    runner::CheckArg& a = (*args)[i];
    if (!a.is_buffer) continue;
    const size_t width = a.bytes.size() / a.count();
    const size_t before = static_cast<size_t>(shift) * width;
    const std::vector<uint8_t>& bytes = downloaded[i];
    for (size_t k = 0; k < before; ++k) {
      if (bytes[k] != kPattern) {
        Fail(clause + ": byte " + std::to_string(k) + " of the tensor under the view '" + a.name +
             "' (before the view's first element, at byte_offset " + std::to_string(before) +
             ") was written");
      }
    }
    std::memcpy(a.bytes.data(), bytes.data() + before, a.bytes.size());
  }
}

}  // namespace

// Builds `text` for every code generator of the device, runs `construct` on `args` there and
// on the interpreter, and compares every buffer bit for bit (or, with `ulp_bound`, floats within
// it). Where the clause is `optional` (a dtype or atomic a device may lack), a refusal
// (BP_ERR_UNSUPPORTED from the build or the launch) skips, with the refusal as the reason;
// otherwise it fails, but for bp_build's refusal of a kernel whose IR text version is newer
// than the code generator reads, which skips every clause (SkipIfRefused). With `view_shift` > 0
// every buffer is passed as a view that starts `view_shift` elements into a larger tensor
// (DLTensor::byte_offset), whose elements before the view must come back untouched.
void RunExact(Context& ctx, const std::string& clause,
              const std::function<std::string(bool gpu)>& text_for,
              const std::vector<runner::CheckArg>& args, bool optional,
              const std::function<double(const std::string& kind, size_t k, double ulp)>& ulp_bound,
              int64_t view_shift) {
  const std::vector<std::string> kinds = SetUpKinds(ctx);
  const bool gpu = !RunsCpuCode(ctx.dev);
  for (const std::string& kind : kinds) {
    const Target target = TargetFor(ctx, kind);
    // The kind whose code generator writes the code: the remote kind's inner Target's.
    std::string code_kind = kind;
    const nlohmann::json tj = nlohmann::json::parse(target.ToJson(), nullptr, false);
    if (tj.is_object() && tj.contains("target") && tj["target"].is_object() &&
        tj["target"].contains("kind") && tj["target"]["kind"].is_string()) {
      code_kind = tj["target"]["kind"].get<std::string>();
    }
    // A device that does not run CPU code gets the kernel bound to blocks and threads, as the
    // catalog's GPU kernels are (codegen.kernel.*).
    const std::string text = text_for(gpu);
    std::vector<runner::CheckArg> want = args;
    try {
      runner::Oracle(ir::Parse(text, clause)).Run("construct", &want);
    } catch (const Error& e) {
      Fail("the IR interpreter could not run the clause's kernel (a defect of the kit): " +
           std::string(e.what()) + "\n" + text);
    }
    std::vector<runner::CheckArg> got = args;
    try {
      const Module m = Build(text, target);
      if (view_shift == 0) {
        const runner::CheckDeviceArgs dargs(got, Device(ctx.dev));
        m.GetFunction("construct")
            .CallPacked(dargs.values().data(), static_cast<int32_t>(dargs.values().size()));
        dargs.Download(&got);
      } else {
        CallWithShiftedViews(ctx, clause, m, view_shift, &got);
      }
    } catch (const Error& e) {
      // Only a feature a device may lack (int64, float64, atomics beyond int32, vector types)
      // may be refused, and a kernel whose IR is newer than the code generator reads; int32
      // and float32 arithmetic, loops and shared memory are every code generator's.
      SkipIfRefused(e, kind + " on " + DeviceString(ctx.dev), optional);
      Fail(clause + " built by target.build." + kind + " failed on " + DeviceString(ctx.dev) +
           ": " + e.what() + "\nthe kernel:\n" + text);
    }
    for (size_t b = 0; b < want.size(); ++b) {
      const runner::CheckArg& w = want[b];
      const runner::CheckArg& g = got[b];
      if (!w.is_buffer) continue;  // a scalar argument: nothing comes back
      const std::string dtype = ir::ToString(w.dtype);
      const size_t width = w.bytes.size() / w.count();
      size_t wrong = 0, first = 0, subnormal = 0;
      double worst = 0, worst_allowed = 0;  // the largest error and bound in ulps
      for (size_t k = 0; k < w.count(); ++k) {
        const uint8_t* pw = w.bytes.data() + k * width;
        const uint8_t* pg = g.bytes.data() + k * width;
        if (std::memcmp(pw, pg, width) == 0) continue;
        if (IsNaN(pw, dtype) && IsNaN(pg, dtype)) continue;
        if (ulp_bound && (dtype == "float32" || dtype == "float64")) {
          double ulp = 0;
          const double e = UlpError(pg, pw, dtype, &ulp);
          const double allowed = ulp_bound(code_kind, k, ulp);
          worst = std::max(worst, e);
          worst_allowed = std::max(worst_allowed, allowed);
          if (e <= allowed) continue;
        }
        if (wrong++ == 0) first = k;
        // Whether a subnormal input or result is involved (a device that flushes them).
        bool sub = IsSubnormal(pw, dtype);
        for (const runner::CheckArg& a : args) {
          const size_t aw = a.bytes.size() / a.count();
          if (k < a.count())
            sub = sub || IsSubnormal(a.bytes.data() + k * aw, ir::ToString(a.dtype));
        }
        if (sub) ++subnormal;
      }
      if (ulp_bound && worst > 0) {
        char line[200];
        std::snprintf(line, sizeof(line),
                      "%s: '%s' within %.3g ulp of the IR interpreter's (bound up to %g)",
                      kind.c_str(), w.name.c_str(), worst, worst_allowed);
        ctx.Detail(line);
      }
      if (wrong == 0) continue;
      std::string inputs;
      for (const runner::CheckArg& a : args) {
        if (&a == &args[b] || a.name == w.name) continue;
        const size_t aw = a.bytes.size() / a.count();
        if (first < a.count()) {
          inputs += (inputs.empty() ? "" : ", ") + a.name + "[" + std::to_string(first) +
                    "] = " + ElementText(a.bytes.data() + first * aw, ir::ToString(a.dtype));
        }
      }
      Fail(clause + " built by target.build." + kind + " on " + DeviceString(ctx.dev) + ": " +
           std::to_string(wrong) + " of " + std::to_string(w.count()) + " elements of '" + w.name +
           "' differ from the IR interpreter's" + BoundText(worst_allowed, worst) +
           "; the first, [" + std::to_string(first) + "], is " +
           ElementText(g.bytes.data() + first * width, dtype) + " where the IR gives " +
           ElementText(w.bytes.data() + first * width, dtype) +
           (inputs.empty() ? "" : " (inputs: " + inputs + ")") +
           (subnormal == wrong
                ? std::string("; every difference involves a subnormal input or result: the "
                              "device flushes subnormal floats to zero, where the IR keeps them")
                : std::string()) +
           "\nthe kernel:\n" + text);
    }
    ctx.Detail(kind + ": " + std::to_string(want.size()) + " buffers of " +
               std::to_string(kElements) + " elements match the IR interpreter bit for bit");
  }
}

runner::CheckArg Buffer(const std::string& name, const std::string& dtype,
                        std::vector<uint8_t> bytes) {
  runner::CheckArg a;
  a.name = name;
  ir::ParseDType(dtype, &a.dtype);
  a.is_buffer = true;
  a.shape = {static_cast<int64_t>(bytes.size()) / ((a.dtype.bits + 7) / 8)};
  a.bytes = std::move(bytes);
  return a;
}

// A buffer of `count` elements of `dtype`, every byte `fill` (the output, before a call).
runner::CheckArg Filled(const std::string& name, const std::string& dtype, size_t count,
                        uint8_t fill) {
  ir::DType t;
  ir::ParseDType(dtype, &t);
  return Buffer(name, dtype, std::vector<uint8_t>(count * ((t.bits + 7) / 8), fill));
}

}  // namespace constructs
}  // namespace conformance
}  // namespace backplane
