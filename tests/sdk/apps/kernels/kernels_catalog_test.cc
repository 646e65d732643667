// SPDX-License-Identifier: Apache-2.0
// The reference kernels and their catalog: every file parses, verifies and round-trips;
// the catalog and the files list the same functions; make_args matches each function's
// params and symbolic shapes; the references are right on cases small enough to check by
// hand; RelativeError and KernelDir behave as catalog.hpp says.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace bir = backplane::ir;
namespace bk = backplane::kernels;

namespace {

const std::vector<std::string> kFiles = {"vector_add.bpir", "saxpy.bpir",  "sum.bpir",
                                         "softmax.bpir",    "matmul.bpir", "transpose.bpir",
                                         "conv2d.bpir"};

bir::IRModule ParseFile(const std::string& file) {
  return bir::Parse(bk::ReadKernelFile(file), file);
}

// The file without its comment lines (the header line stays): what the printer writes.
std::string WithoutComments(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    size_t first = line.find_first_not_of(' ');
    bool comment = first != std::string::npos &&
                   (line.compare(first, 2, "//") == 0 ||
                    (line[first] == '#' && line.rfind("# backplane-ir", 0) != 0));
    if (!comment) out += line + "\n";
  }
  // Comments between functions leave extra blank lines; the printer writes one.
  std::string squeezed;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '\n' && squeezed.size() >= 2 && squeezed[squeezed.size() - 1] == '\n' &&
        squeezed[squeezed.size() - 2] == '\n') {
      continue;
    }
    squeezed += out[i];
  }
  return squeezed;
}

// True if a loop of `s` is bound to a thread axis.
bool HasThreadLoop(const bir::Stmt& s) {
  if (!s) return false;
  switch (s.kind()) {
    case bir::StmtKind::kFor: {
      auto* f = s.As<bir::ForNode>();
      return f->for_kind == bir::ForKind::kThreadBinding || HasThreadLoop(f->body);
    }
    case bir::StmtKind::kIfThenElse: {
      auto* n = s.As<bir::IfThenElseNode>();
      return HasThreadLoop(n->then_case) || HasThreadLoop(n->else_case);
    }
    case bir::StmtKind::kLetStmt:
      return HasThreadLoop(s.As<bir::LetStmtNode>()->body);
    case bir::StmtKind::kAllocate:
      return HasThreadLoop(s.As<bir::AllocateNode>()->body);
    case bir::StmtKind::kSeq:
      for (const bir::Stmt& x : s.As<bir::SeqNode>()->seq) {
        if (HasThreadLoop(x)) return true;
      }
      return false;
    default:
      return false;
  }
}

// Evaluates an integer shape expression over the scalar params' values.
int64_t Eval(const bir::Expr& e, const std::map<std::string, int64_t>& vars) {
  switch (e.kind()) {
    case bir::ExprKind::kIntImm:
      return e.As<bir::IntImmNode>()->value;
    case bir::ExprKind::kVar: {
      auto it = vars.find(e.As<bir::VarNode>()->name);
      if (it == vars.end()) throw std::runtime_error("unknown var " + bir::Print(e));
      return it->second;
    }
    case bir::ExprKind::kBinary: {
      auto* b = e.As<bir::BinaryNode>();
      int64_t x = Eval(b->a, vars), y = Eval(b->b, vars);
      switch (b->op) {
        case bir::BinaryOp::kAdd:
          return x + y;
        case bir::BinaryOp::kSub:
          return x - y;
        case bir::BinaryOp::kMul:
          return x * y;
        case bir::BinaryOp::kDiv:
          return x / y;
        case bir::BinaryOp::kMin:
          return std::min(x, y);
        case bir::BinaryOp::kMax:
          return std::max(x, y);
        default:
          break;
      }
      break;
    }
    default:
      break;
  }
  throw std::runtime_error("cannot evaluate " + bir::Print(e));
}

// ---- The files ------------------------------------------------------------------------------

class KernelFile : public ::testing::TestWithParam<std::string> {};

