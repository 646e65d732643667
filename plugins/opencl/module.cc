// SPDX-License-Identifier: Apache-2.0
#include "module.h"

#include <algorithm>
#include <atomic>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/module.hpp>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "device_api.h"
#include "emitter.h"
#include "program_cache.h"

namespace backplane {
namespace opencl {

namespace {

std::atomic<int64_t> g_args_set{0};
std::atomic<int64_t> g_args_unchanged{0};

using Json = nlohmann::json;

// The first line of a saved opencl module. Version 2 saves the emitter's options, so loading
// can emit the OpenCL C again and compare; version 1 did not.
constexpr const char* kMagic = "BPOCLMOD2\n";
constexpr const char* kMagicPrefix = "BPOCLMOD";

// One kernel of the module and what a call needs.
struct Kernel {
  Kernel(const ir::PrimFunc& f, const std::vector<codegen::FaultSite>& sites)
      : sig(f, "opencl"),
        cl_name(KernelName(f)),
        args(KernelArgSpecs(f)),
        faults(KernelHasFaults(f, sites)) {
    for (const launch::Axis& a : sig.axes()) work_dim = std::max(work_dim, a.dim + 1);
  }
  launch::KernelSignature sig;  // as the launch kit binds it
  std::string cl_name;
  std::vector<KernelArgSpec> args;  // how the __kernel takes each param (saved with the module)
  bool faults = false;              // takes the fault record as a last argument
  int work_dim = 1;
};

// What the launch kit asks of this plugin: a handle's live buffer, and the device's limits.
class LaunchBackend final : public launch::Backend {
 public:
  explicit LaunchBackend(OpenCLDeviceAPI* api) : api_(api) {}
  launch::Allocation Find(DLDevice dev, void* handle) override {
    const auto e = api_->Resolve(dev, handle, 0, 0, "");
    return {e.info, 0, e.size};
  }
  const launch::DeviceLimits& Limits(DLDevice dev) override {
    return api_->CheckDevice(dev).limits;
  }

 private:
  OpenCLDeviceAPI* api_;
};

class OpenCLModule : public sdk::KernelModule {
 public:
  static constexpr const char* kKind = "opencl";

  OpenCLModule(ir::IRModule m, OpenCLCode code, OpenCLCodeOptions options)
      : ir_text_(ir::Print(m)),
        ir_(std::move(m)),
        source_(std::move(code.source)),
        sites_(std::move(code.sites)),
        options_(options) {
    for (const ir::PrimFunc& f : ir_.functions()) {
      kernel_names_.push_back(f.name);
      by_index_.push_back(&kernels_.try_emplace(f.name, f, sites_).first->second);
    }
  }
  ~OpenCLModule() override {
    // Functions hold the module: nothing can be enqueuing now. Enqueued work holds its own
    // references to the kernel and program (the OpenCL retain rules).
    for (auto& [key, state] : cl_kernels_) clReleaseKernel(state.kernel);
    for (auto& [id, program] : programs_) clReleaseProgram(program);
    for (auto& [id, mem] : fault_records_) clReleaseMemObject(mem);
  }

  std::optional<std::string> SaveToBytes() override {
    Json kernels = Json::array();
    for (const ir::PrimFunc& f : ir_.functions()) {
      const Kernel& k = kernels_.at(f.name);
      Json args = Json::array();
      for (const KernelArgSpec& a : k.args) {
        static const char* kKinds[] = {"int", "uint", "float", "buffer"};
        args.push_back({{"kind", kKinds[static_cast<int>(a.kind)]}, {"bytes", a.bytes}});
      }
      kernels.push_back({{"name", f.name},
                         {"cl_name", k.cl_name},
                         {"launch_params", ir::ToString(f.launch_axes.value())},
                         {"args", args}});
    }
    const Json header = {{"ir", ir_text_},
                         {"source", source_},
                         {"build_options", kBuildOptions},
                         {"kernels", kernels},
                         {"fault_sites", codegen::FaultSitesToJson(sites_)},
                         {"fp_contract", options_.fp_contract},
                         {"bounds_check", options_.bounds_check},
                         {"float16", options_.float16}};
    return std::string(kMagic) + header.dump();
  }
  std::optional<std::string> InspectSource(const std::string& format) override {
    if (format.empty() || format == "cl" || format == "opencl") return source_;
    if (format == "ir") return ir_text_;
    return std::nullopt;
  }

