/* SPDX-License-Identifier: Apache-2.0 */
/* The CPU catalog kernels (the .bpir files of sdk/apps/kernels) as the same loops written in C,
 * compiled by the system compiler at -O3 -march=native -fopenmp -ffp-contract=off
 * -fno-trapping-math (the IR rounds a*b+c twice, as the c target does without -fast-math-contract,
 * and has no floating-point traps): the baseline of c_twins_bench.cc. Each loop, its parallel and
 * simd pragmas, its tile sizes and its float32 exp (the IR's bp_expf, backplane/ir/expf.hpp) are
 * the kernel file's, so the ratio measures the code generator, not the algorithm. */
#include "c_twins.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <backplane/ir/expf.hpp>

void twin_vector_add(int32_t n, const float* restrict a, const float* restrict b,
                     float* restrict c) {
#pragma omp parallel for schedule(static)
  for (int32_t o = 0; o < (n + 1023) / 1024; ++o) {
    const int64_t base = (int64_t)o * 1024;
    if (base + 1024 <= n) {
#pragma omp simd
      for (int64_t i = 0; i < 1024; ++i) c[base + i] = a[base + i] + b[base + i];
    } else {
      for (int64_t t = base; t < n; ++t) c[t] = a[t] + b[t];
    }
  }
}

void twin_saxpy(int32_t n, float alpha, const float* restrict x, float* restrict y) {
#pragma omp parallel for schedule(static)
  for (int32_t o = 0; o < (n + 1023) / 1024; ++o) {
    const int32_t base = o * 1024;
    if (base + 1024 <= n) {
#pragma omp simd
      for (int32_t i = 0; i < 1024; ++i) y[base + i] = alpha * x[base + i] + y[base + i];
    } else {
      for (int32_t t = base; t < n; ++t) y[t] = alpha * x[t] + y[t];
    }
  }
}

void twin_sum(int32_t n, const float* restrict x, float* restrict out) {
  double part[64];
  const int32_t cs = (n + 1023) / 1024 * 16;
#pragma omp parallel for schedule(static)
  for (int32_t ch = 0; ch < 64; ++ch) {
    double acc[16] = {0};
    const int32_t lo = ch * cs < n ? ch * cs : n;
    const int32_t hi = lo + cs < n ? lo + cs : n;
    const int32_t nv = (hi - lo) / 16;
    for (int32_t v = 0; v < nv; ++v) {
#pragma omp simd
      for (int32_t l = 0; l < 16; ++l) acc[l] += (double)x[lo + v * 16 + l];
    }
    for (int32_t t = lo + nv * 16; t < hi; ++t) acc[0] += (double)x[t];
    for (int32_t l = 1; l < 16; ++l) acc[0] += acc[l];
    part[ch] = acc[0];
  }
  double total = 0;
  for (int32_t ch = 0; ch < 64; ++ch) total += part[ch];
  out[0] = (float)total;
}

void twin_softmax(int32_t rows, int32_t cols, const float* restrict x, float* restrict y) {
#pragma omp parallel for schedule(static)
  for (int32_t r = 0; r < rows; ++r) {
    const float* xr = x + (int64_t)r * cols;
    float* yr = y + (int64_t)r * cols;
    const int32_t full = cols / 16 * 16;
    float lane[16];
#pragma omp simd
    for (int l = 0; l < 16; ++l) lane[l] = -INFINITY;
    for (int32_t c0 = 0; c0 < full; c0 += 16) {
#pragma omp simd
      for (int l = 0; l < 16; ++l) lane[l] = fmaxf(lane[l], xr[c0 + l]);
    }
    float mx = -INFINITY;
    for (int l = 0; l < 16; ++l) mx = fmaxf(mx, lane[l]);
    for (int32_t c = full; c < cols; ++c) mx = fmaxf(mx, xr[c]);
#pragma omp simd
    for (int32_t c = 0; c < cols; ++c) yr[c] = bp_expf(xr[c] - mx);
#pragma omp simd
    for (int l = 0; l < 16; ++l) lane[l] = 0;
    for (int32_t c0 = 0; c0 < full; c0 += 16) {
#pragma omp simd
      for (int l = 0; l < 16; ++l) lane[l] += yr[c0 + l];
    }
    float s = 0;
    for (int l = 0; l < 16; ++l) s += lane[l];
    for (int32_t c = full; c < cols; ++c) s += yr[c];
    const float inv = 1.0f / s;
#pragma omp simd
    for (int32_t c = 0; c < cols; ++c) yr[c] = yr[c] * inv;
  }
}