TEST_P(KernelFile, ParsesVerifiesAndRoundTrips) {
  const std::string text = bk::ReadKernelFile(GetParam());
  EXPECT_EQ(text.rfind("# backplane-ir ", 0), 0u) << "the header line comes first";
  bir::IRModule m = bir::Parse(text, GetParam());
  ASSERT_FALSE(m.functions().empty());
  EXPECT_EQ(bir::VerifyErrors(m), std::vector<std::string>{});
  // The file is written as the printer writes it, so the text form is canonical.
  const std::string printed = bir::Print(m);
  EXPECT_EQ(printed, WithoutComments(text));
  bir::IRModule again = bir::Parse(printed);
  EXPECT_TRUE(bir::StructuralEqual(m, again));
  EXPECT_EQ(bir::Print(again), printed);
}

TEST_P(KernelFile, CpuKernelsVerifyForACpuTarget) {
  bir::IRModule m = ParseFile(GetParam());
  for (const bir::PrimFunc& f : m.functions()) {
    const bk::Case* c = bk::Find(f.name);
    ASSERT_NE(c, nullptr) << f.name;
    EXPECT_EQ(c->needs_threads, HasThreadLoop(f.body)) << f.name;
    EXPECT_EQ(c->needs_threads, f.name.size() > 4 && f.name.substr(f.name.size() - 4) == "_gpu")
        << f.name << ": GPU kernels, and only they, end in _gpu";
    if (c->needs_threads) continue;
    bir::IRModule one;
    one.Add(f);
    bir::VerifyOptions cpu;
    cpu.device_is_cpu = true;
    EXPECT_EQ(bir::VerifyErrors(one, cpu), std::vector<std::string>{}) << f.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelFile, ::testing::ValuesIn(kFiles),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param.substr(0, p.param.find('.'));
                         });

TEST(KernelCatalog, ListsEveryFunctionOfEveryFileOnce) {
  std::set<std::string> in_files, in_catalog, catalog_files;
  for (const std::string& file : kFiles) {
    const bir::IRModule m = ParseFile(file);
    for (const bir::PrimFunc& f : m.functions()) {
      EXPECT_TRUE(in_files.insert(f.name).second) << f.name << " is in two files";
      const bk::Case* c = bk::Find(f.name);
      ASSERT_NE(c, nullptr) << f.name << " has no case";
      EXPECT_EQ(c->file, file) << f.name;
    }
  }
  std::vector<std::string> order;
  for (const bk::Case& c : bk::Catalog()) {
    EXPECT_TRUE(in_catalog.insert(c.func).second) << c.func << " is in the catalog twice";
    catalog_files.insert(c.file);
    order.push_back(c.func);
  }
  EXPECT_EQ(in_files, in_catalog);
  EXPECT_EQ(catalog_files, std::set<std::string>(kFiles.begin(), kFiles.end()));
  // Every .bpir file in the kernel folder is one the catalog knows.
  for (const auto& entry : std::filesystem::directory_iterator(bk::KernelDir())) {
    if (entry.path().extension() == ".bpir") {
      EXPECT_EQ(catalog_files.count(entry.path().filename().string()), 1u) << entry.path();
    }
  }
  // Grouped by file, in each file's order.
  std::vector<std::string> file_order;
  for (const std::string& file : kFiles) {
    const bir::IRModule m = ParseFile(file);
    for (const bir::PrimFunc& f : m.functions()) file_order.push_back(f.name);
  }
  EXPECT_EQ(order, file_order);
  EXPECT_EQ(bk::Find("no_such_kernel"), nullptr);
}

// ---- variants --------------------------------------------------------------------------------

