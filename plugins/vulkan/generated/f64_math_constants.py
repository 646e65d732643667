#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Writes f64_math_constants.h: the constants and polynomial coefficients of the vulkan code
generator's float64 math helpers (plugins/vulkan/f64_math.cc; docs/vulkan.md, "float64 math").

Run it (`python3 f64_math_constants.py`; needs mpmath and clang-format): it writes
f64_math_constants.h beside itself, formatted by the repository's .clang-format.
Every constant is the double nearest to its value computed with 120 digits; a split constant
(hi + lo) keeps the bits of the true value that hi drops. Each polynomial interpolates its
function at the Chebyshev nodes of its interval (close to the minimax polynomial of that
degree); the script evaluates the rounded coefficients by Horner's rule in double at 4001
points of the interval and writes the largest error, relative to the function the helper
computes, beside the coefficients.
"""
import os
import subprocess
import sys

import mpmath as mp

mp.mp.dps = 120


def rn(x):
    """The double nearest to x."""
    return float(mp.mpf(x))


def bits(x, n):
    """x rounded to n significant bits."""
    m, e = mp.frexp(mp.mpf(x))
    return float(mp.ldexp(mp.nint(mp.ldexp(m, n)), e - n))


def hexf(x):
    return float(x).hex()


def series_or(f, tiny, series):
    """f(t), or series(t) where |t| < tiny (the quotient loses digits there)."""
    return lambda t: series(mp.mpf(t)) if abs(t) < tiny else f(mp.mpf(t))


def fit(f, a, b, deg, center):
    """Coefficients c[j] of sum c[j] (t - center)^j interpolating f at deg + 1 Chebyshev nodes
    of [a, b], rounded to double."""
    a, b, center = mp.mpf(a), mp.mpf(b), mp.mpf(center)
    h = max(b - center, center - a)
    n = deg + 1
    A = mp.matrix(n, n)
    y = mp.matrix(n, 1)
    for i in range(n):
        x = (a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (2 * i + 1) / (2 * n))
        for j in range(n):
            A[i, j] = ((x - center) / h) ** j
        y[i] = f(x)
    c = mp.lu_solve(A, y)
    return [rn(c[j] / h**j) for j in range(n)]


def horner(c, t):
    """Horner's rule in double (Python floats are IEEE doubles)."""
    r = c[-1]
    for k in c[-2::-1]:
        r = r * t + k
    return r


def worst(err, a, b, n=4000):
    """The largest err(x) at n + 1 doubles evenly spread over [a, b], as a power of 2."""
    m = max(err(rn(mp.mpf(a) + (mp.mpf(b) - a) * i / n)) for i in range(n + 1))
    return float(mp.log(m, 2)) if m > 0 else -999.0


out = []


def const(name, value, what):
    out.append("// %s\ninline constexpr double %s = %s;  // %.17g" % (what, name, hexf(value), value))


def poly(name, coeffs, what, err):
    out.append("// %s\n// Largest error measured by the generator: 2^%.1f.\n"
               "inline constexpr double %s[%d] = {\n%s};" %
               (what, err, name, len(coeffs), "".join("    %s,  // %.17g\n" % (hexf(c), c)
                                                    for c in coeffs)))


LN2 = mp.log(2)
PI = mp.pi

# ---- ln 2, 1/ln 2 ------------------------------------------------------------------------
ln2_hi = bits(LN2, 42)  # k * kLn2Hi is exact for |k| < 2^11
const("kLn2Hi", ln2_hi, "ln 2 to 42 bits: k * kLn2Hi is exact for |k| < 2^11.")
const("kLn2Lo", rn(LN2 - ln2_hi), "ln 2 - kLn2Hi.")
const("kLn2", rn(LN2), "ln 2 as a double-double (kLn2, kLn2Tail).")
const("kLn2Tail", rn(LN2 - rn(LN2)), "ln 2 - kLn2.")
const("kInvLn2", rn(1 / LN2), "1 / ln 2 as a double-double (kInvLn2, kInvLn2Tail).")
const("kInvLn2Tail", rn(1 / LN2 - rn(1 / LN2)), "1 / ln 2 - kInvLn2.")
const("kTwoThirds", rn(mp.mpf(2) / 3), "2/3 as a double-double (kTwoThirds, kTwoThirdsTail).")
const("kTwoThirdsTail", rn(mp.mpf(2) / 3 - rn(mp.mpf(2) / 3)), "2/3 - kTwoThirds.")
C0 = 2 / mp.sqrt(PI)
const("kTwoOverSqrtPi", rn(C0), "2 / sqrt(pi) as a double-double.")
const("kTwoOverSqrtPiTail", rn(C0 - rn(C0)), "2 / sqrt(pi) - kTwoOverSqrtPi.")

