// SPDX-License-Identifier: Apache-2.0
// The pieces of `backplane run` that do not hold its flow (run.cc): the values given on the
// command line, the timing figures, the --input arrays checked against a function's
// signature, a function's signature and written buffers, and `run MODULE --list`.
#ifndef BACKPLANE_CLI_RUN_SUPPORT_H_
#define BACKPLANE_CLI_RUN_SUPPORT_H_

#include <backplane/backplane.hpp>
#include <backplane/ir/ir.hpp>
#include <backplane/kernels/catalog.hpp>
#include <backplane/runner/check.hpp>
#include <map>
#include <string>
#include <vector>

#include "input.h"
#include "npy.h"
#include "output.h"

namespace backplane {
namespace cli {

inline const InputKind kKernelFile = {"kernel file", "the IR's text form (.bpir, docs/ir.md)",
                                      kMaxKernelFileBytes};
inline const InputKind kModuleFile = {"module file",
                                      "Backplane's module format (what 'backplane build' writes)",
                                      kMaxModuleFileBytes};

// "ir_host + opencl": the module's kind and its imports'.
std::string ModuleKinds(const Module& m);

// "n=4096", "alpha=-1.5" pairs into `out`; false with the first bad item in `bad`.
bool ParseValues(const std::vector<std::string>& items, std::map<std::string, std::string>* out,
                 std::string* bad);
// The values as catalog sizes, when every one is an integer.
bool AsDims(const std::map<std::string, std::string>& values, kernels::Dims* dims);

// The timed calls' figures as a line of text, and into `doc`.
std::string TimingText(const std::vector<double>& times, OrderedJson* doc);

// "a, b, c".
std::string Join(const std::vector<std::string>& items);
// The names of `f`'s scalar params, or of its buffer params.
std::vector<std::string> ParamNames(const ir::PrimFunc& f, bool buffers);

// What --input gave for one parameter: a file or values typed inline.
struct InputValue {
  std::string text;  // as given
  bool is_inline = false;
  std::string file;  // the path, for a file
};
// "--input NAME=TEXT".
std::string InputText(const std::string& name, const InputValue& v);
// Where each size came from, for messages: "--dim n=1000", "the shape (999,) of --input a=a.npy".
using SizeOrigins = std::map<std::string, std::string>;
// Puts the --input arrays into the buffers of `args` after checking them against the
// parameters. Returns "" or the message.
std::string LoadInputs(const ir::PrimFunc& f, const std::map<std::string, NpyArray>& arrays,
                       const std::map<std::string, InputValue>& inputs, const SizeOrigins& origins,
                       std::vector<runner::CheckArg>* args);

// The buffers `f` writes, in the order of its params.
std::vector<std::string> WrittenBufferNames(const ir::PrimFunc& f, const kernels::Case* c);
// "vector_add(n: int32, a: buffer<float32>[n], ...)".
std::string Signature(const ir::PrimFunc& f);
// The arguments as the catalog's reference takes them (float64 elements), outputs marked.
std::vector<kernels::Arg> ToKernelArgs(const std::vector<runner::CheckArg>& args,
                                       const std::vector<std::string>& outputs);

// What `run MODULE --list` reads of the command's options.
struct ListOptions {
  std::string module;   // the module file's path, as given
  std::string ir_file;  // --ir
  bool list = false;    // --list (else the list is the error of a missing -f)
  bool json = false;
};
// `run MODULE --list` (stdout, exit 0) or `run MODULE` without -f (stderr, exit 2).
int ListFunctions(const Module& m, const ListOptions& o);

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_CLI_RUN_SUPPORT_H_