 private:
  // The program of this module built for device `id` (once; a failure is kept and reported
  // again on every call, with its build log, rather than compiling again).
  cl_program Program(OpenCLDeviceAPI* api, DLDevice dev) {
    const OpenCLDeviceAPI::Device& d = api->CheckDevice(dev);
    std::lock_guard<std::mutex> lock(build_mu_);
    auto failed = build_errors_.find(dev.device_id);
    if (failed != build_errors_.end()) throw failed->second;
    auto it = programs_.find(dev.device_id);
    if (it != programs_.end()) return it->second;
    std::string what = "the opencl module of";
    for (const ir::PrimFunc& f : ir_.functions()) what += " " + f.name;
    try {
      cl_program p = BuildProgram(d, source_, what);
      programs_[dev.device_id] = p;
      return p;
    } catch (const Error& e) {
      if (e.kind() == BP_ERR_INVALID_ARGUMENT) build_errors_.emplace(dev.device_id, e);
      throw;
    }
  }

  void Launch(size_t which, PackedArgs args) override {
    const Kernel& k = *by_index_[which];
    OpenCLDeviceAPI* api = OpenCLDeviceAPI::Global();
    // Reused by every launch on this thread: a warm launch allocates nothing.
    thread_local launch::BoundLaunch b;
    LaunchBackend backend(api);
    launch::Bind(k.sig, args, api->device_type(), backend, &b);
    if (b.empty) return;  // a grid with no block or no thread runs nothing
    const DLDevice dev = b.device;
    const OpenCLDeviceAPI::Device& device = api->CheckDevice(dev);
    // global = blocks * threads per dimension, which must fit a size_t.
    size_t global[3], local[3];
    for (int d = 0; d < 3; ++d) {
      local[d] = static_cast<size_t>(b.block[d]);
      if (__builtin_mul_overflow(static_cast<size_t>(b.grid[d]), local[d], &global[d])) {
        throw Error(BP_ERR_INVALID_ARGUMENT,
                    k.sig.Describe() + ": launch extents of " + std::to_string(b.grid[d]) +
                        " blocks of " + std::to_string(b.block[d]) + " threads along axis " +
                        std::string(1, static_cast<char>('x' + d)) +
                        " are more work-items than OpenCL can count; split the work");
      }
    }

    cl_program program = Program(api, dev);
    std::lock_guard<std::mutex> lock(launch_mu_);
    KernelState& state = cl_kernels_[{dev.device_id, &k}];
    if (state.kernel == nullptr) {
      cl_int err = CL_SUCCESS;
      state.kernel = clCreateKernel(program, k.cl_name.c_str(), &err);
      if (err != CL_SUCCESS) {
        state.kernel = nullptr;
        Check(err, "clCreateKernel(" + k.cl_name + ")");
      }
    }
    cl_kernel kernel = state.kernel;
    cl_uint index = 0;
    // An argument whose bytes are those set last time is not set again: a kernel called in a
    // loop on the same tensors sets nothing, and PoCL allocates on every clSetKernelArg.
    auto set = [&](size_t size, const void* value) {
      uint64_t bits = 0;
      std::memcpy(&bits, value, size);  // size <= 8: scalars, cl_mem, offsets
      if (index >= state.last.size()) state.last.resize(index + 1);
      KernelState::Arg& last = state.last[index];
      if (last.local || last.size != size || last.bits != bits) {
        last.size = 0;  // unknown until the call succeeds
        last.local = false;
        const cl_int err = clSetKernelArg(kernel, index, size, value);
        if (err != CL_SUCCESS) {
          Check(err, "clSetKernelArg(" + k.cl_name + ", " + std::to_string(index) + ")");
        }
        last.size = size;
        last.bits = bits;
        ++g_args_set;
      } else {
        ++g_args_unchanged;
      }
      ++index;
    };
    for (size_t i = 0; i < k.sig.num_params(); ++i) {
      const launch::ParamKind kind = k.sig.param(i);
      if (kind == launch::ParamKind::kBuffer) {
        // A buffer spanning no bytes was not looked up: the kernel gets a null pointer.
        const launch::BufferArg& buf = b.buffer(i);
        const cl_mem mem =
            buf.where.id == nullptr ? nullptr : static_cast<const Buffer*>(buf.where.id)->mem;
        const cl_long offset = static_cast<cl_long>(buf.byte_offset);
        set(sizeof(cl_mem), &mem);
        set(sizeof(cl_long), &offset);
      } else if (kind == launch::ParamKind::kFloat16) {
        // OpenCL takes no half argument: the __kernel takes a float (KernelArgSpecs), the
        // value of the half the launch kit rounded the argument to (rounded once).
        const float x = ir::HalfToFloat(b.scalar(i).f16);
        set(sizeof(x), &x);
      } else {
        set(b.scalar(i).bytes, &b.scalar(i).raw);
      }
    }
    // The shared arrays sized at launch: one __local argument each, after the params, of the
    // bytes this call gives it (OpenCL refuses a size of 0: an empty array gets one element).
    for (size_t i = 0; i < k.sig.shared().size(); ++i) {
      const launch::SharedArray& a = k.sig.shared()[i];
      if (!a.at_launch()) continue;
      const size_t bytes =
          static_cast<size_t>(std::max<uint64_t>(b.shared_elements[i], 1) * a.elem_bytes);
      if (index >= state.last.size()) state.last.resize(index + 1);
      KernelState::Arg& last = state.last[index];
      if (!last.local || last.size != bytes) {
        last.size = 0;
        const cl_int err = clSetKernelArg(kernel, index, bytes, nullptr);
        if (err != CL_SUCCESS) {
          Check(err, "clSetKernelArg(" + k.cl_name + ", " + std::to_string(index) + ", " +
                         std::to_string(bytes) + " bytes of __local memory for '" +
                         a.alloc->buffer.name() + "')");
        }
        last.size = bytes;
        last.local = true;
        ++g_args_set;
      } else {
        ++g_args_unchanged;
      }
      ++index;
    }
    cl_mem record = nullptr;
    if (k.faults) {
      record = FaultRecord(device, dev.device_id);
      set(sizeof(cl_mem), &record);
    }
    cl_command_queue queue = api->ActiveQueue(dev);
    const cl_int err = clEnqueueNDRangeKernel(queue, kernel, static_cast<cl_uint>(k.work_dim),
                                              nullptr, global, local, 0, nullptr, nullptr);
    if (err != CL_SUCCESS) {
      Check(err, "clEnqueueNDRangeKernel(" + k.cl_name + ") on " + sdk::DeviceString(dev));
    }
    if (record != nullptr) CheckFaults(queue, record, k);
  }

