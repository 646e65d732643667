// SPDX-License-Identifier: Apache-2.0
// `backplane run MODULE --func NAME [--device cpu:0] [--dim n=4096 ...] [--check]`: loads a
// saved module, runs one of its functions on random inputs, checks the result against the
// float64 reference when the function is one of the reference kernels, or against the IR
// interpreter on the same inputs with --check (any function, whose int32 arithmetic is also
// checked for wrapping: warnings on stderr), and prints the time.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/signature.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/check.hpp>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "input.h"
#include "npy.h"
#include "output.h"
#include "run_support.h"
#include "values.h"

namespace backplane {
namespace cli {

namespace {

// The device type the module's code runs on: the device type of the target kind named like
// the module, or of one of its imports (a split module is "ir_host" importing the kernels);
// "" when no kind is known by that name.
std::string ModuleDeviceType(const Module& m) {
  const nlohmann::json kinds = nlohmann::json::parse(TargetKinds::Describe());
  std::vector<Module> todo = {m};
  for (size_t i = 0; i < todo.size(); ++i) {
    const std::string kind = todo[i].Kind();
    for (const nlohmann::json& k : kinds["kinds"]) {
      if (k.value("name", "") == kind && k["device_type"].is_string()) {
        return k["device_type"].get<std::string>();
      }
    }
    for (Module& imp : todo[i].Imports()) todo.push_back(imp);
  }
  return "";
}

struct RunOptions {
  std::string module;
  std::string func;
  std::string variant;               // --variant NAME: a catalog kernel's variant ("" = chosen)
  std::string device;                // "" = from the module's kind
  std::vector<std::string> dims;     // NAME=VALUE for scalar params
  std::vector<std::string> inputs;   // NAME=FILE.npy or NAME=VALUES: a buffer's contents
  std::vector<std::string> outputs;  // NAME=FILE.npy: where a buffer goes after the call
  bool check = false;                // compare with the IR interpreter
  std::string ir_file;               // the IR to compare with, instead of the module's own
  double rtol = -1;                  // the float tolerance instead of the dtype's (< 0)
  int repeat = 5;
  uint64_t seed = 1;
  bool json = false;
  bool verbose = false;
  std::vector<std::string> plugin_paths;
  std::vector<std::string> layers;
  std::string trace;
  bool allow_native = false;  // load modules that carry native code (a c module's library)
  bool list = false;          // list the module's functions with their signatures
  bool print = false;         // print the buffers the call wrote
  bool print_full = false;    // ... every element, however many
};

// Buffers of up to this many elements are printed in full by --print.
constexpr size_t kPrintInFull = 16;

// "; variant vec4 of vector_add_gpu, for device type cuda", "" without variants: the end of
// the report's line.
std::string VariantText(const kernels::Case* c, const std::string& why) {
  if (c == nullptr || why.empty()) return "";
  std::string how = "for " + why;
  if (why == "--variant") how = "by --variant";
  if (why == "named") how = "named";
  if (why.rfind("the module lacks", 0) == 0) how = why;
  return "; variant " + kernels::VariantName(*c) + " of " + (c->base.empty() ? c->func : c->base) +
         ", " + how;
}

// What the command reports: the text line on stdout, or (--json) the document. A failure's
// message goes to stderr either way.
class Report {
 public:
  Report(const RunOptions& o, const std::string& device)
      : o_(o), doc_(JsonDocument("run")), progress_("backplane run", o.verbose) {
    doc_["module"] = o.module;
    doc_["function"] = o.func;
    doc_["device"] = device;
    doc_["ok"] = false;  // set at the end; here so that it comes early in the document
  }
  OrderedJson& doc() { return doc_; }
  // Says what runs now (the first call of a GPU module includes the driver's compile, which
  // can take seconds).
  void Step(const std::string& what) { progress_.Step(what); }
  // A line printed after the result line (an output's path, a printed buffer).
  void AddLine(const std::string& line) { lines_.push_back(line); }
  int Ok(const std::string& line) {
    progress_.Done();
    doc_["ok"] = true;
    if (o_.json) return PrintJson("run", doc_) ? kExitOk : kExitFailure;
    std::cout << line << "\n";
    for (const std::string& l : lines_) std::cout << l << "\n";
    return kExitOk;
  }
  int Failed(const std::string& message) {
    progress_.Done();
    doc_["ok"] = false;
    doc_["error"] = message;
    std::cerr << "backplane run: " << message << "\n";
    if (o_.json) PrintJson("run", doc_);
    return kExitFailure;
  }