void twin_matmul(int32_t m, int32_t n, int32_t k, const float* restrict a, const float* restrict b,
                 float* restrict c) {
#pragma omp parallel for schedule(static)
  for (int32_t i = 0; i < m; ++i) {
    for (int32_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int32_t p = 0; p < k; ++p) acc += a[(int64_t)i * k + p] * b[(int64_t)p * n + j];
      c[(int64_t)i * n + j] = acc;
    }
  }
}

void twin_matmul_tiled(int32_t m, int32_t n, int32_t k, const float* restrict a,
                       const float* restrict b, float* restrict c) {
#pragma omp parallel for schedule(static)
  for (int32_t jt = 0; jt < (n + 31) / 32; ++jt) {
    const int32_t j0 = jt * 32;
    if (j0 + 32 <= n) {
      const int32_t mf = m / 8 * 8;
      float bp[1024][32];
      const int32_t kts = (k + 1023) / 1024 > 1 ? (k + 1023) / 1024 : 1;
      for (int32_t kt = 0; kt < kts; ++kt) {
        const int32_t k0 = kt * 1024;
        const int32_t kl = k - k0 < 1024 ? k - k0 : 1024;
        for (int32_t pp = 0; pp < kl; ++pp) {
#pragma omp simd
          for (int64_t jb = 0; jb < 32; ++jb) bp[pp][jb] = b[(int64_t)(k0 + pp) * n + j0 + jb];
        }
        for (int32_t it = 0; it < m / 8; ++it) {
          const int32_t i0 = it * 8;
          float acc[8][32];
          if (kt == 0) {
            for (int iz = 0; iz < 8; ++iz) {
#pragma omp simd
              for (int jz = 0; jz < 32; ++jz) acc[iz][jz] = 0;
            }
          } else {
            for (int ia = 0; ia < 8; ++ia) {
#pragma omp simd
              for (int64_t ja = 0; ja < 32; ++ja) acc[ia][ja] = c[(int64_t)(i0 + ia) * n + j0 + ja];
            }
          }
          for (int32_t p = 0; p < kl; ++p) {
#pragma GCC unroll 8
            for (int ii = 0; ii < 8; ++ii) {
              const float av = a[(int64_t)(i0 + ii) * k + k0 + p];
#pragma omp simd
              for (int jj = 0; jj < 32; ++jj) acc[ii][jj] = fmaf(av, bp[p][jj], acc[ii][jj]);
            }
          }
          for (int ic = 0; ic < 8; ++ic) {
#pragma omp simd
            for (int64_t jc = 0; jc < 32; ++jc) c[(int64_t)(i0 + ic) * n + j0 + jc] = acc[ic][jc];
          }
        }
        for (int32_t ie = mf; ie < m; ++ie) {
          float acc1[32];
          if (kt == 0) {
            for (int je = 0; je < 32; ++je) acc1[je] = 0;
          } else {
            for (int64_t jl = 0; jl < 32; ++jl) acc1[jl] = c[(int64_t)ie * n + j0 + jl];
          }
          for (int32_t pe = 0; pe < kl; ++pe) {
            const float ae = a[(int64_t)ie * k + k0 + pe];
#pragma omp simd
            for (int jv = 0; jv < 32; ++jv) acc1[jv] = fmaf(ae, bp[pe][jv], acc1[jv]);
          }
          for (int64_t jw = 0; jw < 32; ++jw) c[(int64_t)ie * n + j0 + jw] = acc1[jw];
        }
      }
    } else {
      for (int32_t i = 0; i < m; ++i) {
        float acc2[32] = {0};
        for (int32_t q = 0; q < k; ++q) {
          const float aq = a[(int64_t)i * k + q];
          for (int64_t jq = 0; jq < n - j0; ++jq) acc2[jq] += aq * b[(int64_t)q * n + j0 + jq];
        }
        for (int64_t jr = 0; jr < n - j0; ++jr) c[(int64_t)i * n + j0 + jr] = acc2[jr];
      }
    }
  }
}