  // The fault record of device `id` (32 zero bytes, made on first use).
  cl_mem FaultRecord(const OpenCLDeviceAPI::Device& device, int32_t id) {
    auto it = fault_records_.find(id);
    if (it != fault_records_.end()) return it->second;
    codegen::FaultRecord zero;
    cl_int err = CL_SUCCESS;
    cl_mem mem = clCreateBuffer(device.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                                sizeof(zero), &zero, &err);
    Check(err, "clCreateBuffer(the fault record of the opencl module)");
    fault_records_[id] = mem;
    return mem;
  }

  // Waits for the kernel and reads its fault record (launch_mu_ held, so no other launch of
  // this module shares it meanwhile): a fault is raised as the interpreter's error, and the
  // record is cleared for the next launch.
  void CheckFaults(cl_command_queue queue, cl_mem record, const Kernel& k) {
    codegen::FaultRecord r;
    Check(clEnqueueReadBuffer(queue, record, CL_TRUE, 0, sizeof(r), &r, 0, nullptr, nullptr),
          "clEnqueueReadBuffer(the fault record of " + k.cl_name + ")");
    if (r.site == 0) return;
    const codegen::FaultRecord zero;
    Check(clEnqueueWriteBuffer(queue, record, CL_TRUE, 0, sizeof(zero), &zero, 0, nullptr, nullptr),
          "clEnqueueWriteBuffer(the fault record of " + k.cl_name + ")");
    throw Error(BP_ERR_INVALID_ARGUMENT, codegen::FaultMessage(sites_, r));
  }

