// SPDX-License-Identifier: Apache-2.0
#include "module.h"

#include <dlfcn.h>

#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/kernel_args.hpp>
#include <backplane/sdk/module.hpp>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "c_emitter.h"
#include "openmp.h"
#include "target.h"

namespace backplane {
namespace cpu {

namespace {

using Json = nlohmann::json;
using codegen::CEmitter;

// The first line of a saved c module.
constexpr const char* kMagic = "BPCMOD1\n";

// The generated code's calling convention (CEmitter): one union a parameter, and a context
// whose first member is the call_packed callback.
union CArg {
  int64_t i;
  double f;
  void* p;
};
struct CContext;
using CallPackedFn = int32_t (*)(CContext* ctx, const char* name, int32_t num_args,
                                 const int32_t* codes, const CArg* args);
using EntryFn = int32_t (*)(const CArg* args, CContext* ctx);
// The packed entry (CEmitter::kPackedPrefix): the call's own arguments, checked in generated
// code, and a context of which it reads the first two members.
struct PackedContext {
  CallPackedFn call_packed;
  codegen::FaultRecord* fault;
};
using PackedFn = int32_t (*)(const bp_value_t* args, int32_t num_args, PackedContext* ctx);

// The generated code's own spelling of bp_value_t and DLTensor (CEmitter::PackedEntryTypes).
static_assert(sizeof(bp_value_t) == 16 && offsetof(bp_value_t, u) == 8, "bp_value_t layout");
static_assert(offsetof(DLTensor, data) == 0 && offsetof(DLTensor, device) == 8 &&
                  offsetof(DLTensor, ndim) == 16 && offsetof(DLTensor, dtype) == 20 &&
                  offsetof(DLTensor, shape) == 24 && offsetof(DLTensor, strides) == 32 &&
                  offsetof(DLTensor, byte_offset) == 40,
              "DLTensor layout");
static_assert(BP_VALUE_INT == 1 && BP_VALUE_FLOAT == 2 && BP_VALUE_TENSOR == 6 && kDLCPU == 1 &&
                  kDLCUDAHost == 3 && kDLROCMHost == 11,
              "the codes the packed entries compare against");

class CModule;

struct CContext {
  CallPackedFn call_packed;     // must stay the first member (bp_ctx_t in the generated code)
  codegen::FaultRecord* fault;  // must stay the second member
  CModule* module;
  const std::vector<ir::ArgView>* views;
  std::string failure;  // set when a call_packed fails
};

bool OnHost(DLDevice dev) {
  return dev.device_type == kDLCPU || dev.device_type == kDLCUDAHost ||
         dev.device_type == kDLROCMHost;
}

// The bytes [begin, end) a buffer argument spans (a negative stride reaches below `data`);
// false when its shape and strides reach past 64 bits, which no real buffer does.
bool Span(const ir::ArgView& v, std::pair<uintptr_t, uintptr_t>* out) {
  const uintptr_t begin = reinterpret_cast<uintptr_t>(v.data);
  int64_t low = 0, high = 0;  // offsets of the lowest and the highest element, in elements
  int64_t stride = 1, step = 0;
  for (int d = v.ndim - 1; d >= 0; --d) {
    if (v.shape[d] == 0) {
      *out = {begin, begin};
      return true;
    }
    const int64_t s = v.strides != nullptr ? v.strides[d] : stride;
    int64_t& side = s < 0 ? low : high;
    if (__builtin_mul_overflow(v.shape[d] - 1, s, &step) ||
        __builtin_add_overflow(side, step, &side) ||
        __builtin_mul_overflow(stride, v.shape[d], &stride)) {
      return false;
    }
  }
  const int64_t bytes = (v.dtype.bits * v.dtype.lanes + 7) / 8;
  if (__builtin_mul_overflow(low, bytes, &low) || __builtin_mul_overflow(high, bytes, &high) ||
      __builtin_add_overflow(high, bytes, &high)) {
    return false;
  }
  *out = {begin + static_cast<uintptr_t>(low), begin + static_cast<uintptr_t>(high)};
  return true;
}

class CModule : public sdk::ModuleBase {
 public:
  static constexpr const char* kKind = "c";