void twin_transpose(int32_t m, int32_t n, const float* restrict a, float* restrict b) {
#pragma omp parallel for schedule(dynamic)
  for (int32_t ib = 0; ib < n / 16 + (n % 16 > 0); ++ib) {
    float t[16][16];
    for (int32_t jb = 0; jb < m / 16 + (m % 16 > 0); ++jb) {
      if (ib < n / 16 && jb < m / 16) {
        // A whole block: its rows of a into the tile, then each row of b a column of the tile
        // (the interleaved loads that gcc turns into an in-register transpose).
        for (int32_t r = 0; r < 16; ++r) {
#pragma omp simd
          for (int32_t c = 0; c < 16; ++c) t[r][c] = a[(int64_t)(jb * 16 + r) * n + ib * 16 + c];
        }
#pragma omp simd
        for (int32_t l = 0; l < 16; ++l) {
#pragma GCC unroll 16
          for (int32_t i = 0; i < 16; ++i) b[(int64_t)(ib * 16 + i) * m + jb * 16 + l] = t[l][i];
        }
      } else {
        const int32_t iw = 16 < n - ib * 16 ? 16 : n - ib * 16;
        const int32_t jw = 16 < m - jb * 16 ? 16 : m - jb * 16;
        for (int32_t i = ib * 16; i < ib * 16 + iw; ++i) {
          for (int32_t j = jb * 16; j < jb * 16 + jw; ++j)
            b[(int64_t)i * m + j] = a[(int64_t)j * n + i];
        }
      }
    }
  }
}