// Every kernel with variants lists itself first as "base" and then GPU functions of the same
// file whose `base` names it, which take the same buffers (names and shapes at the small
// sizes) and compute the same reference; the CUDA variants are chosen for device type cuda
// only.
TEST(KernelCatalog, VariantsComputeTheSameAsTheirBase) {
  int with_variants = 0;
  for (const bk::Case& c : bk::Catalog()) {
    if (c.variants.empty()) continue;
    ++with_variants;
    EXPECT_TRUE(c.base.empty()) << c.func;
    EXPECT_TRUE(c.needs_threads) << c.func;
    ASSERT_GE(c.variants.size(), 2u) << c.func;
    EXPECT_EQ(c.variants[0].name, "base");
    EXPECT_EQ(c.variants[0].func, c.func);
    EXPECT_FALSE(c.variants[0].selects) << c.func;
    std::set<std::string> names;
    for (const bk::Variant& v : c.variants) {
      EXPECT_TRUE(names.insert(v.name).second) << c.func << ": variant " << v.name << " twice";
      EXPECT_FALSE(v.when.empty()) << v.func;
      const bk::Case* vc = bk::Find(v.func);
      ASSERT_NE(vc, nullptr) << v.func;
      EXPECT_EQ(vc->file, c.file) << v.func;
      EXPECT_TRUE(vc->needs_threads) << v.func;
      if (vc != &c) {
        EXPECT_TRUE(vc->variants.empty()) << v.func;
        EXPECT_EQ(vc->base, c.func) << v.func;
        // A device property selects it, or it is taken by name only (and says so).
        EXPECT_TRUE(v.selects || v.when == "by name only") << v.func;
      }
      EXPECT_EQ(bk::VariantName(*vc), v.name);
      // The same buffers, and the same reference outputs from the same inputs.
      std::vector<bk::Arg> want = c.make_args(c.small, 7);
      std::vector<bk::Arg> got = vc->make_args(c.small, 7);
      c.reference(want);
      vc->reference(got);
      std::vector<const bk::Arg*> wb, gb;
      for (const bk::Arg& a : want) {
        if (a.is_buffer) wb.push_back(&a);
      }
      for (const bk::Arg& a : got) {
        if (a.is_buffer) gb.push_back(&a);
      }
      ASSERT_EQ(wb.size(), gb.size()) << v.func;
      for (size_t i = 0; i < wb.size(); ++i) {
        EXPECT_EQ(wb[i]->name, gb[i]->name) << v.func;
        EXPECT_EQ(wb[i]->shape, gb[i]->shape) << v.func;
        EXPECT_EQ(wb[i]->is_output, gb[i]->is_output) << v.func;
        if (wb[i]->is_output) {
          EXPECT_EQ(bk::RelativeError(*gb[i], *wb[i]), 0) << v.func;
        }
      }
    }
  }
  EXPECT_EQ(with_variants, 4);  // vector_add_gpu, sum_gpu, softmax_gpu, matmul_tiled_gpu
}

TEST(KernelCatalog, ChoosesAVariantByTheDevicesProperties) {
  const bk::Case* va = bk::Find("vector_add_gpu");
  const bk::Case* mm = bk::Find("matmul_tiled_gpu");
  ASSERT_NE(va, nullptr);
  ASSERT_NE(mm, nullptr);
  const bk::DeviceTraits cuda{"cuda", "gpu", 32};
  // PoCL and lavapipe as they report themselves here, and a discrete GPU under Vulkan: the base
  // (but lavapipe's matmul, below).
  const bk::DeviceTraits lavapipe{"vulkan", "cpu", 8};
  for (const bk::DeviceTraits& other :
       {bk::DeviceTraits{"opencl", "cpu", 8}, lavapipe, bk::DeviceTraits{"vulkan", "gpu", 32},
        bk::DeviceTraits{"", "", 0}}) {
    EXPECT_EQ(bk::ChooseVariant(*va, other), va) << other.type;
    if (other.type != "vulkan" || other.kind != "cpu") {
      EXPECT_EQ(bk::ChooseVariant(*mm, other), mm) << other.type;
    }
  }
  EXPECT_EQ(bk::ChooseVariant(*va, cuda)->func, "vector_add4_gpu");
  EXPECT_EQ(bk::ChooseVariant(*mm, cuda)->func, "matmul_reg_gpu");
  EXPECT_EQ(bk::ChooseVariant(*mm, lavapipe)->func, "matmul_tiled4_gpu");
  EXPECT_EQ(bk::ChooseVariant(*bk::Find("softmax_gpu"), lavapipe)->func, "softmax_rows_gpu");
  EXPECT_EQ(bk::ChooseVariant(*bk::Find("softmax_gpu"), cuda)->func, "softmax_gpu");
  EXPECT_EQ(bk::ChooseVariant(*bk::Find("sum_gpu"), cuda)->func, "sum4_gpu");
  // A variant's own function, or a kernel without variants: itself on any device.
  const bk::Case* vec4 = bk::Find("vector_add4_gpu");
  EXPECT_EQ(bk::ChooseVariant(*vec4, bk::DeviceTraits{"opencl", "cpu", 8}), vec4);
  const bk::Case* tr = bk::Find("transpose_gpu");
  EXPECT_EQ(bk::ChooseVariant(*tr, cuda), tr);
}