  CModule(std::string ir_text, ir::IRModule ir, std::string source, CompileOptions options,
          std::string library_path, std::string library_bytes,
          std::vector<codegen::FaultSite> sites)
      : ir_text_(std::move(ir_text)),
        ir_(std::move(ir)),
        source_(std::move(source)),
        options_(std::move(options)),
        library_path_(std::move(library_path)),
        library_bytes_(std::move(library_bytes)),
        sites_(std::move(sites)) {}
  ~CModule() override {
    // Functions hold the module, so no code of the library can still be running.
    if (handle_ != nullptr) dlclose(handle_);
  }

  Function GetFunction(const std::string& name) override;
  std::vector<std::string> ListFunctions() override {
    std::vector<std::string> names;
    for (const ir::PrimFunc& f : ir_.functions()) names.push_back(f.name);
    return names;
  }
  std::optional<std::string> SaveToBytes() override {
    Json header = {{"ir", ir_text_},
                   {"source", source_},
                   {"cc", options_.cc},
                   {"flags", options_.flags},
                   {"triple", options_.triple},
                   {"num_threads", options_.num_threads},
                   {"fault_sites", codegen::FaultSitesToJson(sites_)}};
    std::string library = library_bytes_.empty() ? ReadFileBytes(library_path_) : library_bytes_;
    header["library_size"] = library.size();
    return std::string(kMagic) + header.dump() + "\n" + library;
  }
  std::optional<std::string> InspectSource(const std::string& format) override {
    if (format.empty() || format == "c") return source_;
    if (format == "ir") return ir_text_;
    return std::nullopt;
  }

  const std::vector<codegen::FaultSite>& sites() const { return sites_; }

  // A global function called by generated code, looked up once per name.
  Function Callee(const std::string& name) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = callees_.find(name);
    if (it != callees_.end()) return it->second;
    Function f = Function::Get(name);
    callees_.emplace(name, f);
    return f;
  }

 private:
  void* Handle() {
    std::call_once(load_once_, [this] {
      if (library_path_.empty()) {
        load_error_ = "the module was built for " + options_.triple + " and this machine is " +
                      HostTriple() + "; load the saved module on a machine of that kind";
        return;
      }
      // The first library that brings the OpenMP runtime gets Backplane's settings for it
      // (openmp.h); the runtime then stays loaded for the life of the process.
      handle_ = openmp::LoadKernelLibrary(library_path_);
      if (handle_ == nullptr) {
        const char* why = dlerror();
        load_error_ = "cannot load the compiled library " + library_path_ + ": " +
                      (why != nullptr ? why : "unknown reason") +
                      "; rebuild the module (the cache folder may have been cleaned)";
      }
    });
    if (handle_ == nullptr) throw Error(BP_ERR_UNSUPPORTED, "c module: " + load_error_);
    return handle_;
  }

  std::string ir_text_;
  ir::IRModule ir_;
  std::string source_;
  CompileOptions options_;
  std::string library_path_;   // empty when the library is for another machine
  std::string library_bytes_;  // held only when there is no library_path_
  std::once_flag load_once_;
  void* handle_ = nullptr;
  std::string load_error_;
  std::mutex mu_;
  std::map<std::string, Function> callees_;
  std::vector<codegen::FaultSite> sites_;
};

// One function of a c module: the entry point and what checking a call needs.
struct CKernel {
  std::shared_ptr<CModule> module;
  const ir::PrimFunc* func;
  EntryFn entry;
  PackedFn packed = nullptr;          // null: every call takes Call's check
  std::vector<uint32_t> buffers;      // the buffer params' indices
  std::vector<uint32_t> written;      // those the function may write
  std::optional<ir::ArgCheck> check;  // every call's argument check, prepared once

