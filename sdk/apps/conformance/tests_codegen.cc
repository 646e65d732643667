// SPDX-License-Identifier: Apache-2.0
// Code generation (the code-generator contract, docs/codegen-guide.md): every reference kernel
// of the catalog builds for the plugin's target (Target::FromDevice), runs on its device and
// matches the float64 reference and the IR interpreter on the same inputs; every function is
// found by name; modules save, load back and run; generated code runs on the stream SetStream
// made active.
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <backplane/runner/check.hpp>
#include <backplane/runner/runner.hpp>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "conformance.h"
#include "device_util.h"

namespace backplane {
namespace conformance {

namespace {

bool GpuDevice(const Context& ctx) { return !RunsCpuCode(ctx.dev); }

// The same Target with bounds checks on (docs/codegen-guide.md, "The error channel"), or
// nothing when the kind declares no `bounds-check` attribute (a third party's kind may not).
std::optional<Target> BoundsChecked(const Target& t) {
  nlohmann::json j = nlohmann::json::parse(t.ToJson());
  if (!j.contains("bounds-check")) return std::nullopt;
  j["bounds-check"] = true;
  return Target::Parse(j.dump());
}

// A refusal of a kernel newer than the code generator reads skips (SkipIfRefused).
Module BuildFor(const std::string& ir, const Target& target, const std::string& what) {
  try {
    return Build(ir, target);
  } catch (const Error& e) {
    SkipIfRefused(e, "building " + what + " for Target " + target.ToJson());
    Fail("building " + what + " for Target " + target.ToJson() + " failed: " + e.what());
  }
}

const kernels::Case& FamilyCase(const Context& ctx, const std::string& cpu_name) {
  const kernels::Case* c = kernels::Find(GpuDevice(ctx) ? cpu_name + "_gpu" : cpu_name);
  if (c == nullptr) Fail("the kernel catalog has no " + cpu_name);
  return *c;
}

// The case's function run on the device and on the IR interpreter (the IR as written, not
// what the module says it holds), on the same inputs at the case's small sizes; every
// buffer compared with the tolerance by dtype (runner/check.hpp). Returns the largest
// error as a fraction of the tolerance.
double MatchesInterpreter(const kernels::Case& c, const Module& m, const Context& ctx,
                          const std::string& what) {
  std::map<std::string, std::string> values;
  for (const auto& [name, v] : runner::DimsForDevice(c, Device(ctx.dev), c.small)) {
    values[name] = std::to_string(v);
  }
  try {
    const runner::Oracle oracle(ir::Parse(runner::KernelSource(c), c.file));
    const std::vector<runner::CheckArg> args =
        runner::MakeCheckArgs(oracle.Function(c.func), values, 7);
    const runner::CheckResult r = runner::RunChecked(m, oracle, c.func, Device(ctx.dev), args);
    if (!r.ok) {
      Fail(what + " ran on " + DeviceString(ctx.dev) +
           " and did not match the IR interpreter: " + r.error);
    }
    return r.max_ratio;
  } catch (const Error& e) {
    Fail(what + ": checking against the IR interpreter failed: " + e.what());
  }
}

void RunChecked(const kernels::Case& c, const Module& m, const Context& ctx,
                const std::string& what) {
  const runner::Result r = runner::RunCase(c, m, Device(ctx.dev), c.small, 1);
  if (!r.ok) Fail(what + " ran on " + DeviceString(ctx.dev) + " and failed: " + r.error);
  MatchesInterpreter(c, m, ctx, what);
}

void Kernel(Context& ctx, const std::string& func) {
  const std::vector<std::string> kinds = SetUpKinds(ctx);
  const kernels::Case* c = kernels::Find(func);
  if (c == nullptr) Fail("the kernel catalog has no " + func);
  if (c->needs_threads != GpuDevice(ctx)) {
    Skip(std::string(c->needs_threads ? "a GPU kernel" : "a CPU kernel") +
         "; code generators for " + DeviceTypeName(ctx.dev.device_type) + " get " +
         (GpuDevice(ctx) ? "GPU" : "CPU") + " kernels");
  }
  for (const std::string& kind : kinds) {
    const Target t = TargetFor(ctx, kind);
    const Module m = BuildFor(runner::KernelSource(*c), t, func + " (" + c->file + ")");
    const runner::Result r = runner::RunCase(*c, m, Device(ctx.dev), c->small, 1);
    if (!r.ok) {
      // An error (a launch or a copy that failed) is not a wrong result: say which it was.
      Fail(func + " built by target.build." + kind + " ran on " + DeviceString(ctx.dev) +
           (r.max_error > c->tolerance ? " and did not match the float64 reference: "
                                       : " and failed: ") +
           r.error);
    }
    const double ratio = MatchesInterpreter(*c, m, ctx, func + " built by target.build." + kind);
    // The bounds-checked build runs the same inputs: an access out of bounds that the
    // unchecked build survived by chance is an error naming the buffer and the index here.
    if (const std::optional<Target> checked = BoundsChecked(t)) {
      const Module mc =
          BuildFor(runner::KernelSource(*c), *checked, func + " (" + c->file + ", -bounds-check)");
      MatchesInterpreter(*c, mc, ctx, func + " built by target.build." + kind + " -bounds-check");
    } else {
      ctx.Detail(kind + ": the target kind has no bounds-check attribute; checked build skipped");
    }
    char err[160];
    std::snprintf(err, sizeof(err),
                  "%.3g (tolerance %g); vs the IR interpreter: largest error %.2g of the "
                  "tolerance",
                  r.max_error, c->tolerance, ratio);
    ctx.Detail(kind + ": relative error " + err);
  }
}

// Every module of a tree, the root first.
void Walk(const Module& m, const std::function<void(const Module&)>& visit) {
  visit(m);
  for (const Module& i : m.Imports()) Walk(i, visit);
}

void FunctionByName(Context& ctx) {
  const std::vector<std::string> kinds = SetUpKinds(ctx);
  const kernels::Case& a = FamilyCase(ctx, "vector_add");
  const kernels::Case& b = FamilyCase(ctx, "saxpy");
  ir::IRModule both;
  for (const kernels::Case* c : {&a, &b}) {
    ir::IRModule one = ir::Parse(runner::KernelSource(*c), c->file);
    both.Add(one.functions().front());
  }
  const std::string text = ir::Print(both);
  for (const std::string& kind : kinds) {
    const Module m =
        BuildFor(text, TargetFor(ctx, kind), a.func + " and " + b.func + " in one IRModule");
    for (const kernels::Case* c : {&a, &b}) {
      RunChecked(*c, m, ctx, c->func + ", found by name in a module of two functions,");
    }
    bp_object_t* f = nullptr;
    bp_status_t st = bp_module_get_function(m.object().get(), "no_such_function", 1, &f);
    if (st != BP_ERR_NOT_FOUND) {
      if (f != nullptr) bp_object_release(f);
      Fail("looking up 'no_such_function' in the module gave " +
           std::string(st == BP_OK ? "a function" : TakeError(st)) +
           " instead of BP_ERR_NOT_FOUND");
    }
    bp_error_clear();
    // The modules the code generator made (the core's ir_host module holds host code).
    Walk(m, [&](const Module& mod) {
      const std::string mk = mod.Kind();
      if (mk == "ir_host") return;
      const std::vector<std::string> names = mod.ListFunctions();
      if (names.empty())
        Fail("the " + mk + " module made by target.build." + kind + " lists no function");
      for (const std::string& n : names) {
        bp_object_t* g = nullptr;
        const bp_status_t s2 = bp_module_get_function(mod.object().get(), n.c_str(), 0, &g);
        if (s2 != BP_OK || g == nullptr) {
          Fail("the " + mk + " module lists '" + n + "' but does not find it by name (" +
               (s2 == BP_OK ? std::string("no function") : TakeError(s2)) + ")");
        }
        bp_object_release(g);
      }
      bp_object_t* g = nullptr;
      const bp_status_t s3 = bp_module_get_function(mod.object().get(), "no_such_function", 0, &g);
      if (s3 != BP_ERR_NOT_FOUND) {
        if (g != nullptr) bp_object_release(g);
        Fail("the " + mk + " module's get_function for a name it lacks gave " +
             (s3 == BP_OK ? std::string("a function") : TakeError(s3)) +
             "; it answers no function (null with BP_OK)");
      }
      bp_error_clear();
      ctx.Detail(kind + ": module kind " + mk + " with " + std::to_string(names.size()) +
                 " function(s)");
    });
  }
}

void SaveLoad(Context& ctx) {
  const std::vector<std::string> kinds = SetUpKinds(ctx);
  const kernels::Case& c = FamilyCase(ctx, "vector_add");
  for (const std::string& kind : kinds) {
    const Module m = BuildFor(runner::KernelSource(c), TargetFor(ctx, kind), c.func);
    std::string bytes;
    try {
      bytes = m.SaveToBytes();
    } catch (const Error& e) {
      Fail("saving the module built by target.build." + kind + " failed: " + e.what());
    }
    Module back;
    // The kit built these bytes itself, in this process: native code (a CPU kind's library)
    // may load.
    const ModuleLoadOptions own{/*allow_native=*/true};
    try {
      back = Module::LoadFromBytes(bytes, own);
    } catch (const Error& e) {
      Fail("loading back the module built by target.build." + kind + " (" +
           std::to_string(bytes.size()) + " bytes) failed: " + e.what());
    }
    if (back.ListFunctions() != m.ListFunctions())
      Fail("the module loaded back lists other functions than the one saved");
    RunChecked(c, back, ctx, c.func + " from a module saved and loaded back");
    Module again;
    try {
      again = Module::LoadFromBytes(back.SaveToBytes(), own);
    } catch (const Error& e) {
      Fail("saving and loading a loaded module again failed: " + std::string(e.what()));
    }
    RunChecked(c, again, ctx, c.func + " from a module saved and loaded twice");
    ctx.Detail(kind + ": " + std::to_string(bytes.size()) + " bytes saved");
  }
}

void SetStreamRoutes(Context& ctx) {
  const std::vector<std::string> kinds = SetUpKinds(ctx);
  StreamHandle s(ctx.dev);
  if (s.get() == nullptr) Skip("single-queue device: generated code has only the null stream");
  if (ctx.api->set_stream == nullptr) Skip("the DeviceAPI has no set_stream");
  const kernels::Case& c = FamilyCase(ctx, "vector_add");
  const Module m = BuildFor(runner::KernelSource(c), TargetFor(ctx, kinds.front()), c.func);
  const Function f = m.GetFunction(c.func);
  const kernels::Dims dims = {{"n", int64_t{1} << 16}};
  std::vector<kernels::Arg> args = c.make_args(dims, 11);
  std::vector<kernels::Arg> want = args;
  c.reference(want);
  const runner::DeviceArgs dargs(args, Device(ctx.dev));  // uploaded and synced
  size_t out = args.size();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_output) out = i;
  }
  if (out == args.size()) Fail(c.func + " has no output");
  CheckCall(bp_device_stream_set(ctx.dev, s.get()), "set_stream(a created stream)");
  try {
    f.CallPacked(dargs.values().data(), static_cast<int32_t>(dargs.values().size()));
  } catch (const Error& e) {
    bp_device_stream_set(ctx.dev, nullptr);
    Fail("calling " + c.func + " with a created stream active failed: " + e.what());
  }
  // Read the output on the active stream and wait for that stream alone.
  std::vector<float> host(args[out].data.size(), std::nanf(""));
  DLTensor dst = *dargs.values()[out].u.v_tensor;
  dst.data = host.data();
  dst.device = kHost;
  dst.byte_offset = 0;
  dst.strides = nullptr;
  CheckCall(bp_device_copy_data_from_to(dargs.values()[out].u.v_tensor, &dst, s.get()),
            "reading the output on the active stream");
  Sync(ctx.dev, s.get(), "the active stream");
  CheckCall(bp_device_stream_set(ctx.dev, nullptr), "set_stream(null stream)");
  Sync(ctx.dev, nullptr, "the null stream");
  kernels::Arg got = args[out];
  for (size_t i = 0; i < host.size(); ++i) got.data[i] = host[i];
  const double e = kernels::RelativeError(got, want[out]);
  if (!(e <= c.tolerance)) {
    Fail(c.func +
         " called while a created stream was active, its output then read on that stream, "
         "has relative error " +
         std::to_string(e) +
         ": the generated code did not run on the active stream (the contract: while a stream is "
         "active, generated code submits its work to it)");
  }
}

}  // namespace