TEST(KernelCatalog, FindsAVariantByItsNameOrFunction) {
  const bk::Case* va = bk::Find("vector_add_gpu");
  const bk::Case* vec4 = bk::Find("vector_add4_gpu");
  EXPECT_EQ(bk::FindVariant(*va, "vec4"), vec4);
  EXPECT_EQ(bk::FindVariant(*va, "vector_add4_gpu"), vec4);
  EXPECT_EQ(bk::FindVariant(*va, "base"), va);
  EXPECT_EQ(bk::FindVariant(*vec4, "base"), va);  // from a variant, among its base's
  EXPECT_EQ(bk::FindVariant(*vec4, "vec4"), vec4);
  EXPECT_EQ(bk::FindVariant(*va, "smem"), nullptr);
  EXPECT_EQ(bk::FindVariant(*bk::Find("matmul_tiled_gpu"), "smem"), bk::Find("matmul_smem_gpu"));
  EXPECT_EQ(bk::FindVariant(*bk::Find("matmul_tiled_gpu"), "reg"), bk::Find("matmul_reg_gpu"));
  // A variant taken by name only (no device selects it) is never chosen, but found.
  EXPECT_EQ(bk::FindVariant(*bk::Find("matmul_reg_gpu"), "smem"), bk::Find("matmul_smem_gpu"));
  EXPECT_EQ(bk::VariantNames(*bk::Find("matmul_tiled_gpu")),
            "base (matmul_tiled_gpu), reg (matmul_reg_gpu), vec4 (matmul_tiled4_gpu), reg16 "
            "(matmul_reg16_gpu), smem (matmul_smem_gpu)");
  EXPECT_EQ(bk::FindVariant(*bk::Find("softmax_gpu"), "rows"), bk::Find("softmax_rows_gpu"));
  const bk::Case* tr = bk::Find("transpose_gpu");  // no variants
  EXPECT_EQ(bk::FindVariant(*tr, "base"), tr);
  EXPECT_EQ(bk::FindVariant(*tr, "transpose_gpu"), tr);
  EXPECT_EQ(bk::FindVariant(*tr, "vec4"), nullptr);
  EXPECT_EQ(bk::VariantNames(*va), "base (vector_add_gpu), vec4 (vector_add4_gpu)");
  EXPECT_EQ(bk::VariantNames(*tr), "base");
  EXPECT_EQ(bk::VariantName(*tr), "base");
  EXPECT_EQ(bk::VariantName(*vec4), "vec4");
}

// ---- make_args ------------------------------------------------------------------------------

class KernelCase : public ::testing::TestWithParam<std::string> {
 protected:
  const bk::Case& TheCase() {
    const bk::Case* c = bk::Find(GetParam());
    if (c == nullptr) throw std::runtime_error("no case " + GetParam());
    return *c;
  }
};

std::vector<std::string> AllFuncs() {
  std::vector<std::string> names;
  for (const bk::Case& c : bk::Catalog()) names.push_back(c.func);
  return names;
}