  void Call(const bp_value_t* args, int32_t num_args) const;
  // Throws the error of a run that returned `rc` != 0 (a fault, a failed call_packed).
  [[noreturn]] void Raise(int32_t rc, const codegen::FaultRecord& fault,
                          const std::string& failure) const;
};

// The packed entry has no call_packed to make (CEmitter gives none to a function with one).
int32_t NoCallPacked(CContext*, const char*, int32_t, const int32_t*, const CArg*) noexcept {
  return BP_ERR_INTERNAL;
}

// A function's body. A call the packed entry accepts runs with no other work: its checks are
// ir::ArgCheck's fast path and the restrict check, compiled. Any call it refuses (a mismatch, a
// tensor object, a function without a packed entry) takes Call, whose check gives the message
// or, for a call the packed entry leaves to the runtime, runs it.
bp_status_t CallKernel(void* resource, const bp_value_t* args, int32_t num_args,
                       bp_value_t*) noexcept {
  const CKernel* k = static_cast<const CKernel*>(resource);
  if (k->packed != nullptr) {
    codegen::FaultRecord fault;
    PackedContext ctx{NoCallPacked, &fault};
    const int32_t rc = k->packed(args, num_args, &ctx);
    if (__builtin_expect(rc == 0, 1)) return BP_OK;
    if (rc != CEmitter::kRefused) {
      return CatchAtEdge([&] { k->Raise(rc, fault, std::string()); });
    }
  }
  return CatchAtEdge([&] { k->Call(args, num_args); });
}

int32_t CallPackedFromC(CContext* ctx, const char* name, int32_t num_args, const int32_t* codes,
                        const CArg* args) noexcept {
  // Called from generated C: nothing may be thrown through it.
  try {
    std::vector<bp_value_t> values(static_cast<size_t>(num_args));
    for (int32_t i = 0; i < num_args; ++i) {
      bp_value_t& v = values[static_cast<size_t>(i)];
      v.reserved0 = 0;
      if (codes[i] == CEmitter::kArgFloat) {
        v.type = BP_VALUE_FLOAT;
        v.u.v_float64 = args[i].f;
      } else if (codes[i] == CEmitter::kArgParamBuffer) {
        v.type = BP_VALUE_TENSOR;
        v.u.v_tensor = static_cast<DLTensor*>((*ctx->views)[static_cast<size_t>(args[i].i)].user);
      } else {
        v.type = BP_VALUE_INT;
        v.u.v_int64 = args[i].i;
      }
    }
    Function callee = ctx->module->Callee(name);
    callee.CallPacked(values.data(), num_args);
    return BP_OK;
  } catch (const Error& e) {
    ctx->failure = std::string("call_packed(\"") + name + "\") failed: " + e.what();
    return e.kind() == BP_OK ? BP_ERR_INTERNAL : e.kind();
  } catch (const std::exception& e) {
    ctx->failure = std::string("call_packed(\"") + name + "\") failed: " + e.what();
    return BP_ERR_INTERNAL;
  } catch (...) {
    ctx->failure = std::string("call_packed(\"") + name + "\") failed";
    return BP_ERR_INTERNAL;
  }
}

void CKernel::Call(const bp_value_t* args, int32_t num_args) const {
  // Reused by every call on this thread: a warm call allocates nothing. A call that the
  // kernel makes back into this thread (call_packed) uses its own level. One thread-local
  // object: one TLS lookup a call. (Deques: growing one for a nested call leaves the outer
  // calls' vectors where they are.)
  struct Level {
    std::vector<ir::ArgView> views;
    std::vector<CArg> c_args;
    std::vector<std::pair<uintptr_t, uintptr_t>> spans;
  };
  struct Scratch {
    std::deque<Level> levels;
    size_t depth = 0;
  };
  thread_local Scratch scratch;
  if (scratch.levels.size() <= scratch.depth) scratch.levels.resize(scratch.depth + 1);
  Level& level = scratch.levels[scratch.depth];
  std::vector<ir::ArgView>& views = level.views;
  std::vector<CArg>& c_args = level.c_args;
  struct Nest {
    size_t& depth;
    ~Nest() { --depth; }
  } nest{++scratch.depth};
  sdk::BindKernelArgs(*func, args, num_args, "c", OnHost, *check, &views);
  const size_t n = views.size();
  // Buffers are restrict pointers in the generated code: a written buffer must not overlap
  // another buffer argument.
  if (!written.empty()) {
    for (const uint32_t i : written) sdk::CheckWritable(*func, args[i], i, "c");
    std::vector<std::pair<uintptr_t, uintptr_t>>& spans = level.spans;
    spans.resize(n);
    for (size_t i = 0; i < n; ++i) {
      spans[i] = std::pair<uintptr_t, uintptr_t>();
      if (views[i].kind == ir::ArgView::Kind::kBuffer && !Span(views[i], &spans[i])) {
        throw Error(BP_ERR_INVALID_ARGUMENT,
                    "c function '" + func->name + "': argument " + std::to_string(i) + " '" +
                        func->params[i].buffer().name() +
                        "' spans more bytes than an address can reach (its shape and strides "
                        "multiply past 2^63); pass a tensor whose shape and strides describe "
                        "memory it has");
      }
    }
    launch::CheckWrittenApart("c", "function", *func, written, buffers, [&spans](uint32_t i) {
      return launch::ByteRange{nullptr, spans[i].first, spans[i].second};
    });
  }
  c_args.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const ir::ArgView& v = views[i];
    if (v.kind == ir::ArgView::Kind::kBuffer) {
      c_args[i].p = v.data;
    } else if (func->params[i].var().dtype().is_float()) {
      c_args[i].f = v.kind == ir::ArgView::Kind::kFloat ? v.f : static_cast<double>(v.i);
    } else {
      c_args[i].i = v.i;
    }
  }
  codegen::FaultRecord fault;
  CContext ctx{CallPackedFromC, &fault, module.get(), &views, {}};
  const int32_t rc = entry(c_args.data(), &ctx);
  if (rc != 0 || fault.site != 0) Raise(rc, fault, ctx.failure);
}

void CKernel::Raise(int32_t rc, const codegen::FaultRecord& fault,
                    const std::string& failure) const {
  if (fault.site != 0) {
    // The first run-time check that failed (a call_packed failure after it is a consequence).
    const std::vector<codegen::FaultSite>& sites = module->sites();
    throw Error(
        codegen::FaultIsOutOfMemory(sites, fault) ? BP_ERR_OUT_OF_MEMORY : BP_ERR_INVALID_ARGUMENT,
        codegen::FaultMessage(sites, fault));
  }
  throw Error(rc, "c function '" + func->name + "': " +
                      (failure.empty() ? "failed with status " + std::to_string(rc) : failure));
}

Function CModule::GetFunction(const std::string& name) {
  const ir::PrimFunc* func = ir_.Find(name);
  if (func == nullptr) return Function();
  void* symbol = dlsym(Handle(), (std::string(CEmitter::kEntryPrefix) + name).c_str());
  if (symbol == nullptr) {
    throw Error(BP_ERR_INTERNAL, "c module: the compiled library " + library_path_ +
                                     " lacks the entry point of '" + name +
                                     "'; rebuild the module");
  }
  auto kernel = std::make_unique<CKernel>();
  kernel->module = std::static_pointer_cast<CModule>(shared_from_this());
  kernel->func = func;
  kernel->check.emplace(*func);
  kernel->entry = reinterpret_cast<EntryFn>(symbol);
  // Libraries built before packed entries existed have none: their calls take Call.
  kernel->packed = reinterpret_cast<PackedFn>(
      dlsym(Handle(), (std::string(CEmitter::kPackedPrefix) + name).c_str()));
  const std::vector<const ir::BufferNode*> written = ir::WrittenBuffers(func->body);
  for (uint32_t i = 0; i < func->params.size(); ++i) {
    const ir::Param& p = func->params[i];
    if (!p.is_buffer()) continue;
    kernel->buffers.push_back(i);
    for (const ir::BufferNode* b : written) {
      if (p.buffer().get() == b) {
        kernel->written.push_back(i);
        break;
      }
    }
  }
  bp_object_t* out = nullptr;
  CKernel* raw = kernel.get();
  Check(Function::CreateContained(
      CallKernel, raw, [](void* resource) { delete static_cast<CKernel*>(resource); }, &out));
  kernel.release();
  return Function(ObjectRef::Adopt(out));
}

}  // namespace