 private:
  const RunOptions& o_;
  OrderedJson doc_;
  Progress progress_;
  std::vector<std::string> lines_;
};

// Writes the --output buffers of `args`. Returns "" or the message.
std::string SaveOutputs(const std::map<std::string, std::string>& outputs,
                        const std::vector<runner::CheckArg>& args, OrderedJson* list,
                        Report* report) {
  for (const auto& [name, file] : outputs) {
    for (const runner::CheckArg& a : args) {
      if (a.name != name || !a.is_buffer) continue;
      if (std::string e = WriteNpy(file, a.dtype, a.shape, a.bytes); !e.empty()) {
        return "--output " + name + "=" + file + ": " + e;
      }
      list->push_back(
          {{"name", name}, {"file", file}, {"dtype", ir::ToString(a.dtype)}, {"shape", a.shape}});
      report->AddLine("wrote " + name + " (" + ir::ToString(a.dtype) + " " + NpyShapeText(a.shape) +
                      ") to " + file);
    }
  }
  return "";
}

// Any function, its arguments from its signature (the IR the module keeps, or --ir), random
// or from --input (files or inline values): a reference kernel checked against its float64
// reference on those inputs, any function against the IR interpreter with --check, else only
// run; --output files get the buffers after the checked call, --print shows them; then timed.
int RunGeneric(const Module& m, const kernels::Case* c, Device dev,
               std::map<std::string, std::string> values,
               const std::map<std::string, std::string>& input_texts,
               const std::map<std::string, std::string>& outputs, const RunOptions& o,
               const std::string& variant_why, Report& report) {
  std::optional<runner::Oracle> oracle;
  if (!o.ir_file.empty()) {
    std::string text;
    const std::string problem = ReadInputFile(o.ir_file, kKernelFile, &text);
    if (!problem.empty()) {
      std::cerr << "backplane run: --ir: " << problem << "\n";
      return kExitUsage;
    }
    try {
      oracle.emplace(ir::Parse(text, o.ir_file));
    } catch (const ir::Error& e) {
      std::cerr << "backplane run: --ir: " << e.what() << "\n";
      return kExitUsage;
    }
  } else {
    std::string no_ir;
    try {
      oracle.emplace(runner::Oracle::FromModule(m));
    } catch (const Error& e) {
      no_ir = e.what();
    }
    // A module that keeps no IR (a remote one): a reference kernel's signature is its kernel
    // file's, and its check is the float64 reference.
    if (!oracle && c != nullptr && !o.check) {
      try {
        oracle.emplace(ir::Parse(runner::KernelSource(*c), c->file));
      } catch (const std::exception&) {
        oracle.reset();
      }
    }
    if (!oracle) {
      // What needed the IR: the check, the inputs or outputs (their params), or the signature
      // of a function that is not a reference kernel.
      std::string why =
          "'" + o.func + "' is not a reference kernel, so its arguments come " + "from its IR: ";
      if (!input_texts.empty() || !outputs.empty() || o.print) {
        why = "--input/--output/--print need the function's IR: ";
      }
      if (o.check) why = "--check: ";
      std::cerr << "backplane run: " << why << o.module << ": " << no_ir << "\n";
      return kExitUsage;
    }
  }
  const ir::PrimFunc* f = nullptr;
  try {
    f = &oracle->Function(o.func);
  } catch (const Error& e) {
    std::cerr << "backplane run: " << (o.ir_file.empty() ? o.module : o.ir_file) << ": " << e.what()
              << "\n";
    return kExitUsage;
  }
  // --check: the int32 overflow check of the function's IR too (docs/ir.md, "Int32 overflow
  // check"), as a warning: the interpreter at small sizes cannot show a wrap near 2^31.
  if (o.check) {
    for (const std::string& w : ir::Int32OverflowRisks(*f)) {
      std::cerr << "backplane run: warning: " << w << "\n";
    }
  }
  const std::vector<std::string> buffers = ParamNames(*f, true);
  const std::vector<std::string> scalars = ParamNames(*f, false);
  auto has = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  SizeOrigins origins;
  for (const auto& [name, v] : values) origins[name] = "--dim " + name + "=" + v;
  // --input of a scalar parameter is the same as --arg (iree-run-module takes scalars that way).
  std::map<std::string, InputValue> inputs;
  for (const auto& [name, text] : input_texts) {
    if (has(scalars, name)) {
      std::string value;
      ir::DType dtype;
      bool has_dtype = false;
      const ir::Var* var = nullptr;
      for (const ir::Param& p : f->params) {
        if (!p.is_buffer() && p.var()->name == name) var = &p.var();
      }
      if (!InlineScalarText(text, &value, &dtype, &has_dtype) ||
          (has_dtype && dtype != var->dtype())) {
        std::cerr << "backplane run: --input " << name << "=" << text << ": parameter '" << name
                  << "' of function '" << o.func << "' is a scalar of "
                  << ir::ToString(var->dtype()) << "; give one value, e.g. --input " << name << "="
                  << (var->dtype().is_float() ? "1.5" : "4") << "\n";
        return kExitUsage;
      }
      if (values.count(name)) {
        std::cerr << "backplane run: --input " << name << "=" << text << ": '" << name
                  << "' is given twice (also " << origins[name] << "); give it once\n";
        return kExitUsage;
      }
      values[name] = value;
      origins[name] = "--input " + name + "=" + text;
      continue;
    }
    InputValue in;
    in.text = text;
    in.is_inline = IsInlineValue(text);
    in.file = !text.empty() && text[0] == '@' ? text.substr(1) : text;
    inputs[name] = in;
  }
  for (const auto* files : {&input_texts, &outputs}) {
    for (const auto& [name, file] : *files) {
      if (files == &input_texts && has(scalars, name)) continue;
      if (!has(buffers, name)) {
        std::cerr << "backplane run: " << (files == &input_texts ? "--input " : "--output ") << name
                  << "=" << file << ": function '" << o.func << "' has no "
                  << "buffer parameter '" << name
                  << (files == &input_texts ? "' (nor a scalar one)" : "'")
                  << "; its buffers are: " << Join(buffers)
                  << (files == &input_texts && !scalars.empty() ? "; its scalars: " + Join(scalars)
                                                                : "")
                  << "\n";
        return kExitUsage;
      }
    }
  }
  std::map<std::string, NpyArray> arrays;
  for (const auto& [name, in] : inputs) {
    NpyArray a;
    const ir::Param* param = nullptr;
    for (const ir::Param& p : f->params) {
      if (p.is_buffer() && p.buffer().name() == name) param = &p;
    }
    const std::string e = in.is_inline
                              ? ParseInlineArray(o.func, name, param->buffer().dtype(),
                                                 param->buffer()->shape.size(), in.text, &a)
                              : ReadNpy(in.file, &a);
    if (!e.empty()) {
      std::cerr << "backplane run: " << InputText(name, in) << ": " << e << "\n";
      return kExitUsage;
    }
    // A size the user did not give is read off the shape of an input whose extent is that
    // size (buffer<float32>[n] and a file of shape (1000,) give n = 1000).
    const std::vector<ir::Expr>& shape = param->buffer()->shape;
    if (shape.size() == a.shape.size()) {
      for (size_t d = 0; d < shape.size(); ++d) {
        if (const auto* v = shape[d].As<ir::VarNode>(); v != nullptr && !values.count(v->name)) {
          values[v->name] = std::to_string(a.shape[d]);
          origins[v->name] = "the shape " + NpyShapeText(a.shape) + " of " + InputText(name, in);
        }
      }
    }
    arrays.emplace(name, std::move(a));
  }
  // A catalog kernel's sizes not given take its test sizes under --check (the interpreter is
  // 100 to 10,000 times slower than a device: demo sizes would take minutes), else its demo
  // sizes as without --check.
  if (c != nullptr) {
    for (const auto& [name, v] : o.check ? c->small : c->demo) {
      values.emplace(name, std::to_string(v));
    }
    for (const auto& [name, v] : c->demo) values.emplace(name, std::to_string(v));
    // Its threads a block, where a parameter (Case::block_param): the device's warp width.
    for (const auto& [name, v] : runner::DimsForDevice(*c, dev, {})) {
      values.emplace(name, std::to_string(v));
    }
  }
  std::vector<runner::CheckArg> args;
  try {
    args = runner::MakeCheckArgs(*f, values, o.seed);
  } catch (const Error& e) {
    std::cerr << "backplane run: " << e.what() << "\n";
    return kExitUsage;
  }
  if (std::string e = LoadInputs(*f, arrays, inputs, origins, &args); !e.empty()) {
    std::cerr << "backplane run: " << e << "\n";
    return kExitUsage;
  }
  OrderedJson input_list = OrderedJson::array();
  for (const auto& [name, in] : inputs) {
    if (in.is_inline) {
      input_list.push_back({{"name", name}, {"value", in.text}});
    } else {
      input_list.push_back({{"name", name}, {"file", in.file}});
    }
  }
  report.doc()["inputs"] = input_list;
  std::string verdict = "ran (not checked; --check compares it with the IR interpreter)";
  std::vector<runner::CheckArg> after;  // the buffers after the checked call
  report.Step("running " + o.func + " on " + dev.ToString() +
              (o.check ? " and on the IR interpreter" : "") +
              " (the first call includes the driver's compile)");
  Function fn = m.GetFunction(o.func);
  double max_error = -1;  // against the float64 reference, for a reference kernel
  if (o.check) {
    runner::CheckOptions options;
    options.rtol = o.rtol;
    runner::CheckResult r = runner::RunChecked(m, *oracle, o.func, dev, args, options);
    report.doc()["check"] = "interpreter";
    report.doc()["max_ratio"] = r.max_ratio;
    if (!r.ok)
      return report.Failed(o.func + " on " + dev.ToString() +
                           ": FAILED against the IR interpreter: " + r.error);
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.2g", r.max_ratio);
    verdict =
        std::string("ok (matches the IR interpreter; largest error ") + buf + " of the tolerance)";
    after = std::move(r.got);
  } else {
    runner::CheckDeviceArgs once(args, dev);
    fn.CallPacked(once.values().data(), static_cast<int32_t>(once.values().size()));
    Check(bp_device_stream_sync(dev.dl, nullptr));
    after = args;
    once.Download(&after);
    if (c != nullptr) {
      // A reference kernel: its float64 reference on the same inputs (random or the user's).
      const std::vector<std::string> outs = WrittenBufferNames(*f, c);
      std::vector<kernels::Arg> want = ToKernelArgs(args, outs);
      const std::vector<kernels::Arg> got = ToKernelArgs(after, outs);
      c->reference(want);
      max_error = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        if (!got[i].is_output) continue;
        const double e = kernels::RelativeError(got[i], want[i]);
        max_error = std::max(max_error, std::isnan(e) ? INFINITY : e);
      }
      report.doc()["check"] = "reference";
      report.doc()["max_error"] = max_error;
      char err[96];
      if (!(max_error <= c->tolerance)) {
        std::snprintf(err, sizeof(err), "relative error %.3g exceeds the tolerance %.3g", max_error,
                      c->tolerance);
        return report.Failed(o.func + " on " + dev.ToString() + ": FAILED: " + err);
      }
      std::snprintf(err, sizeof(err), "%.2g", max_error);
      verdict = std::string("ok (max relative error ") + err + " vs the float64 reference)";
    } else {
      report.doc()["check"] = "none";
    }
  }
  OrderedJson output_list = OrderedJson::array();
  if (std::string e = SaveOutputs(outputs, after, &output_list, &report); !e.empty()) {
    std::cerr << "backplane run: " << e << "\n";
    return kExitFailure;
  }
  report.doc()["outputs"] = output_list;
  if (o.print) {
    OrderedJson printed = OrderedJson::array();
    for (const std::string& name : WrittenBufferNames(*f, c)) {
      for (const runner::CheckArg& a : after) {
        if (a.name != name || !a.is_buffer) continue;
        OrderedJson item;
        report.AddLine(FormatBuffer(a, kPrintInFull, o.print_full, &item));
        printed.push_back(item);
      }
    }
    report.doc()["printed"] = printed;
  }
  runner::CheckDeviceArgs device_args(args, dev);
  std::vector<double> times;
  for (int i = 0; i < o.repeat; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    fn.CallPacked(device_args.values().data(), static_cast<int32_t>(device_args.values().size()));
    Check(bp_device_stream_sync(dev.dl, nullptr));
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  const std::string timing = TimingText(times, &report.doc());
  std::string rate;
  if (c != nullptr && report.doc()["seconds"].get<double>() > 0) {
    // The rate of a reference kernel, as without --input/--output.
    const std::vector<kernels::Arg> got = ToKernelArgs(after, WrittenBufferNames(*f, c));
    const double seconds = report.doc()["seconds"].get<double>();
    const double gflops = c->flops ? c->flops(got) / seconds / 1e9 : 0;
    const double gbytes = c->bytes ? c->bytes(got) / seconds / 1e9 : 0;
    report.doc()["gflops"] = gflops;
    report.doc()["gbytes_per_s"] = gbytes;
    char buf[64];
    std::snprintf(buf, sizeof(buf), gflops > 0 ? ", %.2f GFLOP/s" : ", %.2f GB/s",
                  gflops > 0 ? gflops : gbytes);
    rate = buf;
  }
  return report.Ok(o.func + " on " + dev.ToString() + ": " + verdict + ", " + timing + rate +
                   VariantText(kernels::Find(o.func), variant_why));
}

// The device ids of `type` that exist here: "cpu:0", "opencl:0, opencl:1".
std::string DevicesOfType(const Device& d) {
  std::string names;
  for (int32_t id = 0; id < 64; ++id) {
    bp_value_t exists;
    if (bp_device_get_attr(DLDevice{d.dl.device_type, id}, BP_ATTR_EXIST, &exists) != BP_OK) {
      bp_error_clear();
      break;
    }
    if (exists.type != BP_VALUE_INT || exists.u.v_int64 == 0) break;
    names += (names.empty() ? "" : ", ") + d.TypeName() + ":" + std::to_string(id);
  }
  return names;
}

// The function that runs for `o.func` on `dev`: a catalog kernel with variants
// (kernels::Case::variants) runs the one --variant names, else the one chosen for the device
// (runner::ChooseVariant), where the module has it. Sets `why` to how it was chosen ("" for a
// function without variants; "--variant"; "named" for a variant's own function; the chosen
// variant's Variant::when) and returns "" or a usage message.
std::string PickVariant(const RunOptions& o, const Module& m, Device dev, std::string* func,
                        std::string* why) {
  *func = o.func;
  const kernels::Case* c = kernels::Find(o.func);
  if (c == nullptr) {
    if (o.variant.empty()) return "";
    return "--variant " + o.variant + ": function '" + o.func +
           "' is not a reference kernel, so it has no variants; leave --variant out";
  }
  const std::vector<std::string> functions = m.ListFunctions();
  auto in_module = [&](const std::string& f) {
    return std::find(functions.begin(), functions.end(), f) != functions.end();
  };
  if (!o.variant.empty()) {
    const kernels::Case* v = kernels::FindVariant(*c, o.variant);
    if (v == nullptr) {
      return "--variant " + o.variant + ": kernel '" + o.func + "' has no variant '" + o.variant +
             "'; its variants are: " + kernels::VariantNames(*c);
    }
    if (!in_module(v->func)) {
      return "--variant " + o.variant + ": " + o.module + " has no function '" + v->func +
             "' (that variant's); build the module from the whole kernel file (" + v->file +
             "), or leave --variant out";
    }
    *func = v->func;
    *why = "--variant";
    return "";
  }
  if (!c->base.empty()) {
    *why = "named";  // a variant's own function
    return "";
  }
  if (c->variants.empty()) return "";
  const kernels::Case* chosen = runner::ChooseVariant(*c, dev);
  if (chosen != c && in_module(chosen->func)) {
    *func = chosen->func;
    for (const kernels::Variant& v : c->variants) {
      if (v.func == chosen->func) *why = v.when;
    }
  } else {
    // The base: chosen for this device, or the module lacks the chosen variant's function.
    *why = chosen == c ? c->variants.front().when : "the module lacks " + chosen->func;
  }
  return "";
}

int RunRun(const RunOptions& options) {
  RunOptions o = options;
  if (o.print_full) o.print = true;
  for (const std::string& p : o.plugin_paths) Check(bp_plugin_path_add(p.c_str()));
  if (const std::string bad = EnableCliLayers(o.layers, o.trace); !bad.empty()) {
    std::cerr << "backplane run: " << bad << "\n";
    return kExitUsage;
  }
  std::map<std::string, std::string> values;
  std::string bad;
  if (!ParseValues(o.dims, &values, &bad)) {
    std::cerr << "backplane run: --dim '" << bad << "' is not NAME=VALUE (e.g. --dim n=4096, "
              << "--dim alpha=-1.5, --dim flag=true)\n";
    return kExitUsage;
  }
  std::map<std::string, std::string> inputs;
  std::map<std::string, std::string> outputs;
  if (!ParseValues(o.inputs, &inputs, &bad) || !ParseValues(o.outputs, &outputs, &bad)) {
    std::cerr << "backplane run: '" << bad << "' is not NAME=FILE.npy (e.g. --input a=a.npy, "
              << "--output c=c.npy, NAME a buffer parameter of the function)\n";
    return kExitUsage;
  }
  std::string bytes;
  const std::string problem = ReadInputFile(o.module, kModuleFile, &bytes);
  if (!problem.empty()) {
    std::cerr << "backplane run: " << problem << "\n";
    return kExitUsage;
  }
  Module m;
  try {
    m = Module::LoadFromBytes(bytes, ModuleLoadOptions{o.allow_native});
  } catch (const Error& e) {
    // A damaged file, one of another format or one with native code not allowed is the user's
    // input: named, with the usage exit.
    if (e.kind() != BP_ERR_INVALID_ARGUMENT && e.kind() != BP_ERR_VERSION_MISMATCH) {
      throw Error(e.kind(), o.module + ": " + e.what());
    }
    std::cerr << "backplane run: " << o.module << ": " << e.what() << "\n";
    return kExitUsage;
  }
  if (o.list || o.func.empty()) {
    if (o.list && !o.func.empty()) {
      std::cerr << "backplane run: give either --list or -f " << o.func << ", not both\n";
      return kExitUsage;
    }
    return ListFunctions(m, {o.module, o.ir_file, o.list, o.json});
  }
  const std::vector<std::string> functions = m.ListFunctions();
  if (std::find(functions.begin(), functions.end(), o.func) == functions.end()) {
    std::cerr << "backplane run: " << o.module << " has no function '" << o.func
              << "'; it has: " << Join(functions)
              << " (give one with --func; --list shows their signatures)\n";
    return kExitUsage;
  }
  const std::string module_device = ModuleDeviceType(m);
  std::string device_text = o.device;
  if (device_text.empty()) device_text = module_device.empty() ? "cpu:0" : module_device + ":0";
  Device dev;
  try {
    dev = Device::Parse(device_text);
  } catch (const Error& e) {
    std::cerr << "backplane run: --device " << device_text << ": " << e.what()
              << " ('backplane info' lists the devices here)\n";
    return kExitUsage;
  }
  if (!module_device.empty() && dev.TypeName() != module_device) {
    std::cerr << "backplane run: " << o.module << " holds code for " << module_device
              << " devices (module " << ModuleKinds(m) << "), so it cannot run on " << device_text
              << "; give --device " << module_device
              << ":0 (or leave --device out), or build the kernel for a Target of that "
              << "device's kind\n";
    return kExitUsage;
  }
  bp_value_t exists;
  if (bp_device_get_attr(dev.dl, BP_ATTR_EXIST, &exists) != BP_OK || exists.type != BP_VALUE_INT ||
      exists.u.v_int64 == 0) {
    bp_error_clear();
    const std::string here = DevicesOfType(dev);
    std::cerr << "backplane run: device " << device_text << " does not exist here; "
              << (here.empty() ? "there is no " + dev.TypeName() + " device here"
                               : "the " + dev.TypeName() + " devices here: " + here)
              << " ('backplane info' lists every device)\n";
    return kExitUsage;
  }
  std::string variant_why;
  if (std::string e = PickVariant(o, m, dev, &o.func, &variant_why); !e.empty()) {
    std::cerr << "backplane run: " << e << "\n";
    return kExitUsage;
  }
  Report report(o, device_text);
  const kernels::Case* c = kernels::Find(o.func);
  if (c != nullptr && !variant_why.empty()) {
    // Which variant ran and why: the device's property, --variant, or its function named.
    report.doc()["kernel"] = c->base.empty() ? c->func : c->base;
    report.doc()["variant"] = kernels::VariantName(*c);
    report.doc()["variant_chosen_by"] = variant_why;
  }
  kernels::Dims dims;
  if (c == nullptr || o.check || !o.ir_file.empty() || !AsDims(values, &dims) || !inputs.empty() ||
      !outputs.empty() || o.print) {
    return RunGeneric(m, c, dev, values, inputs, outputs, o, variant_why, report);
  }
  // A reference kernel: every size given must be one of its scalar params, and at least 0.
  std::vector<std::string> scalars;
  try {
    scalars = ParamNames(runner::Oracle::FromModule(m).Function(o.func), false);
  } catch (const Error&) {
    for (const auto& [name, v] : c->demo) scalars.push_back(name);
  }
  for (const auto& [name, v] : dims) {
    if (std::find(scalars.begin(), scalars.end(), name) == scalars.end()) {
      std::cerr << "backplane run: --dim " << name << "=" << v << ": function '" << o.func
                << "' has no scalar parameter '" << name
                << "'; its scalar parameters are: " << Join(scalars) << "\n";
      return kExitUsage;
    }
    if (v < 0) {
      std::cerr << "backplane run: --dim " << name << "=" << v << ": a size is at least 0; give "
                << "--dim " << name << "=" << c->demo.at(name) << " or leave it out (its demo "
                << "size)\n";
      return kExitUsage;
    }
    // Refused before any buffer is made: a reference kernel's sizes are int32 params (docs/ir.md,
    // "Sizes of the catalog kernels").
    if (v > INT32_MAX) {
      std::cerr << "backplane run: --dim " << name << "=" << v << ": parameter '" << name
                << "' of function '" << o.func << "' is int32, so at most " << INT32_MAX
                << " (the reference kernels take sizes up to 2^31 - 1); give a smaller size\n";
      return kExitUsage;
    }
  }
  report.Step("running " + o.func + " on " + device_text +
              " (the first call includes the driver's compile)");
  runner::Result r = runner::RunCase(*c, m, dev, dims, o.repeat, o.seed);
  report.doc()["check"] = "reference";
  report.doc()["inputs"] = OrderedJson::array();
  report.doc()["outputs"] = OrderedJson::array();
  report.doc()["max_error"] = r.max_error;
  if (!r.ok) return report.Failed(o.func + " on " + device_text + ": FAILED: " + r.error);
  const std::string timing = TimingText(r.times, &report.doc());
  report.doc()["gflops"] = r.gflops;
  report.doc()["gbytes_per_s"] = r.gbytes_per_s;
  char rate[64];
  if (r.gflops > 0) {
    std::snprintf(rate, sizeof(rate), "%.2f GFLOP/s", r.gflops);
  } else {
    std::snprintf(rate, sizeof(rate), "%.2f GB/s", r.gbytes_per_s);
  }
  char err[32];
  std::snprintf(err, sizeof(err), "%.2g", r.max_error);
  return report.Ok(o.func + " on " + device_text + ": ok (max relative error " + err +
                   " vs the float64 reference), " + timing + ", " + rate +
                   VariantText(c, variant_why));
}

}  // namespace

Command AddRunCommand(CLI::App& parent) {
  auto o = std::make_shared<RunOptions>();
  CLI::App* app = parent.add_subcommand(
      "run", "Run a function of a saved module on random inputs, check it, and time it");
  app->add_option("MODULE", o->module, "A module file written by 'backplane build'")->required();
  app->add_option("--func,-f", o->func,
                  "The function to run; without it (or with --list) the module's functions are "
                  "listed with their signatures");
  app->add_flag("--list", o->list,
                "List the module's functions with their signatures and the buffers each writes "
                "(on stdout; --json for a document), and run nothing");
  app->add_option("--variant", o->variant,
                  "For a reference kernel with variants (docs/kernels.md, \"Variants\"): run "
                  "this one (a name such as vec4 or base, or its function name) instead of the "
                  "one chosen for the device; the module must hold its function")
      ->type_name("NAME");
  app->add_option(
      "--device,-d", o->device,
      "The device, e.g. cpu:0, opencl:1; by default device 0 of the type the module's code "
      "runs on (cpu:0 for a c module, opencl:0 for an opencl one)");
  app->add_option("--dim,--arg", o->dims,
                  "A scalar parameter: a size (--dim n=4096) or any scalar of the function, "
                  "e.g. --arg alpha=-1.5, --arg big=5000000000, --arg flag=true (repeat; the "
                  "sizes of a reference kernel not given take its demo size, float scalars not "
                  "given are random)")
      ->type_name("NAME=VALUE");
  app->add_flag("--check", o->check,
                "Run the function on the IR interpreter too, on the same inputs, and compare "
                "every buffer (tolerance by dtype: exact for integers and bool; "
                "docs/host-guide.md). Any kernel, not only the reference ones");
  app->add_option("--ir", o->ir_file,
                  "The kernel file (.bpir) the module was built from, for --check when the "
                  "module does not keep its IR, or to check it against another IR")
      ->type_name("FILE");
  app->add_option("--rtol", o->rtol,
                  "With --check: the relative tolerance for float buffers instead of the "
                  "dtype's (1e-2 float16, 1e-4 float32, 1e-10 float64)");
  app->add_option("--input,-i", o->inputs,
                  "Fill buffer NAME from a NumPy .npy file (NAME=FILE.npy or NAME=@FILE), or "
                  "from values typed here: NAME=1,2,3,4 (one dimension), NAME=2x3=1,2,3,4,5,6, "
                  "NAME=4xf32=0 (one value fills the shape), as iree-run-module's --input; a "
                  "scalar NAME=1.5 is --arg. Repeat; dtype and shape must match the parameter; "
                  "sizes not given with --dim are read off the shapes")
      ->type_name("NAME=FILE.npy|VALUES");
  app->add_option("--output,-o", o->outputs,
                  "Save buffer NAME after the checked call as a NumPy .npy file (repeat); the "
                  "line after the result names each file written")
      ->type_name("NAME=FILE.npy");
  app->add_flag("--print,-p", o->print,
                "Print the buffers the function writes, after the checked call: up to 16 "
                "elements in full, larger ones as their first and last elements with min, max "
                "and mean");
  app->add_flag("--print-full", o->print_full, "--print with every element, however many");
  app->add_option("--repeat,-r", o->repeat,
                  "Timed runs after the checked one (default 5); their min, mean, median and "
                  "standard deviation are printed")
      ->check(CLI::Range(1, 1000000));
  app->add_flag("--json", o->json,
                "Print the result as one JSON document (schema_version 1, docs/cli.md) instead "
                "of a line of text");
  app->add_option("--seed", o->seed, "Seed of the random inputs (default 1)");
  app->add_flag("--verbose,-v", o->verbose,
                "Say on stderr what runs (shown anyway when stderr is a terminal)");
  app->add_flag("--allow-native", o->allow_native,
                "Load the module even if it carries native code (a c module's shared library), "
                "which runs in this process with your rights: only for a module you built "
                "yourself or got from a source you trust (docs/security.md)");
  AddPluginPathOption(app, &o->plugin_paths);
  AddLayerOptions(app, &o->layers, &o->trace);
  app->footer(
      "Examples:\n"
      "  backplane run va.bpmod -f vector_add --dim n=1000000 --allow-native\n"
      "  backplane run va.bpmod -f vector_add --allow-native --trace va.json\n"
      "  backplane run va_gpu.bpmod -f vector_add_gpu -i a=a.npy -i b=b.npy -o c=c.npy\n"
      "  backplane run sx.bpmod -f saxpy_gpu --arg alpha=1.5 --check --json\n"
      "  backplane run va.bpmod --list\n"
      "  backplane run va.bpmod -f vector_add_gpu -i a=1,2,3,4 -i b=4xf32=0.5 -p\n"
      "Exit codes: 0 ok, 1 the run or the check failed, 2 a usage error (bad option, file, "
      "device or value).\n"
      "Environment: BACKPLANE_PLUGIN_PATH (plugin folders searched first), XDG_CACHE_HOME (the "
      "compile cache, docs/cli.md).");
  return Command{app, [o] { return RunRun(*o); }};
}

}  // namespace cli
}  // namespace backplane
