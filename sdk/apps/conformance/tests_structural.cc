// SPDX-License-Identifier: Apache-2.0
// The structural construct clauses (docs/conformance.md, "Construct clauses"): loops of every
// kind, shared memory with a barrier, the atomics on global and shared memory, and contiguous
// vector accesses through views, each a kernel of its own run on the device and compared with
// the IR interpreter bit for bit.
#include <backplane/ir/ir.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/check.hpp>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "conformance.h"
#include "constructs.h"
#include "device_util.h"

namespace backplane {
namespace conformance {
namespace constructs {
namespace {

// Random float32 elements that are multiples of 1/8 in [-4, 4): sums of them are exact in any
// order, so atomic float adds compare bit for bit.
std::vector<uint8_t> EighthsF32(uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(kElements * 4);
  for (int64_t k = 0; k < kElements; ++k) {
    const float v = static_cast<float>(static_cast<int>(rng() % 64) - 32) * 0.125f;
    std::memcpy(bytes.data() + k * 4, &v, 4);
  }
  return bytes;
}

// A kernel of its own: its params, its body per element i (both forms), and whether it runs
// only on one form ("cpu", "gpu" or "").
struct Structural {
  std::string name;
  std::string what;
  std::string params;
  std::string body;      // per element i
  std::string only;      // "cpu": CPU code only; "gpu": GPU code only
  std::string cpu_loop;  // the CPU form's loop over i ("" : serial)
  std::string gpu_text;  // a whole GPU kernel instead of the per-element body ("": none)
  // What each buffer holds: 'a' normal float32 values in [-8, 8], 'x' float32 multiples of
  // 1/8 (EighthsF32), 'k' int32 in [-1000, 1000], '0' zeros of `dtype` (atomic min and max
  // start from zero too), 'n' an int32 scalar whose value is `count`.
  struct Spec {
    std::string name;
    char fill;
    std::string dtype = "float32";
    int64_t count = kElements;
  };
  std::vector<Spec> buffers;
};

const std::vector<Structural>& Structurals() {
  const std::string n = std::to_string(kElements);
  static const std::vector<Structural> kAll = {
      {"loop.down",
       "a serial loop downward (a step of -1) with a var and compound assignment",
       "a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "var s: float32 = 0.0\n      for j in serial(7, 8, -1) {\n"
       "        s += a[floormod(i + j * 5, " +
           n + ")] * 0.75\n      }\n      c[i] = s",
       "",
       "",
       "",
       {{"a", 'a'}, {"c", '0'}}},
      {"loop.step",
       "a serial loop with a step of 3 and an int64 loop with a large step",
       "a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "var s: float32 = 1.0\n      for j in serial(1, 5, 3) {\n"
       "        s = s * 0.5 + a[floormod(i + j, " +
           n +
           ")]\n      }\n"
           "      var w: int64 = 0\n      for q: int64 in serial(0, 3, 3000000000) {\n"
           "        w += q / 1000000000\n      }\n      c[i] = s + float32(w)",
       "",
       "",
       "",
       {{"a", 'a'}, {"c", '0'}}},
      {"loop.range",
       "loops by their end, C's for (j = 2; j < 7; ++j) and for (k = 9; k > 0; k -= 3), "
       "written serial(2 .. 7) and serial(9 .. 0, -3)",
       "a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "var s: float32 = 0.0\n      for j in serial(2 .. 7) {\n"
       "        s += a[floormod(i + j, " +
           n +
           ")]\n      }\n"
           "      for k in serial(9 .. 0, -3) {\n"
           "        s = s * 0.5 + a[floormod(i * 3 + k, " +
           n + ")]\n      }\n      c[i] = s",
       "",
       "",
       "",
       {{"a", 'a'}, {"c", '0'}}},
      {"literal.int_as_float",
       "integer literals where a float is wanted: the float they are exactly (y[i] = 0, "
       "1 - a*a, max(x, 0), a float let = 2, x < -7, x / 1024)",
       "a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "let w: float32 = 2\n"
       "      c[i] = 1 - a[i] * a[i] + max(a[i], 0) * w + a[i] / 1024\n"
       "      if (a[i] < -7) {\n        c[i] = 0\n      }",
       "",
       "",
       "",
       {{"a", 'a'}, {"c", '0'}}},
      {"loop.unrolled",
       "an unrolled loop",
       "a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "var s: float32 = 0.0\n      for j in unrolled(0, 4) {\n"
       "        s = s * 0.5 + a[floormod(i + j * 3, " +
           n + ")]\n      }\n      c[i] = s",
       "",
       "",
       "",
       {{"a", 'a'}, {"c", '0'}}},
      {"loop.parallel",
       "a parallel loop with a dynamic schedule (CPU code)",
       "a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "var s: float32 = a[i]\n      for j in serial(0, floormod(i, 9)) {\n"
       "        s *= 1.0625\n      }\n      c[i] = s",
       "cpu",
       "parallel(0, " + n + ") schedule(dynamic, 7)",
       "",
       {{"a", 'a'}, {"c", '0'}}},
      {"bool.logic",
       "bool values: comparisons, && || ! and == != on bools, a bool select, a bool var, and "
       "casts between bool and int32 and float32 (nonzero is true, true is 1)",
       "a: buffer<float32>[" + n + "], k: buffer<int32>[" + n + "], c: buffer<float32>[" + n + "]",
       "let p: bool = a[i] > 0.0\n"
       "      let q: bool = a[floormod(i + 1, " +
           n +
           ")] <= a[i]\n"
           "      var r: bool = (p && !q) || (q && k[i] > 0)\n"
           "      r = r != (p == bool(floormod(k[i], 3)))\n"
           "      let w: int32 = int32(r) + int32(bool(k[i] - 7)) * 2\n"
           "      c[i] = select(r, a[i], -a[i]) + float32(w) * 4.0 + float32(!q)",
       "",
       "",
       "",
       {{"a", 'a'}, {"k", 'k'}, {"c", '0'}}},
      {"vector.lanes",
       "vectors of 4 lanes: loads and stores with a ramp index (unit and stride 2), a "
       "broadcast, elementwise arithmetic, a comparison and select on lanes, and a cast",
       "a: buffer<float32>[" + n + "], k: buffer<int32>[" + n + "], c: buffer<float32>[" + n + "]",
       "if (i < " + std::to_string(kElements / 8) +
           ") {\n"
           "        let v: float32x4 = a[ramp(i * 4, 1, 4)] * broadcast(0.75, 4)\n"
           "        let u: float32x4 = a[ramp(i * 8 + 1, 2, 4)]\n"
           "        let w: float32x4 = select(v < u, v - u, u * v) + float32x4(k[ramp(i * 4, 1, "
           "4)])\n"
           "        c[ramp(i * 4, 1, 4)] = w\n"
           "        c[ramp(" +
           n + " - 4 - i * 4, 1, 4)] = v + broadcast(a[i], 4)\n      }",
       "",
       "",
       "",
       {{"a", 'a'}, {"k", 'k'}, {"c", '0'}}},
      {"vector.unaligned_index",
       "contiguous vector loads and stores whose first index is not a multiple of the lanes "
       "(float32x4, float32x2, int32x4 at odd indices), with elementwise + - * on them",
       "a: buffer<float32>[" + n + "], k: buffer<int32>[" + n + "], c: buffer<float32>[" + n +
           "], q: buffer<int32>[" + n + "]",
       "if (i < " + std::to_string(kElements / 8) +
           ") {\n"
           "        let u: float32x4 = a[ramp(i * 8 + 3, 1, 4)]\n"
           "        let v: float32x4 = a[ramp(i * 8 + 1, 1, 4)]\n"
           "        c[ramp(i * 8 + 1, 1, 4)] = u * v + v - broadcast(0.25, 4)\n"
           "        c[ramp(i * 8 + 5, 1, 2)] = a[ramp(i * 8 + 2, 1, 2)] * a[ramp(i * 8 + 6, 1, "
           "2)]\n"
           "        q[ramp(i * 8 + 3, 1, 4)] = k[ramp(i * 8 + 1, 1, 4)] * k[ramp(i * 8 + 2, 1, 4)] "
           "- "
           "k[ramp(i * 8 + 3, 1, 4)]\n      }",
       "",
       "",
       "",
       {{"a", 'a'}, {"k", 'k'}, {"c", '0'}, {"q", '0', "int32"}}},
      {"select.guarded",
       "a scalar select evaluates only the arm it chooses (docs/ir.md): a load past the end of a "
       "buffer and a division by zero in the arm not taken never happen",
       "x: buffer<float32>[300], k: buffer<int32>[" + n + "], c: buffer<float32>[" + n +
           "], q: buffer<int32>[" + n + "]",
       "c[i] = select(i < 300, x[i], -1.0) + select(i >= 300, 0.5, x[floormod(i, 300)])\n"
       "      let d: int32 = floormod(k[i], 5)\n"
       "      q[i] = select(d == 0, 7, 1000 / d) + select(k[i] < 0 || k[i] >= 300, -1, "
       "int32(x[max(k[i], 0)]))",
       "",
       "",
       "",
       {{"x", 'a', "float32", 300}, {"k", 'k'}, {"c", '0'}, {"q", '0', "int32"}}},
      {"shared.barrier",
       "shared memory written by every thread of a block, a barrier, then read "
       "by other threads (GPU code)",
       "a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "",
       "gpu",
       "",
       "  for bx in thread(blockIdx.x, 0, " + std::to_string(kElements / 64) +
           ") {\n"
           "    for tx in thread(threadIdx.x, 0, 64) {\n"
           "      alloc sh: float32[64] shared\n"
           "      sh[tx] = a[bx * 64 + tx]\n"
           "      barrier\n"
           "      c[bx * 64 + tx] = sh[63 - tx] - sh[floormod(tx + 1, 64)]\n"
           "    }\n  }\n",
       {{"a", 'a'}, {"c", '0'}}},
      {"shared.sized_at_launch",
       "shared memory sized by a scalar argument of the call, w x 64 elements a block "
       "(docs/ir.md, \"Shared memory sized at launch\"; GPU code)",
       "w: int32, a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "",
       "gpu",
       "",
       "  for bx in thread(blockIdx.x, 0, " + std::to_string(kElements / 64) +
           ") {\n"
           "    for tx in thread(threadIdx.x, 0, 64) {\n"
           "      alloc sh: float32[w, 64] shared\n"
           "      for r in serial(0, w) {\n"
           "        sh[r, tx] = a[bx * 64 + tx] * float32(r + 1)\n"
           "      }\n"
           "      barrier\n"
           "      var s: float32 = 0.0\n"
           "      for r2 in serial(0, w) {\n"
           "        s += sh[r2, 63 - tx]\n"
           "      }\n"
           "      c[bx * 64 + tx] = s\n"
           "    }\n  }\n",
       {{"w", 'n', "int32", 5}, {"a", 'a'}, {"c", '0'}}},
      {"local.sized_at_run_time",
       "a local array sized by a scalar argument, w + 1 elements a thread, zero-filled where it "
       "is allocated (docs/ir.md, \"Local arrays sized at run time\"; GPU code)",
       "w: int32, a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "",
       "gpu",
       "",
       "  for bx in thread(blockIdx.x, 0, " + std::to_string(kElements / 64) +
           ") {\n"
           "    for tx in thread(threadIdx.x, 0, 64) {\n"
           "      alloc p: float32[w + 1] local\n"
           "      for r in serial(0, w) {\n"
           "        p[r] = a[floormod(bx * 64 + tx + r * 7, " +
           n +
           ")] * float32(r + 1)\n"
           "      }\n"
           "      var s: float32 = p[w]\n"
           "      for r2 in serial(0, w) {\n"
           "        s = s * 0.5 + p[w - 1 - r2]\n"
           "      }\n"
           "      c[bx * 64 + tx] = s\n"
           "    }\n  }\n",
       {{"w", 'n', "int32", 5}, {"a", 'a'}, {"c", '0'}}},
      {"workspace.across_kernels",
       "a global allocation of host code that two kernels share: the first writes it, the "
       "second reads what other blocks of the first wrote (docs/ir.md, \"Device workspaces\"; "
       "GPU code)",
       "a: buffer<float32>[" + n + "], c: buffer<float32>[" + n + "]",
       "",
       "gpu",
       "",
       "  alloc ws: float32[" + n +
           "] global\n"
           "  for bx in thread(blockIdx.x, 0, " +
           std::to_string(kElements / 64) +
           ") {\n"
           "    for tx in thread(threadIdx.x, 0, 64) {\n"
           "      ws[bx * 64 + tx] = a[bx * 64 + tx] * 0.75\n"
           "    }\n  }\n"
           "  for by in thread(blockIdx.x, 0, " +
           std::to_string(kElements / 64) +
           ") {\n"
           "    for ty in thread(threadIdx.x, 0, 64) {\n"
           "      c[by * 64 + ty] = ws[" +
           std::to_string(kElements - 1) +
           " - (by * 64 + ty)] - ws[by * 64 + ty]\n"
           "    }\n  }\n",
       {{"a", 'a'}, {"c", '0'}}},
  };
  return kAll;
}

// The atomics: op x dtype, accumulating 512 values into 16 elements from every thread.
Structural Atomic(const std::string& op, const std::string& dtype) {
  const std::string n = std::to_string(kElements);
  const std::string value = dtype == "int32"     ? "k[i]"
                            : dtype == "int64"   ? "int64(k[i]) * 3000000i64"
                            : dtype == "float64" ? "float64(k[i]) * 4096"
                                                 : "x[i]";
  Structural s;
  s.name = "atomic." + op + "." + dtype;
  s.what = "atomic_" + op + " on " + dtype +
           " from every thread (or parallel iteration) into 16 "
           "elements of a param buffer";
  s.params =
      "k: buffer<int32>[" + n + "], x: buffer<float32>[" + n + "], h: buffer<" + dtype + ">[16]";
  s.body = "atomic_" + op + "(h[floormod(k[i], 16)], " + value + ")";
  s.cpu_loop = "parallel(0, " + n + ")";
  s.buffers = {{"k", 'k'}, {"x", 'x'}, {"h", '0', dtype, 16}};
  return s;
}

// The same on shared memory (GPU code): each block accumulates its 64 values into 16 shared
// elements, zeroed first, then adds them into `h` with the same atomic on the param buffer.
Structural SharedAtomic(const std::string& op, const std::string& dtype) {
  Structural s = Atomic(op, dtype);
  const std::string zero = dtype == "int32" ? "0" : dtype == "int64" ? "0i64" : "0.0";
  const std::string value = dtype == "int32"     ? "k[i]"
                            : dtype == "int64"   ? "int64(k[i]) * 3000000i64"
                            : dtype == "float64" ? "float64(k[i]) * 4096"
                                                 : "x[i]";
  s.name = "atomic.shared." + op + "." + dtype;
  s.what = "atomic_" + op + " on " + dtype +
           " from every thread of a block into 16 elements of a shared array, then into a "
           "param buffer";
  s.only = "gpu";
  s.gpu_text = "  for bx in thread(blockIdx.x, 0, " + std::to_string(kElements / 64) +
               ") {\n"
               "    for tx in thread(threadIdx.x, 0, 64) {\n"
               "      alloc sa: " +
               dtype +
               "[16] shared\n"
               "      if (tx < 16) {\n"
               "        sa[tx] = " +
               zero +
               "\n"
               "      }\n"
               "      barrier\n"
               "      let i: int32 = bx * 64 + tx\n"
               "      atomic_" +
               op + "(sa[floormod(k[i], 16)], " + value +
               ")\n"
               "      barrier\n"
               "      if (tx < 16) {\n"
               "        atomic_" +
               op +
               "(h[tx], sa[tx])\n"
               "      }\n"
               "    }\n"
               "  }\n";
  return s;
}

void RunStructural(Context& ctx, const Structural& st, const std::string& clause,
                   int64_t view_shift = 0) {
  ctx.Load();
  ctx.SetUpDevice();
  const bool gpu = !RunsCpuCode(ctx.dev);
  if (st.only == "cpu" && gpu) Skip("a CPU construct; this device runs GPU code");
  if (st.only == "gpu" && !gpu) Skip("a GPU construct; this device runs CPU code");
  const uint64_t seed = SeedOf(clause);
  std::vector<runner::CheckArg> args;
  for (const Structural::Spec& b : st.buffers) {
    switch (b.fill) {
      case 'a': {  // normal values: these clauses check the construct, not subnormals
        std::vector<uint8_t> bytes = DomainElements(ir::Float(32), -8, 8, false, seed);
        bytes.resize(static_cast<size_t>(b.count) * 4);
        args.push_back(Buffer(b.name, "float32", std::move(bytes)));
        break;
      }
      case 'x':
        args.push_back(Buffer(b.name, "float32", EighthsF32(seed + 1)));
        break;
      case 'k':
        args.push_back(Buffer(b.name, "int32", SmallI32(seed + 2)));
        break;
      case 'n': {  // an int32 scalar: `count`
        runner::CheckArg scalar;
        scalar.name = b.name;
        scalar.dtype = ir::Int32();
        scalar.i = b.count;
        args.push_back(scalar);
        break;
      }
      default:
        args.push_back(Filled(b.name, b.dtype, static_cast<size_t>(b.count), 0));
    }
  }
  auto text_for = [&](bool g) {
    if (g && !st.gpu_text.empty())
      return "func construct(" + st.params + ") {\n" + st.gpu_text + "}\n";
    if (g || st.cpu_loop.empty()) return KernelText(st.params, st.body, g);
    return "func construct(" + st.params + ") {\n  for i in " + st.cpu_loop + " {\n    " + st.body +
           "\n  }\n}\n";
  };
  // Atomics beyond int32 are device features (vulkan: int64 and float atomics); vector types
  // are a code generator's (one that writes scalar code only refuses them, naming the type).
  const bool optional =
      (st.name.rfind("atomic.", 0) == 0 && st.name.find(".int32") == std::string::npos) ||
      st.name.rfind("vector.", 0) == 0;
  RunExact(ctx, clause, text_for, args, optional, {}, view_shift);
}

// Contiguous vector accesses at indices that are multiples of the lanes (a code generator's
// aligned fast path) through views that start `shift` elements into their tensors: with one
// element (4 bytes) no float32x2 or float32x4 access is aligned, with two (8 bytes) the x2 ones
// are and the x4 ones are not. Every result must be the interpreter's, and nothing before a
// view may be written.
Structural VectorViews() {
  const std::string n = std::to_string(kElements);
  return {"vector.view_offset",
          "",
          "a: buffer<float32>[" + n + "], k: buffer<int32>[" + n + "], c: buffer<float32>[" + n +
              "], e: buffer<float32>[" + n + "], q: buffer<int32>[" + n + "]",
          "if (i < " + std::to_string(kElements / 4) +
              ") {\n"
              "        c[ramp(i * 4, 1, 4)] = a[ramp(i * 4, 1, 4)] * a[ramp(i * 4, 1, 4)] - "
              "broadcast(0.5, 4)\n"
              "        e[ramp(i * 4, 1, 2)] = a[ramp(i * 4 + 2, 1, 2)] + broadcast(1.5, 2)\n"
              "        e[ramp(i * 4 + 2, 1, 2)] = a[ramp(i * 4, 1, 2)] * broadcast(3.0, 2)\n"
              "        q[ramp(i * 4, 1, 4)] = k[ramp(i * 4, 1, 4)] + k[ramp(i * 4, 1, 4)] * "
              "broadcast(3, 4)\n      }",
          "",
          "",
          "",
          {{"a", 'a'}, {"k", 'k'}, {"c", '0'}, {"e", '0'}, {"q", '0', "int32"}}};
}

}  // namespace

void AddStructuralTests(std::vector<TestCase>* out, unsigned needs) {
  for (const Structural& st : Structurals()) {
    const std::string name = "codegen.construct." + st.name;
    out->push_back({name, st.what + " runs as the IR interpreter runs it, bit for bit", "", needs,
                    [st, name](Context& ctx) { RunStructural(ctx, st, name); }});
  }
  for (int64_t shift : {1, 2}) {
    const std::string name =
        "codegen.construct.vector.view_offset." + std::to_string(shift * 4) + "_bytes";
    out->push_back(
        {name,
         "contiguous float32x4, float32x2 and int32x4 loads and stores at indices that are "
         "multiples of the lanes, through views " +
             std::to_string(shift * 4) +
             " bytes into their tensors (byte_offset), run as the IR interpreter runs them, bit "
             "for bit, and write nothing before a view (a code generator's aligned fast path "
             "must check the address; a device or code generator without vector types skips)",
         "", needs,
         [shift, name](Context& ctx) { RunStructural(ctx, VectorViews(), name, shift); }});
  }
  for (const char* op : {"add", "min", "max"}) {
    for (const char* dtype : {"int32", "int64", "float32", "float64"}) {
      for (const Structural& st : {Atomic(op, dtype), SharedAtomic(op, dtype)}) {
        const std::string name = "codegen.construct." + st.name;
        out->push_back({name,
                        st.what + " accumulates as the IR says (any order: the sums are "
                                  "exact), bit for bit",
                        "", needs, [st, name](Context& ctx) { RunStructural(ctx, st, name); }});
      }
    }
  }
}

}  // namespace constructs
}  // namespace conformance
}  // namespace backplane