  std::string ir_text_;
  ir::IRModule ir_;
  std::string source_;
  std::vector<codegen::FaultSite> sites_;
  OpenCLCodeOptions options_;
  std::map<int32_t, cl_mem> fault_records_;  // per device id, under launch_mu_
  std::map<std::string, Kernel> kernels_;
  std::vector<const Kernel*> by_index_;  // kernels_ in kernel_names_' order
  std::mutex build_mu_;
  std::map<int32_t, cl_program> programs_;  // per device id (each device has its context)
  std::map<int32_t, Error> build_errors_;   // per device id: a build that failed
  std::mutex launch_mu_;                    // clSetKernelArg + enqueue are one step
  // A kernel object per device id and kernel (an entry of kernels_, whose address is stable),
  // with the argument values last set on it.
  struct KernelState {
    struct Arg {
      size_t size = 0;  // 0: not set (or the last set failed)
      uint64_t bits = 0;
      bool local = false;  // a __local array of `size` bytes, not a value
    };
    cl_kernel kernel = nullptr;
    std::vector<Arg> last;
  };
  std::map<std::pair<int32_t, const Kernel*>, KernelState> cl_kernels_;
};

}  // namespace

OpenCLCode EmitOpenCL(const ir::IRModule& m, const OpenCLCodeOptions& options) {
  for (const ir::PrimFunc& f : m.functions()) launch::KernelSignature(f, "opencl");  // kernels only
  OpenCLEmitOptions emit;
  emit.fp_contract = options.fp_contract;
  emit.float16 = options.float16;
  OpenCLEmitter emitter(emit);
  codegen::CheckOptions checks;
  checks.bounds_check = options.bounds_check;
  emitter.set_checks(checks);
  OpenCLCode code;
  code.source = emitter.Emit(m);
  code.sites = emitter.fault_sites();
  return code;
}

Module MakeOpenCLModule(ir::IRModule m, OpenCLCode code, OpenCLCodeOptions options) {
  return sdk::MakeModule(std::make_shared<OpenCLModule>(std::move(m), std::move(code), options));
}

KernelArgStats GetKernelArgStats() {
  KernelArgStats s;
  s.set = g_args_set.load();
  s.unchanged = g_args_unchanged.load();
  return s;
}

Module LoadOpenCLModule(const std::string& bytes) {
  auto bad = [](const std::string& what) {
    return Error(BP_ERR_INVALID_ARGUMENT,
                 "the opencl module " + what +
                     "; rebuild the module from its IR with this Backplane (backplane build)");
  };
  const size_t magic = std::string(kMagic).size();
  if (bytes.compare(0, magic, kMagic) != 0) {
    if (bytes.compare(0, std::strlen(kMagicPrefix), kMagicPrefix) == 0) {
      throw bad("was saved by an older Backplane (" +
                bytes.substr(0, std::min(bytes.find('\n'), size_t{16})) +
                "), whose files this one cannot check");
    }
    throw bad("is not one (its bytes do not start with BPOCLMOD2)");
  }
  const Json header =
      Json::parse(bytes.begin() + static_cast<std::ptrdiff_t>(magic), bytes.end(), nullptr, false);
  std::string ir_text, source, sites_json;
  OpenCLCodeOptions options;
  try {
    if (header.is_discarded() || !header.is_object())
      throw bad("is damaged (its header is not JSON)");
    ir_text = header.at("ir").get<std::string>();
    source = header.at("source").get<std::string>();
    sites_json = header.at("fault_sites").get<std::string>();
    options.fp_contract = header.at("fp_contract").get<bool>();
    options.bounds_check = header.at("bounds_check").get<bool>();
    // Whether float16 is OpenCL's half (cl_khr_fp16, checked by name when the program is built
    // for a device) or a float rounded to half; a module saved before the key existed had no
    // float16 code this Backplane emits, so false.
    options.float16 = header.contains("float16") && header.at("float16").get<bool>();
  } catch (const Json::exception& e) {
    throw bad(std::string("is damaged (its header lacks a field or has a wrong type: ") + e.what() +
              ")");
  }
  // What the build established, established again: the IR verifies and holds kernels only, and
  // the OpenCL C (which PoCL, say, compiles to code running in this process) and its check table
  // are exactly what this code generator makes of that IR.
  ir::IRModule m;
  OpenCLCode code;
  try {
    m = ir::Parse(ir_text, "the opencl module's IR");
    ir::Verify(m);
    if (m.functions().empty()) throw bad("holds no kernel");
    code = EmitOpenCL(m, options);
  } catch (const ir::Error& e) {
    throw bad(std::string("holds IR that is not a set of kernels this Backplane builds: ") +
              e.what());
  }
  if (code.source != source) {
    throw bad(
        "holds OpenCL C that is not what this Backplane generates from the module's IR (the file "
        "was changed after it was built, or built by another version)");
  }
  if (codegen::FaultSitesToJson(code.sites) != sites_json) {
    throw bad("holds a table of run-time checks that does not match its OpenCL C");
  }
  return MakeOpenCLModule(std::move(m), std::move(code), options);
}

}  // namespace opencl
}  // namespace backplane