# ---- pi / 2 in four parts (Cody and Waite) ----------------------------------------------------
PIO2 = PI / 2
p1 = bits(PIO2, 33)
p2 = bits(PIO2 - p1, 33)
p3 = bits(PIO2 - p1 - p2, 33)
const("kTwoOverPi", rn(2 / PI), "2 / pi.")
const("kPio2_1", p1, "pi/2 to 33 bits: k * kPio2_1 is exact for |k| < 2^20.")
const("kPio2_2", p2, "The next 33 bits of pi/2.")
const("kPio2_3", p3, "The next 33 bits.")
const("kPio2_3Tail", rn(PIO2 - p1 - p2 - p3), "pi/2 - kPio2_1 - kPio2_2 - kPio2_3.")

const("kPio2", rn(PIO2), "pi/2 as a double-double (kPio2, kPio2Tail).")
const("kPio2Tail", rn(PIO2 - rn(PIO2)), "pi/2 - kPio2.")
# 2/pi = sum of kTwoOverPiDigits[j] 2^(-24 (j + 1)): 52 digits (1248 bits), enough for the
# Payne-Hanek reduction of every double (the largest needs digits up to 48).
digits = []
with mp.workdps(450):  # 1248 bits and more
    rest = 2 / mp.pi
    for j in range(52):
        rest *= 2**24
        d = int(mp.floor(rest))
        digits.append(d)
        rest -= d
out.append("// 2/pi in 24-bit digits: 2/pi = sum of kTwoOverPiDigits[j] 2^(-24 (j + 1)).\n"
           "inline constexpr double kTwoOverPiDigits[%d] = {\n%s};" %
           (len(digits), "".join("    %d.0,  // %d\n" % (d, j) for j, d in enumerate(digits))))

# ---- exp: e^r = 1 + r + r^2 E(r), |r| <= ln2/2 ------------------------------------------------
R_EXP = mp.mpf("0.3467")  # ln(2)/2 = 0.34657..., and the reduction's rounding
E = series_or(lambda r: (mp.exp(r) - 1 - r) / r**2, mp.mpf("1e-30"), lambda r: mp.mpf(1) / 2 + r / 6)
c = fit(E, -R_EXP, R_EXP, 11, 0)
poly("kExpPoly", c, "exp: E(r) = (e^r - 1 - r) / r^2 on |r| <= 0.3467, in r; error relative to e^r.",
     worst(lambda r: abs(r * r * (horner(c, r) - E(r))) / mp.exp(r), -R_EXP, R_EXP))

# ---- log: log(1 + f) = 2 atanh(s) = 2s + (2/3) s^3 + s^5 U(s^2), s = f / (2 + f) ------------
S_LOG = (mp.sqrt(2) - 1) / (mp.sqrt(2) + 1) * mp.mpf("1.0001")
Z_LOG = S_LOG**2
U = series_or(lambda z: (2 * mp.atanh(mp.sqrt(z)) / mp.sqrt(z) - 2 - 2 * z / 3) / z**2,
              mp.mpf("1e-30"), lambda z: mp.mpf(2) / 5 + 2 * z / 7)
c = fit(U, 0, Z_LOG, 8, 0)
poly("kLogPoly", c,
     "log: U(z) = (2 atanh(s) - 2s - 2s^3/3) / s^5, z = s^2 <= 0.02944 (|s| <= 0.17159), in z;\n"
     "// error relative to log(1 + f) = 2 atanh(s).",
     worst(lambda z: abs(mp.sqrt(z)**5 * (horner(c, z) - U(z))) / (2 * mp.atanh(mp.sqrt(z)))
           if z > 0 else 0, 0, Z_LOG))

# ---- sin, cos on |r| <= pi/4 -----------------------------------------------------------------
R_TRIG = PI / 4 * mp.mpf("1.0001")
S = series_or(lambda z: (mp.sin(mp.sqrt(z)) / mp.sqrt(z) - 1) / z, mp.mpf("1e-30"),
              lambda z: -mp.mpf(1) / 6 + z / 120)
c = fit(S, 0, R_TRIG**2, 7, 0)
poly("kSinPoly", c, "sin: S(z) = (sin(r)/r - 1) / z, z = r^2 <= (pi/4)^2, in z; error relative to sin(r).",
     worst(lambda r: abs(r**3 * (horner(c, r * r) - S(mp.mpf(r)**2))) / mp.sin(r) if r > 0 else 0,
           0, R_TRIG))
C = series_or(lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z**2, mp.mpf("1e-30"),
              lambda z: mp.mpf(1) / 24 - z / 720)