void AddCodegenTests(std::vector<TestCase>* out) {
  for (const kernels::Case& c : kernels::Catalog()) {
    const std::string func = c.func;
    TestCase t{"codegen.kernel." + func,
               "the code generator builds the reference kernel " + func + " (" + c.file +
                   ") for a Target read from the device; it runs there and matches the float64 "
                   "reference and the IR interpreter",
               "",
               kNeedsDevice | kNeedsCodegen,
               [func](Context& ctx) { Kernel(ctx, func); },
               c.needs_threads ? 1 : 0};
    out->push_back(t);
  }
  out->push_back({"codegen.module.function_by_name",
                  "each function in the input IRModule is accessible by name in the output module; "
                  "a name it lacks is not found, cleanly",
                  "", kNeedsDevice | kNeedsCodegen, FunctionByName});
  out->push_back({"codegen.module.save_load",
                  "a module the code generator made saves to bytes, loads back (twice) and runs",
                  "", kNeedsDevice | kNeedsCodegen, SaveLoad});
  out->push_back({"codegen.set_stream_routes",
                  "while a stream is active (SetStream), generated code submits its work to it",
                  "BP-PLUGIN-8", kNeedsDevice | kNeedsCodegen | kNeedsStreams, SetStreamRoutes});
}

}  // namespace conformance
}  // namespace backplane