TEST_P(KernelCase, ArgsFollowTheParams) {
  const bk::Case& c = TheCase();
  const bir::IRModule m = ParseFile(c.file);
  const bir::PrimFunc* f = m.Find(c.func);
  ASSERT_NE(f, nullptr);
  for (const bk::Dims* dims : {&c.small, &c.demo}) {
    SCOPED_TRACE(dims == &c.small ? "small" : "demo");
    std::vector<bk::Arg> args = c.make_args(*dims, 7);
    ASSERT_EQ(args.size(), f->params.size());
    std::map<std::string, int64_t> vars;
    for (size_t i = 0; i < args.size(); ++i) {
      const bir::Param& p = f->params[i];
      const bk::Arg& a = args[i];
      SCOPED_TRACE(a.name);
      EXPECT_EQ(a.is_buffer, p.is_buffer());
      if (!p.is_buffer()) {
        EXPECT_EQ(a.name, p.var().name());
        EXPECT_EQ(a.dtype, p.var().dtype());
        EXPECT_FALSE(a.is_output);
        if (a.dtype.is_integer()) {
          EXPECT_EQ(a.scalar, std::trunc(a.scalar));
          auto it = dims->find(a.name);
          if (a.name == c.block_param && it == dims->end()) {  // threads a block: the default
            EXPECT_EQ(a.scalar, static_cast<double>(bk::kDefaultBlock));
            vars[a.name] = bk::kDefaultBlock;
            continue;
          }
          ASSERT_NE(it, dims->end()) << "an int param that is not in the dims";
          EXPECT_EQ(a.scalar, static_cast<double>(it->second));
          vars[a.name] = it->second;
        } else {
          EXPECT_NE(a.scalar, 0);
          EXPECT_EQ(a.scalar, static_cast<double>(static_cast<float>(a.scalar)));
        }
        continue;
      }
      EXPECT_EQ(a.name, p.buffer().name());
      EXPECT_EQ(a.dtype, p.buffer().dtype());
      std::vector<int64_t> shape;
      for (const bir::Expr& e : p.buffer()->shape) shape.push_back(Eval(e, vars));
      EXPECT_EQ(a.shape, shape);
      size_t count = 1;
      for (int64_t d : shape) count *= static_cast<size_t>(d);
      EXPECT_EQ(a.data.size(), count);
      for (double v : a.data) {
        ASSERT_NE(v, 0) << "inputs and garbage outputs are never zero";
        ASSERT_TRUE(std::isfinite(v));
        ASSERT_EQ(v, static_cast<double>(static_cast<float>(v))) << "float32 values";
      }
    }
    // Every dim is used by some param.
    for (const auto& kv : *dims) EXPECT_EQ(vars.count(kv.first), 1u) << kv.first;
  }
}

TEST_P(KernelCase, SmallSizesAreOdd) {
  const bk::Case& c = TheCase();
  for (const auto& kv : c.small) {
    if (kv.first == "pad") continue;
    if ((c.func == "matmul_tiled4_gpu" && (kv.first == "n" || kv.first == "k")) ||
        (c.func == "softmax_rows_gpu" && kv.first == "cols")) {
      // Their float32x4 code runs only where these are multiples of 4; at other sizes they run
      // matmul_tiled_gpu's and softmax_gpu's code, which those cases run at odd sizes.
      EXPECT_EQ(kv.second % 4, 0) << kv.first;
      continue;
    }
    EXPECT_EQ(kv.second % 2, 1) << kv.first;
  }
  EXPECT_EQ(c.small.size(), c.demo.size());
}

TEST_P(KernelCase, ArgsAreSeededAndMissingDimsComeFromDemo) {
  const bk::Case& c = TheCase();
  std::vector<bk::Arg> a = c.make_args(c.small, 1), b = c.make_args(c.small, 1),
                       d = c.make_args(c.small, 2);
  bool same = true, differ = false;
  for (size_t i = 0; i < a.size(); ++i) {
    same = same && a[i].data == b[i].data && a[i].scalar == b[i].scalar;
    differ = differ || a[i].data != d[i].data;
  }
  EXPECT_TRUE(same);
  EXPECT_TRUE(differ);
  // A dim left out takes the demo value.
  bk::Dims partial = c.small;
  const std::string dropped = partial.begin()->first;
  partial.erase(partial.begin());
  if (c.demo.at(dropped) <= 4096) {  // keep the data small
    for (const bk::Arg& arg : c.make_args(partial, 1)) {
      if (arg.name == dropped) {
        EXPECT_EQ(arg.scalar, static_cast<double>(c.demo.at(dropped)));
      }
    }
  }
}

