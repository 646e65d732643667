// SPDX-License-Identifier: Apache-2.0
#include "reference.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <stdexcept>

namespace backplane {
namespace kernels {
namespace detail {

const Arg& Named(const std::vector<Arg>& args, const std::string& name) {
  for (const Arg& a : args) {
    if (a.name == name) return a;
  }
  throw std::logic_error("kernel catalog: no argument '" + name + "'");
}

Arg& Named(std::vector<Arg>& args, const std::string& name) {
  return const_cast<Arg&>(Named(static_cast<const std::vector<Arg>&>(args), name));
}

double Scalar(const std::vector<Arg>& args, const std::string& name) {
  return Named(args, name).scalar;
}

namespace {
int64_t Size(const std::vector<Arg>& args, const std::string& name) {
  return static_cast<int64_t>(Scalar(args, name));
}
}  // namespace

void VectorAdd(std::vector<Arg>& args) {
  const auto& a = Named(args, "a").data;
  const auto& b = Named(args, "b").data;
  auto& c = Named(args, "c").data;
  for (size_t i = 0; i < c.size(); ++i) c[i] = a[i] + b[i];
}

void Saxpy(std::vector<Arg>& args) {
  const double alpha = Scalar(args, "alpha");
  const auto& x = Named(args, "x").data;
  auto& y = Named(args, "y").data;
  for (size_t i = 0; i < y.size(); ++i) y[i] = alpha * x[i] + y[i];
}

void Sum(std::vector<Arg>& args) {
  const auto& x = Named(args, "x").data;
  double s = 0;
  for (double v : x) s += v;
  Named(args, "out").data.at(0) = s;
}

void Softmax(std::vector<Arg>& args) {
  const int64_t rows = Size(args, "rows"), cols = Size(args, "cols");
  const auto& x = Named(args, "x").data;
  auto& y = Named(args, "y").data;
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * cols;
    double* yr = y.data() + r * cols;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t c = 0; c < cols; ++c) m = std::max(m, xr[c]);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += yr[c] = std::exp(xr[c] - m);
    for (int64_t c = 0; c < cols; ++c) yr[c] /= s;
  }
}

void Matmul(std::vector<Arg>& args) {
  const int64_t m = Size(args, "m"), n = Size(args, "n"), k = Size(args, "k");
  const auto& a = Named(args, "a").data;
  const auto& b = Named(args, "b").data;
  auto& c = Named(args, "c").data;
  std::fill(c.begin(), c.end(), 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      const double av = a[i * k + p];
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * b[p * n + j];
    }
  }
}

void Transpose(std::vector<Arg>& args) {
  const int64_t m = Size(args, "m"), n = Size(args, "n");
  const auto& a = Named(args, "a").data;
  auto& b = Named(args, "b").data;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) b[j * m + i] = a[i * n + j];
  }
}

void Conv2d(std::vector<Arg>& args) {
  const int64_t batch = Size(args, "batch"), c_in = Size(args, "c_in"), c_out = Size(args, "c_out"),
                h = Size(args, "h"), w = Size(args, "w"), kh = Size(args, "kh"),
                kw = Size(args, "kw"), pad = Size(args, "pad");
  const auto& x = Named(args, "x").data;
  const auto& f = Named(args, "f").data;
  auto& y = Named(args, "y").data;
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t co = 0; co < c_out; ++co) {
      for (int64_t oh = 0; oh < h; ++oh) {
        for (int64_t ow = 0; ow < w; ++ow) {
          double acc = 0;
          for (int64_t ci = 0; ci < c_in; ++ci) {
            for (int64_t r = 0; r < kh; ++r) {
              const int64_t ih = oh + r - pad;
              if (ih < 0 || ih >= h) continue;
              for (int64_t s = 0; s < kw; ++s) {
                const int64_t iw = ow + s - pad;
                if (iw < 0 || iw >= w) continue;
                acc += x[((b * c_in + ci) * h + ih) * w + iw] *
                       f[((co * c_in + ci) * kh + r) * kw + s];
              }
            }
          }
          y[((b * c_out + co) * h + oh) * w + ow] = acc;
        }
      }
    }
  }
}

}  // namespace detail
}  // namespace kernels
}  // namespace backplane