Module MakeCModule(ir::IRModule ir, std::string source, CompileOptions options,
                   std::string library_path, std::vector<codegen::FaultSite> sites) {
  std::string ir_text = ir::Print(ir);
  return sdk::MakeModule(std::make_shared<CModule>(
      std::move(ir_text), std::move(ir), std::move(source), std::move(options),
      std::move(library_path), std::string(), std::move(sites)));
}

Module LoadCModule(const std::string& bytes) {
  auto bad = [](const std::string& what) {
    return Error(BP_ERR_INVALID_ARGUMENT,
                 "runtime.module.load_from_bytes.c: " + what +
                     "; the saved module is damaged or was not written by a c module");
  };
  const std::string magic = kMagic;
  if (bytes.compare(0, magic.size(), magic) != 0) {
    throw bad("the bytes do not start with the c module marker");
  }
  const size_t eol = bytes.find('\n', magic.size());
  if (eol == std::string::npos) throw bad("the header line has no end");
  Json header = Json::parse(bytes.begin() + static_cast<std::ptrdiff_t>(magic.size()),
                            bytes.begin() + static_cast<std::ptrdiff_t>(eol), nullptr, false);
  if (!header.is_object()) throw bad("the header is not a JSON object");
  CompileOptions options;
  std::string ir_text, source;
  size_t library_size = 0;
  std::vector<codegen::FaultSite> sites;
  try {
    ir_text = header.at("ir").get<std::string>();
    source = header.at("source").get<std::string>();
    options.cc = header.at("cc").get<std::string>();
    options.flags = header.at("flags").get<std::vector<std::string>>();
    options.triple = header.at("triple").get<std::string>();
    options.num_threads = header.at("num_threads").get<int>();
    library_size = header.at("library_size").get<size_t>();
    // Modules saved before the run-time checks existed have no table (and no checks).
    if (header.contains("fault_sites")) {
      sites = codegen::FaultSitesFromJson(header.at("fault_sites").get<std::string>());
    }
  } catch (const ir::Error& e) {
    throw bad(e.what());
  } catch (const Json::exception& e) {
    throw bad(std::string("the header lacks a field or has a wrong type (") + e.what() + ")");
  }
  if (library_size != bytes.size() - eol - 1) {
    throw bad("the library is " + std::to_string(bytes.size() - eol - 1) +
              " bytes but the header says " + std::to_string(library_size));
  }
  // The caller allowed native code, so the library is trusted; the IR is what calls are checked
  // against before they reach it, so it must still be IR the code generator accepts.
  ir::IRModule ir;
  try {
    ir = ir::Parse(ir_text, "saved c module");
    ir::VerifyOptions verify;
    verify.device_is_cpu = true;
    ir::Verify(ir, verify);
  } catch (const ir::Error& e) {
    throw bad(std::string("its IR does not parse or verify: ") + e.what());
  }
  std::string library = bytes.substr(eol + 1);
  std::string path;
  std::string held;
  if (options.triple.substr(0, options.triple.find('-')) ==
      HostTriple().substr(0, HostTriple().find('-'))) {
    path = CacheLibraryBytes(library);
  } else {
    held = std::move(library);
  }
  return sdk::MakeModule(std::make_shared<CModule>(
      std::move(ir_text), std::move(ir), std::move(source), std::move(options), std::move(path),
      std::move(held), std::move(sites)));
}

}  // namespace cpu
}  // namespace backplane