void twin_conv2d(int32_t batch, int32_t c_in, int32_t c_out, int32_t h, int32_t w, int32_t kh,
                 int32_t kw, int32_t pad, const float* restrict x, const float* restrict f,
                 float* restrict y) {
  if (kh <= 64 && kw <= 64 && kh * kw <= 64) {
    const int32_t nb = (c_out + 15) / 16, taps = kh * kw, wp = 63 + kw;
    float* fp = calloc((size_t)nb * (c_in > 0 ? c_in : 1) * (taps > 0 ? taps : 1) * 16, 4);
    if (fp == NULL) return;
#pragma omp parallel for schedule(static)
    for (int32_t cb = 0; cb < nb; ++cb) {
      for (int32_t ci = 0; ci < c_in; ++ci) {
        for (int32_t t = 0; t < taps; ++t) {
          for (int32_t q = 0; q < 16; ++q) {
            const int32_t co = cb * 16 + q < c_out ? cb * 16 + q : c_out - 1;
            fp[(((int64_t)cb * c_in + ci) * taps + t) * 16 + q] =
                f[((int64_t)co * c_in + ci) * taps + t];
          }
        }
      }
    }
    for (int32_t b = 0; b < batch; ++b) {
#pragma omp parallel for schedule(static)
      for (int32_t oh = 0; oh < h; ++oh) {
        float* xp = calloc((size_t)32 * (kh > 0 ? kh : 1) * wp, 4);
        if (xp == NULL) continue;
        for (int32_t cw = 0; cw < (w + 63) / 64; ++cw) {
          const int32_t nc = (c_in + 31) / 32 > 1 ? (c_in + 31) / 32 : 1;
          for (int32_t cc = 0; cc < nc; ++cc) {
            const int32_t ncc = 32 < c_in - cc * 32 ? 32 : c_in - cc * 32;
            // The columns [lo, hi) of xp inside the image.
            const int64_t lo64 = (int64_t)pad - (int64_t)cw * 64,
                          hi64 = (int64_t)w + pad - (int64_t)cw * 64;
            const int32_t lo = (int32_t)(lo64 < 0 ? 0 : lo64 < wp ? lo64 : wp);
            const int32_t hi = (int32_t)(hi64 < lo ? lo : hi64 < wp ? hi64 : wp);
            for (int32_t ci = 0; ci < ncc; ++ci) {
              for (int32_t r = 0; r < kh; ++r) {
                float* row = xp + ((int64_t)ci * kh + r) * wp;
                const int32_t ih = oh + r - pad;
                if (ih >= 0 && ih < h) {
                  const float* xr = x + (((int64_t)b * c_in + cc * 32 + ci) * h + ih) * w;
                  for (int32_t j = 0; j < lo; ++j) row[j] = 0.0f;
#pragma omp simd
                  for (int32_t j = lo; j < hi; ++j) row[j] = xr[cw * 64 + j - pad];
                  for (int32_t j = hi; j < wp; ++j) row[j] = 0.0f;
                } else {
#pragma omp simd
                  for (int32_t j = 0; j < wp; ++j) row[j] = 0.0f;
                }
              }
            }
            const int32_t cols = 64 < w - cw * 64 ? 64 : w - cw * 64;
            for (int32_t ot = 0; ot < (cols + 15) / 16; ++ot) {
              const int32_t ow0 = cw * 64 + ot * 16;
              for (int32_t cb = 0; cb < nb; ++cb) {
                const int32_t co0 = cb * 16;
                float acc[16][16] = {{0}};
                if (cc > 0) {
#pragma GCC unroll 16
                  for (int q = 0; q < 16; ++q) {
                    if (co0 + q < c_out) {
                      const float* yr = y + (((int64_t)b * c_out + co0 + q) * h + oh) * w + ow0;
                      if (ow0 + 16 <= w) {
#pragma omp simd
                        for (int l = 0; l < 16; ++l) acc[q][l] = yr[l];
                      } else {
                        for (int32_t l = 0; l < w - ow0; ++l) acc[q][l] = yr[l];
                      }
                    }
                  }
                }
                for (int32_t ci = 0; ci < ncc; ++ci) {
                  const float* fq = fp + ((int64_t)cb * c_in + cc * 32 + ci) * taps * 16;
                  for (int32_t r = 0; r < kh; ++r) {
                    const float* row = xp + ((int64_t)ci * kh + r) * wp + ot * 16;
                    for (int32_t s = 0; s < kw; ++s) {
#pragma GCC unroll 16
                      for (int q = 0; q < 16; ++q) {
                        const float wv = fq[(r * kw + s) * 16 + q];
#pragma omp simd
                        for (int l = 0; l < 16; ++l) acc[q][l] += wv * row[s + l];
                      }
                    }
                  }
                }
#pragma GCC unroll 16
                for (int q = 0; q < 16; ++q) {
                  if (co0 + q < c_out) {
                    float* yr = y + (((int64_t)b * c_out + co0 + q) * h + oh) * w + ow0;
                    if (ow0 + 16 <= w) {
#pragma omp simd
                      for (int l = 0; l < 16; ++l) yr[l] = acc[q][l];
                    } else {
                      for (int32_t l = 0; l < w - ow0; ++l) yr[l] = acc[q][l];
                    }
                  }
                }
              }
            }
          }
        }
        free(xp);
      }
    }
    free(fp);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int32_t co = 0; co < c_out; ++co) {
    for (int32_t b = 0; b < batch; ++b) {
      for (int32_t oh = 0; oh < h; ++oh) {
        float* yr = y + (((int64_t)b * c_out + co) * h + oh) * w;
#pragma omp simd
        for (int32_t ow = 0; ow < w; ++ow) yr[ow] = 0;
        for (int32_t ci = 0; ci < c_in; ++ci) {
          for (int32_t r = 0; r < kh; ++r) {
            const int32_t ih = oh + r - pad;
            if (ih >= 0 && ih < h) {
              const float* xr = x + (((int64_t)b * c_in + ci) * h + ih) * w;
              for (int32_t s = 0; s < kw; ++s) {
                const int32_t lo = 0 > pad - s ? 0 : pad - s;
                const int32_t hi = w < w + pad - s ? w : w + pad - s;
                const float wv = f[(((int64_t)co * c_in + ci) * kh + r) * kw + s];
                const int32_t cnt = hi - lo > 0 ? hi - lo : 0;
#pragma omp simd
                for (int32_t ow = lo; ow < lo + cnt; ++ow) yr[ow] += wv * xr[ow + s - pad];
              }
            }
          }
        }
      }
    }
  }
}