c = fit(C, 0, R_TRIG**2, 6, 0)
poly("kCosPoly", c, "cos: C(z) = (cos(r) - 1 + z/2) / z^2, z = r^2 <= (pi/4)^2, in z; error relative to cos(r).",
     worst(lambda r: abs(r**4 * (horner(c, r * r) - C(mp.mpf(r)**2))) / mp.cos(r), 0, R_TRIG))

# ---- tanh on |x| < atanh(1/2) ------------------------------------------------------------------
A_TANH = mp.atanh(mp.mpf(1) / 2) * mp.mpf("1.0001")
Q = series_or(lambda z: (mp.tanh(mp.sqrt(z)) / mp.sqrt(z) - 1) / z, mp.mpf("1e-30"),
              lambda z: -mp.mpf(1) / 3 + 2 * z / 15)
mid = rn(A_TANH**2 / 2)
const("kTanhPolyCenter", mid, "The center of kTanhPoly's variable.")
c = fit(Q, 0, A_TANH**2, 11, mid)
poly("kTanhPoly", c,
     "tanh: Q(z) = (tanh(x)/x - 1) / z, z = x^2 <= atanh(1/2)^2, in z - kTanhPolyCenter; error\n"
     "// relative to tanh(x).",
     worst(lambda x: abs(x**3 * (horner(c, x * x - mid) - Q(mp.mpf(x)**2))) / mp.tanh(x) if x > 0 else 0,
           0, A_TANH))

# ---- erf on |x| < 1: erf(x) = x (2/sqrt(pi)) + x z P(z) ----------------------------------------
P = series_or(lambda z: (mp.erf(mp.sqrt(z)) / mp.sqrt(z) - C0) / z, mp.mpf("1e-30"),
              lambda z: -C0 / 3 + C0 * z / 10)
mid = rn(mp.mpf(1) / 2)
const("kErfPolyCenter", mid, "The center of kErfPoly's variable.")
c = fit(P, 0, 1, 11, mid)
poly("kErfPoly", c,
     "erf: P(z) = (erf(x)/x - 2/sqrt(pi)) / z, z = x^2 <= 1, in z - 1/2; error relative to erf(x).",
     worst(lambda x: abs(x**3 * (horner(c, x * x - mid) - P(mp.mpf(x)**2))) / mp.erf(x) if x > 0 else 0,
           0, 1))

# ---- erf on 1 <= x < 6: erf(x) = 1 - e^(-x^2) G(x), G(x) = erfc(x) e^(x^2) -------------------
G = lambda x: mp.erfc(x) * mp.exp(x * x)
pieces = [(1, 1.75, 14), (1.75, 2.75, 14), (2.75, 4, 12), (4, 6, 9)]
for k, (a, b, deg) in enumerate(pieces):
    mid = rn((mp.mpf(a) + b) / 2)
    const("kErfcPolyEnd%d" % k, rn(b), "The end of kErfcPoly%d's interval." % k)
    const("kErfcPolyCenter%d" % k, mid, "The center of kErfcPoly%d's variable." % k)
    c = fit(G, a, b, deg, mid)
    poly("kErfcPoly%d" % k, c,
         "erf: G(x) = erfc(x) e^(x^2) on [%g, %g], in x - %g; error relative to erf(x)." % (a, b, mid),
         worst(lambda x: abs((horner(c, x - mid) - G(mp.mpf(x))) * mp.exp(-mp.mpf(x)**2)) / mp.erf(x),
               a, b))

HEAD = """// SPDX-License-Identifier: Apache-2.0
// Generated by f64_math_constants.py (mpmath): do not edit; run the script again.
// The constants and polynomials of the vulkan code generator's float64 math (f64_math.cc).
#ifndef BACKPLANE_PLUGINS_VULKAN_GENERATED_F64_MATH_CONSTANTS_H_
#define BACKPLANE_PLUGINS_VULKAN_GENERATED_F64_MATH_CONSTANTS_H_

namespace backplane {
namespace vulkan {
namespace f64 {

"""
TAIL = """

}  // namespace f64
}  // namespace vulkan
}  // namespace backplane

#endif  // BACKPLANE_PLUGINS_VULKAN_GENERATED_F64_MATH_CONSTANTS_H_
"""
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "f64_math_constants.h")
text = subprocess.run(["clang-format", "--assume-filename=" + path],
                      input=HEAD + "\n\n".join(out) + TAIL, capture_output=True, text=True,
                      check=True, cwd=here).stdout
with open(path, "w") as f:
    f.write(text)
print("wrote " + path, file=sys.stderr)