TEST_P(KernelCase, OutputsDifferFromTheReferenceBeforeItRuns) {
  const bk::Case& c = TheCase();
  std::vector<bk::Arg> args = c.make_args(c.small, 3);
  std::vector<bk::Arg> ref = args;
  c.reference(ref);
  int outputs = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_output) {
      EXPECT_EQ(args[i].data, ref[i].data) << "the reference changed an input";
      continue;
    }
    ++outputs;
    EXPECT_EQ(bk::RelativeError(ref[i], ref[i]), 0);
    EXPECT_GT(bk::RelativeError(args[i], ref[i]), 0.1) << args[i].name;
    for (double v : ref[i].data) ASSERT_TRUE(std::isfinite(v));
  }
  EXPECT_GE(outputs, 1);
  EXPECT_GE(c.tolerance, 0);
  EXPECT_LT(c.tolerance, 1e-3);
  EXPECT_GE(c.flops(args), 0);
  EXPECT_GT(c.bytes(args), 0);
}

INSTANTIATE_TEST_SUITE_P(Kernels, KernelCase, ::testing::ValuesIn(AllFuncs()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// ---- References on cases checked by hand ----------------------------------------------------

// The args of `func` with the given dims, the named buffers' data replaced.
std::vector<bk::Arg> ArgsWith(const std::string& func, const bk::Dims& dims,
                              const std::map<std::string, std::vector<double>>& data) {
  const bk::Case* c = bk::Find(func);
  if (c == nullptr) throw std::runtime_error("no case " + func);
  std::vector<bk::Arg> args = c->make_args(dims, 0);
  for (bk::Arg& a : args) {
    auto it = data.find(a.name);
    if (it == data.end()) continue;
    if (it->second.size() != a.data.size()) throw std::runtime_error("bad size for " + a.name);
    a.data = it->second;
  }
  c->reference(args);
  return args;
}

const bk::Arg& Named(const std::vector<bk::Arg>& args, const std::string& name) {
  for (const bk::Arg& a : args) {
    if (a.name == name) return a;
  }
  throw std::runtime_error("no arg " + name);
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-12) << i;
}

TEST(KernelReference, VectorAddSaxpySum) {
  ExpectNear(
      Named(ArgsWith("vector_add", {{"n", 3}}, {{"a", {1, 2, 3}}, {"b", {10, 20, 30}}}), "c").data,
      {11, 22, 33});
  std::vector<bk::Arg> s = ArgsWith("saxpy", {{"n", 2}}, {{"x", {1, 2}}, {"y", {3, -4}}});
  const double alpha = Named(s, "alpha").scalar;
  EXPECT_GE(std::fabs(alpha), 0.5);
  EXPECT_LE(std::fabs(alpha), 2);
  ExpectNear(Named(s, "y").data, {alpha + 3, 2 * alpha - 4});
  ExpectNear(Named(ArgsWith("sum", {{"n", 4}}, {{"x", {1, 2, 3, -0.5}}}), "out").data, {5.5});
}

TEST(KernelReference, Matmul2x3) {
  // [1 2 3; 4 5 6] * [1 0; 0 1; 1 1] = [4 5; 10 11]
  ExpectNear(Named(ArgsWith("matmul_tiled", {{"m", 2}, {"n", 2}, {"k", 3}},
                            {{"a", {1, 2, 3, 4, 5, 6}}, {"b", {1, 0, 0, 1, 1, 1}}}),
                   "c")
                 .data,
             {4, 5, 10, 11});
}

TEST(KernelReference, Softmax3) {
  // Shifting a row does not change its softmax, even where exp would overflow.
  const double e1 = std::exp(1.0), e2 = std::exp(2.0), s = 1 + e1 + e2;
  const std::vector<double> want = {1 / s, e1 / s, e2 / s, 1.0 / 3, 1.0 / 3, 1.0 / 3};
  ExpectNear(Named(ArgsWith("softmax", {{"rows", 2}, {"cols", 3}},
                            {{"x", {1000, 1001, 1002, -7, -7, -7}}}),
                   "y")
                 .data,
             want);
}

TEST(KernelReference, Transpose2x3) {
  ExpectNear(
      Named(ArgsWith("transpose", {{"m", 2}, {"n", 3}}, {{"a", {1, 2, 3, 4, 5, 6}}}), "b").data,
      {1, 4, 2, 5, 3, 6});
}

TEST(KernelReference, Conv2d3x3Pad1) {
  // One channel, a 3x3 image 1..9, a 3x3 filter of ones, pad 1: each output is the sum of
  // its 3x3 neighbourhood inside the image.
  const bk::Dims dims = {{"batch", 1}, {"c_in", 1}, {"c_out", 1}, {"h", 3},
                         {"w", 3},     {"kh", 3},   {"kw", 3},    {"pad", 1}};
  ExpectNear(
      Named(ArgsWith("conv2d", dims,
                     {{"x", {1, 2, 3, 4, 5, 6, 7, 8, 9}}, {"f", {1, 1, 1, 1, 1, 1, 1, 1, 1}}}),
            "y")
          .data,
      {12, 21, 16, 27, 45, 33, 24, 39, 28});
  // A filter with only its top-left tap set shifts the image down and right by one.
  ExpectNear(
      Named(ArgsWith("conv2d_gpu", dims,
                     {{"x", {1, 2, 3, 4, 5, 6, 7, 8, 9}}, {"f", {1, 0, 0, 0, 0, 0, 0, 0, 0}}}),
            "y")
          .data,
      {0, 0, 0, 0, 1, 2, 0, 4, 5});
  // Two input channels add, two output channels are separate; the second takes twice the
  // first channel.
  const bk::Dims dims2 = {{"batch", 1}, {"c_in", 2}, {"c_out", 2}, {"h", 1},
                          {"w", 2},     {"kh", 1},   {"kw", 1},    {"pad", 0}};
  ExpectNear(
      Named(ArgsWith("conv2d", dims2, {{"x", {1, 2, 10, 20}}, {"f", {1, 1, 2, 0}}}), "y").data,
      {11, 22, 2, 4});
}

TEST(KernelReference, FlopsAndBytes) {
  const bk::Case* mm = bk::Find("matmul");
  std::vector<bk::Arg> args = mm->make_args({{"m", 3}, {"n", 5}, {"k", 7}}, 0);
  EXPECT_EQ(mm->flops(args), 2.0 * 3 * 5 * 7);
  EXPECT_EQ(mm->bytes(args), 4.0 * (3 * 7 + 7 * 5 + 3 * 5));
  const bk::Case* sx = bk::Find("saxpy_gpu");
  args = sx->make_args({{"n", 10}}, 0);
  EXPECT_EQ(sx->flops(args), 0);
  EXPECT_EQ(sx->bytes(args), 4.0 * 30);
  const bk::Case* cv = bk::Find("conv2d");
  args = cv->make_args(cv->small, 0);
  EXPECT_EQ(cv->flops(args), 2.0 * 3 * 5 * 19 * 21 * 3 * 3 * 5);
}

// ---- RelativeError --------------------------------------------------------------------------

bk::Arg Buf(std::vector<double> data, std::vector<int64_t> shape = {}) {
  bk::Arg a;
  a.name = "t";
  a.is_buffer = true;
  a.dtype = bir::Float32();
  a.shape = shape.empty() ? std::vector<int64_t>{static_cast<int64_t>(data.size())} : shape;
  a.data = std::move(data);
  return a;
}

TEST(KernelRelativeError, MaxErrorOverMaxReference) {
  EXPECT_EQ(bk::RelativeError(Buf({1, 2, 3}), Buf({1, 2, 3})), 0);
  EXPECT_DOUBLE_EQ(bk::RelativeError(Buf({1, 2.5, -4}), Buf({1, 2, -4})), 0.5 / 4);
  EXPECT_DOUBLE_EQ(bk::RelativeError(Buf({1, 2, 3.3}), Buf({1, 2, 3})), 0.3 / 3);
  // An all-zero reference: the error is absolute over 1e-30.
  EXPECT_EQ(bk::RelativeError(Buf({0, 0}), Buf({0, 0})), 0);
  EXPECT_GT(bk::RelativeError(Buf({0, 1e-20}), Buf({0, 0})), 1e9);
  EXPECT_EQ(bk::RelativeError(Buf({}), Buf({})), 0);
}

TEST(KernelRelativeError, NaNAndInfinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(bk::RelativeError(Buf({1, nan}), Buf({1, 2})), inf);
  EXPECT_EQ(bk::RelativeError(Buf({nan, 2}), Buf({1, 2})), inf);
  EXPECT_EQ(bk::RelativeError(Buf({1, nan}), Buf({1, nan})), 0) << "NaN in both is skipped";
  EXPECT_EQ(bk::RelativeError(Buf({1, 5}), Buf({1, nan})), inf);
  EXPECT_EQ(bk::RelativeError(Buf({1, inf}), Buf({1, 2})), inf);
  EXPECT_EQ(bk::RelativeError(Buf({1, inf}), Buf({1, inf})), 0);
  EXPECT_EQ(bk::RelativeError(Buf({1, -inf}), Buf({1, inf})), inf);
}

TEST(KernelRelativeError, ShapesMustMatch) {
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(bk::RelativeError(Buf({1, 2, 3}), Buf({1, 2})), inf);
  EXPECT_EQ(bk::RelativeError(Buf({1, 2, 3, 4}, {2, 2}), Buf({1, 2, 3, 4}, {4})), inf);
  EXPECT_EQ(bk::RelativeError(Buf({1, 2, 3, 4}, {2, 2}), Buf({1, 2, 3, 4}, {1, 4})), inf);
  bk::Arg scalar;
  scalar.scalar = 2;
  EXPECT_EQ(bk::RelativeError(scalar, Buf({2})), inf);
  bk::Arg other = scalar;
  other.scalar = 2.5;
  EXPECT_DOUBLE_EQ(bk::RelativeError(other, scalar), 0.25);
}

// ---- KernelDir ------------------------------------------------------------------------------

class EnvVar {
 public:
  EnvVar(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv(name, value, 1);
  }
  ~EnvVar() {
    if (had_) {
      setenv(name_.c_str(), old_.c_str(), 1);
    } else {
      unsetenv(name_.c_str());
    }
  }

 private:
  std::string name_, old_;
  bool had_ = false;
};

TEST(KernelDir, TheBuildTreeHasTheFilesBesideBin) {
  // Test programs run from <build>/bin, and the build copies the files to
  // <build>/share/backplane/kernels.
  const char* env = getenv("BACKPLANE_KERNEL_DIR");
  if (env != nullptr && *env != '\0') GTEST_SKIP() << "BACKPLANE_KERNEL_DIR is set";
  std::filesystem::path dir = bk::KernelDir();
  EXPECT_EQ(dir.filename(), "kernels");
  EXPECT_EQ(dir.parent_path().filename(), "backplane");
  EXPECT_EQ(dir.parent_path().parent_path().filename(), "share");
  for (const std::string& file : kFiles) EXPECT_TRUE(std::filesystem::exists(dir / file)) << file;
}

TEST(KernelDir, TheVariableWins) {
  const std::string tmp = ::testing::TempDir() + "bp_kernels_test_dir";
  std::filesystem::create_directories(tmp);
  {
    EnvVar v("BACKPLANE_KERNEL_DIR", (tmp + "/").c_str());
    EXPECT_EQ(bk::KernelDir(), tmp);
    try {
      bk::ReadKernelFile("matmul.bpir");
      ADD_FAILURE() << "read a file that is not there";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(tmp + "/matmul.bpir"), std::string::npos) << e.what();
    }
  }
  {
    EnvVar v("BACKPLANE_KERNEL_DIR", "");
    EXPECT_NE(bk::KernelDir(), "") << "an empty variable is ignored";
    EXPECT_NO_THROW(bk::ReadKernelFile("matmul.bpir"));
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
