// SPDX-License-Identifier: Apache-2.0
// The pieces of `backplane run` declared in run_support.h.
#include "run_support.h"

#include <algorithm>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/runner/runner.hpp>
#include <cmath>
#include <exception>
#include <iostream>
#include <optional>

#include "commands.h"

namespace backplane {
namespace cli {

namespace {

// The statistics of the timed calls: min, mean, median (the middle one; the mean of the two
// middle ones for an even count) and the sample standard deviation (0 for one call).
struct TimeStats {
  double min = 0, mean = 0, median = 0, stddev = 0;
};

TimeStats Stats(std::vector<double> times) {
  TimeStats s;
  if (times.empty()) return s;
  std::sort(times.begin(), times.end());
  const size_t n = times.size();
  s.min = times.front();
  s.median = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  double sum = 0;
  for (double t : times) sum += t;
  s.mean = sum / static_cast<double>(n);
  double sq = 0;
  for (double t : times) sq += (t - s.mean) * (t - s.mean);
  s.stddev = n > 1 ? std::sqrt(sq / static_cast<double>(n - 1)) : 0;
  return s;
}

// "1.23 ms median of 5 (min 1.20 ms, mean 1.25 ms, stddev 31.0 us)", and the figures in the
// document: "seconds" (the median) and "timing".
}  // namespace

std::string TimingText(const std::vector<double>& times, OrderedJson* doc) {
  const TimeStats s = Stats(times);
  (*doc)["repeat"] = times.size();
  (*doc)["seconds"] = s.median;
  (*doc)["timing"] = {{"min", s.min},
                      {"mean", s.mean},
                      {"median", s.median},
                      {"stddev", s.stddev},
                      {"times", times}};
  return runner::FormatSeconds(s.median) + " median of " + std::to_string(times.size()) + " (min " +
         runner::FormatSeconds(s.min) + ", mean " + runner::FormatSeconds(s.mean) + ", stddev " +
         runner::FormatSeconds(s.stddev) + ")";
}

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The names of `f`'s scalar params, or of its buffer params.
std::vector<std::string> ParamNames(const ir::PrimFunc& f, bool buffers) {
  std::vector<std::string> names;
  for (const ir::Param& p : f.params) {
    if (p.is_buffer() == buffers)
      names.push_back(p.is_buffer() ? p.buffer().name() : p.var()->name);
  }
  return names;
}

// "ir_host + opencl".
std::string ModuleKinds(const Module& m) {
  std::string kinds = m.Kind();
  for (const Module& imp : m.Imports()) kinds += " + " + imp.Kind();
  return kinds;
}

// "n=4096", "alpha=-1.5" pairs; the values are parsed against the function's signature later.
bool ParseValues(const std::vector<std::string>& items, std::map<std::string, std::string>* out,
                 std::string* bad) {
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      *bad = item;
      return false;
    }
    (*out)[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return true;
}

// The values as catalog sizes, when every one is an integer (the catalog's runner takes
// integer sizes only).
bool AsDims(const std::map<std::string, std::string>& values, kernels::Dims* dims) {
  for (const auto& [name, text] : values) {
    try {
      size_t used = 0;
      (*dims)[name] = std::stoll(text, &used);
      if (used != text.size()) return false;
    } catch (const std::exception&) {
      return false;
    }
  }
  return true;
}

std::string InputText(const std::string& name, const InputValue& v) {
  return "--input " + name + "=" + v.text;
}

// Puts the --input arrays into the buffers of `args`, after checking each one's dtype and shape
// against the parameter. A shape that differs names where each of its sizes came from (another
// input's shape, or --dim). Returns "" or the message.
std::string LoadInputs(const ir::PrimFunc& f, const std::map<std::string, NpyArray>& arrays,
                       const std::map<std::string, InputValue>& inputs, const SizeOrigins& origins,
                       std::vector<runner::CheckArg>* args) {
  for (const auto& [name, a] : arrays) {
    runner::CheckArg* arg = nullptr;
    for (runner::CheckArg& c : *args) {
      if (c.name == name && c.is_buffer) arg = &c;
    }
    if (arg == nullptr) continue;  // checked before: every name is a buffer param
    if (a.dtype == arg->dtype && a.shape == arg->shape) {
      arg->bytes = a.bytes;
      continue;
    }
    const InputValue& in = inputs.at(name);
    std::string message =
        InputText(name, in) + ": parameter '" + name + "' of function '" + f.name + "' is " +
        ir::ToString(arg->dtype) + " ('" + NpyDescr(arg->dtype) + "') of shape " +
        NpyShapeText(arg->shape) + ", but " +
        (in.is_inline ? "the value is " + ir::ToString(a.dtype)
                      : "the file holds " + ir::ToString(a.dtype) + " ('" + a.descr + "')") +
        " of shape " + NpyShapeText(a.shape);
    if (a.shape != arg->shape) {
      // Which size made the parameter's shape, and where it came from: another input's shape
      // (the inputs disagree) or --dim.
      for (const ir::Param& p : f.params) {
        if (!p.is_buffer() || p.buffer().name() != name) continue;
        for (size_t d = 0; d < p.buffer()->shape.size(); ++d) {
          const auto* v = p.buffer()->shape[d].As<ir::VarNode>();
          if (v == nullptr || !origins.count(v->name)) continue;
          const std::string& from = origins.at(v->name);
          if (from.find(InputText(name, in)) != std::string::npos) continue;
          message += "; " + v->name + " = " + std::to_string(arg->shape[d]) + " comes from " + from;
        }
      }
    }
    message += in.is_inline
                   ? "; give values of that dtype and shape (e.g. " + name + "=" +
                         [&] {
                           std::string sh;
                           for (int64_t d : arg->shape)
                             sh += (sh.empty() ? "" : "x") + std::to_string(d);
                           return sh + "x" + ir::ToString(arg->dtype);
                         }() +
                         "=0 fills it), or give the sizes with --dim"
                   : "; save an array of that dtype and shape, or give the sizes with --dim";
    return message;
  }
  return "";
}

// The buffers `f` writes, in the order of its params: a reference kernel's outputs, else those
// its IR stores to (or passes to a packed call, which may write them).
std::vector<std::string> WrittenBufferNames(const ir::PrimFunc& f, const kernels::Case* c) {
  std::vector<std::string> names;
  if (c != nullptr) {
    for (const kernels::Arg& a : c->make_args(c->small, 1)) {
      if (a.is_buffer && a.is_output) names.push_back(a.name);
    }
    return names;
  }
  const std::vector<const ir::BufferNode*> written = ir::WrittenBuffers(f.body);
  for (const ir::Param& p : f.params) {
    if (!p.is_buffer()) continue;
    for (const ir::BufferNode* b : written) {
      if (b->name == p.buffer().name()) {
        names.push_back(b->name);
        break;
      }
    }
  }
  return names;
}

// "vector_add(n: int32, a: buffer<float32>[n], ...)".
std::string Signature(const ir::PrimFunc& f) {
  std::string s = f.name + "(";
  for (size_t i = 0; i < f.params.size(); ++i) {
    const ir::Param& p = f.params[i];
    s += i ? ", " : "";
    if (p.is_buffer()) {
      s += p.buffer().name() + ": buffer<" + ir::ToString(p.buffer().dtype()) + ">[";
      for (size_t d = 0; d < p.buffer()->shape.size(); ++d) {
        s += (d ? ", " : "") + ir::Print(p.buffer()->shape[d]);
      }
      s += "]";
    } else {
      s += p.var()->name + ": " + ir::ToString(p.var().dtype());
    }
  }
  return s + ")";
}

// The arguments as the catalog's reference takes them (float64 elements), outputs marked.
std::vector<kernels::Arg> ToKernelArgs(const std::vector<runner::CheckArg>& args,
                                       const std::vector<std::string>& outputs) {
  std::vector<kernels::Arg> out;
  for (const runner::CheckArg& a : args) {
    kernels::Arg k;
    k.name = a.name;
    k.is_buffer = a.is_buffer;
    k.dtype = a.dtype;
    if (a.is_buffer) {
      k.shape = a.shape;
      k.data.resize(a.count());
      for (size_t i = 0; i < k.data.size(); ++i) k.data[i] = a.Element(i);
      k.is_output = std::find(outputs.begin(), outputs.end(), a.name) != outputs.end();
    } else {
      k.scalar = a.dtype.is_float() ? a.f : static_cast<double>(a.i);
    }
    out.push_back(std::move(k));
  }
  return out;
}

// `run MODULE --list` (stdout, exit 0) or `run MODULE` without -f (stderr, exit 2): the
// module's functions with their signatures (from the IR the module keeps, or --ir), the
// buffers each writes, and whether it is a reference kernel.
int ListFunctions(const Module& m, const ListOptions& o) {
  std::optional<runner::Oracle> oracle;
  std::string no_ir;
  try {
    if (!o.ir_file.empty()) {
      std::string text;
      if (std::string problem = ReadInputFile(o.ir_file, kKernelFile, &text); !problem.empty()) {
        std::cerr << "backplane run: --ir: " << problem << "\n";
        return kExitUsage;
      }
      oracle.emplace(ir::Parse(text, o.ir_file));
    } else {
      oracle.emplace(runner::Oracle::FromModule(m));
    }
  } catch (const std::exception& e) {
    if (!o.ir_file.empty()) {
      std::cerr << "backplane run: --ir: " << e.what() << "\n";
      return kExitUsage;
    }
    no_ir = e.what();
  }
  OrderedJson doc = JsonDocument("run");
  doc["module"] = o.module;
  doc["module_kinds"] = OrderedJson::array({m.Kind()});
  for (const Module& imp : m.Imports()) doc["module_kinds"].push_back(imp.Kind());
  OrderedJson list = OrderedJson::array();
  const std::vector<std::string> functions = m.ListFunctions();
  std::string text = o.module + " (module " + ModuleKinds(m) + ") holds " +
                     std::to_string(functions.size()) +
                     (functions.size() == 1 ? " function" : " functions") + ":\n";
  for (const std::string& name : functions) {
    const ir::PrimFunc* f = nullptr;
    if (oracle) {
      try {
        f = &oracle->Function(name);
      } catch (const Error&) {
        f = nullptr;
      }
    }
    const kernels::Case* c = kernels::Find(name);
    std::optional<ir::IRModule> source;  // a reference kernel's file, where the module keeps no IR
    if (f == nullptr && c != nullptr) {
      try {
        source = ir::Parse(runner::KernelSource(*c), c->file);
        f = source->Find(name);
      } catch (const std::exception&) {
        f = nullptr;
      }
    }
    OrderedJson item = {{"name", name}};
    text += "  " + (f != nullptr ? Signature(*f) : name);
    if (f != nullptr) {
      const std::vector<std::string> writes = WrittenBufferNames(*f, c);
      item["signature"] = Signature(*f);
      item["writes"] = writes;
      if (!writes.empty()) text += "  writes " + Join(writes);
    } else {
      item["signature"] = nullptr;
      item["writes"] = nullptr;
    }
    item["reference_kernel"] = c != nullptr;
    if (c != nullptr) text += "  [reference kernel]";
    text += "\n";
    list.push_back(item);
  }
  doc["functions"] = list;
  if (!no_ir.empty()) {
    doc["signatures_error"] = no_ir;
    text += "(no signatures: " + no_ir + "; --ir FILE gives the kernel file it was built from)\n";
  }
  if (!o.list) {
    std::cerr << "backplane run: no function given; give one with -f NAME (e.g. backplane run "
              << o.module << " -f " << (functions.empty() ? "NAME" : functions.front())
              << "), or --list to print this list on stdout:\n"
              << text;
    return kExitUsage;
  }
  if (o.json) return PrintJson("run", doc) ? kExitOk : kExitFailure;
  std::cout << text;
  std::cout.flush();
  return std::cout ? kExitOk : kExitFailure;
}

}  // namespace cli
}  // namespace backplane
