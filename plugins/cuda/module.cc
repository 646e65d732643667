// SPDX-License-Identifier: Apache-2.0
#include "module.h"

#include <algorithm>
#include <atomic>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/sdk/module.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "device_api.h"
#include "launch_phases.h"

namespace backplane {
namespace cuda {

namespace {

// Version 2 saves the emitter's options, so loading emits the CUDA C again and compares.
// Version 3: kernels take the block offset of each grid axis they bind (large grids).
constexpr const char* kMagic = "backplane-cuda-module 3\n";
constexpr int64_t kStaticSharedLimit = 48 * 1024;

class CUDAModule : public sdk::KernelModule {
 public:
  static constexpr const char* kKind = "cuda";

  CUDAModule(CUDAModuleData data, ir::IRModule module)
      : data_(std::move(data)), module_(std::move(module)) {
    for (const KernelInfo& k : data_.kernels) {
      kernel_names_.push_back(k.name);
      const ir::PrimFunc* f = module_.Find(k.name);
      if (f == nullptr || f->params.size() != k.arg_types.size()) {
        throw Error(BP_ERR_INVALID_ARGUMENT,
                    "cuda module: the function table's kernel '" + k.name +
                        "' does not match the module's IR; the module is damaged, rebuild it");
      }
      funcs_.push_back(f);
      sigs_.emplace_back(*f, "cuda");
      CheckTable(k, sigs_.back());
      offset_axes_.push_back(BlockOffsetAxes(k));
    }
  }

  ~CUDAModule() override {
    const Driver& d = Driver::Get();
    if (!d.ok) return;
    // cuModuleUnload unloads from the current context: make the module's context current on
    // this thread (whichever thread drops the last reference), and restore what was.
    for (const std::unique_ptr<Loaded>& owned : loaded_) {
      if (owned == nullptr) continue;
      Loaded& l = *owned;
      if (l.module == nullptr && l.fault == 0) continue;
      if (d.cuCtxPushCurrent(l.context) != CUDA_SUCCESS) continue;
      if (l.module != nullptr) d.cuModuleUnload(l.module);  // errors at exit are of no use
      if (l.fault != 0) d.cuMemFree(l.fault);
      CUcontext popped = nullptr;
      d.cuCtxPopCurrent(&popped);
    }
  }

  std::optional<std::string> SaveToBytes() override { return SerializeCUDAModule(data_); }
  std::optional<std::string> InspectSource(const std::string& format) override {
    if (format.empty() || format == "cuda" || format == "cu") return data_.source;
    if (format == "ir") return data_.ir;
    if (format == "ptx" && !data_.cubin) return data_.binary;
    if (format == "cubin" && data_.cubin) return data_.binary;
    return std::nullopt;
  }

 private:
  struct Loaded {
    CUcontext context = nullptr;  // the device's primary context, the module's home
    CUmodule module = nullptr;
    std::vector<CUfunction> functions;
    CUdeviceptr fault = 0;  // the fault record (32 zero bytes), when a kernel has checks
    // Per kernel, the dynamic shared memory it was let take past 48 KiB (OptInShared; under
    // mu_: the only field that changes after the module is published).
    std::vector<uint64_t> shared_allowed;
  };

  // "" when the driver can load the module's PTX; else why not, naming both versions. NVRTC
  // writes the PTX ISA version it targets in `.version`; a driver JIT-compiles only the ISA
  // versions of its own CUDA release and older.
  std::string PtxVersionProblem(const Driver& d) const {
    if (data_.cubin) return "";
    const size_t at = data_.binary.find(".version ");
    int major = 0, minor = 0;
    if (at == std::string::npos ||
        std::sscanf(data_.binary.c_str() + at, ".version %d.%d", &major, &minor) != 2) {
      return "";
    }
    const int isa = major * 10 + minor;
    const int max = MaxPtxIsa(d.version);
    if (d.version == 0 || isa <= max) return "";
    return "the module's PTX is ISA version " + std::to_string(major) + "." +
           std::to_string(minor) + ", but the NVIDIA driver here is for CUDA " +
           std::to_string(d.version / 1000) + "." + std::to_string(d.version % 1000 / 10) +
           " and JIT-compiles PTX up to ISA " + std::to_string(max / 10) + "." +
           std::to_string(max % 10) + "; update the driver (" + DriverBranchForPtxIsa(isa) +
           " or newer), or build the module with an older CUDA Toolkit's NVRTC, or with "
           "-cubin=1 for this GPU's exact arch";
  }

  // The module loaded in the context of `device_id` (an existing device), loading it there on
  // first use. Once loaded, a read without a lock: the entry is published (release) when
  // complete and never changes after, but for shared_allowed. The entry is kept only when the
  // module and every function of it loaded: a failure leaves nothing behind, and the next launch
  // tries again.
  const Loaded& Load(CUDADeviceAPI* api, int32_t device_id) {
    const size_t id = static_cast<size_t>(device_id);
    if (id < published_count_) {
      if (const Loaded* l = published_[id].load(std::memory_order_acquire)) return *l;
    }
    return LoadSlow(api, device_id);
  }

  const Loaded& LoadSlow(CUDADeviceAPI* api, int32_t device_id) {
    std::lock_guard<std::mutex> lock(mu_);
    if (loaded_.size() <= static_cast<size_t>(device_id)) loaded_.resize(device_id + 1);
    if (loaded_[static_cast<size_t>(device_id)] != nullptr) {
      return *loaded_[static_cast<size_t>(device_id)];
    }
    const Driver& d = api->driver();
    const std::string where = "cuda:" + std::to_string(device_id);
    const std::string problem = PtxVersionProblem(d);
    if (!problem.empty()) {
      throw Error(BP_ERR_DEVICE, "loading the cuda module on " + where + ": " + problem);
    }
    Loaded l;
    l.context = api->Context(device_id);
    // cuModuleLoadDataEx with a JIT error log, so a PTX the driver refuses says why.
    std::string log(8192, '\0');
    CUjit_option options[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void* values[2] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size()))};
    const CUresult r = d.cuModuleLoadDataEx(&l.module, data_.binary.c_str(), 2, options, values);
    if (r != CUDA_SUCCESS) {
      log.resize(std::strlen(log.c_str()));
      Fail(r, std::string("cuModuleLoadDataEx of the module's ") + (data_.cubin ? "cubin" : "PTX") +
                  " for " + data_.arch + " on " + where +
                  " (a cubin runs only on its exact arch, PTX for sm_XY on that arch and newer, "
                  "PTX for sm_XYa only on sm_XY)" +
                  (log.empty() ? std::string() : "; the JIT log says: " + log));
    }
    // Until the entry is committed, a failure unloads what was loaded.
    struct Rollback {
      const Driver& d;
      Loaded& l;
      bool armed = true;
      ~Rollback() {
        if (!armed) return;
        if (l.fault != 0) d.cuMemFree(l.fault);
        d.cuModuleUnload(l.module);
      }
    } rollback{d, l};
    l.functions.assign(data_.kernels.size(), nullptr);
    l.shared_allowed.assign(data_.kernels.size(), 0);
    for (size_t i = 0; i < data_.kernels.size(); ++i) {
      const KernelInfo& k = data_.kernels[i];
      Check(d.cuModuleGetFunction(&l.functions[i], l.module, k.symbol.c_str()),
            [&] { return "cuModuleGetFunction('" + k.symbol + "') on " + where; });
      if (k.faults && l.fault == 0) {
        const codegen::FaultRecord zero;
        Check(d.cuMemAlloc(&l.fault, sizeof(zero)), "cuMemAlloc of the fault record");
        Check(d.cuMemcpyHtoDAsync(l.fault, &zero, sizeof(zero), nullptr),
              "clearing the fault record");
        Check(d.cuStreamSynchronize(nullptr), "clearing the fault record");
      }
      if (k.dynamic_shared_bytes > kStaticSharedLimit) {
        Check(d.cuFuncSetAttribute(l.functions[i], CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                   static_cast<int>(k.dynamic_shared_bytes)),
              [&] {
                return "kernel '" + k.name + "' needs " + std::to_string(k.dynamic_shared_bytes) +
                       " bytes of shared memory; cuFuncSetAttribute";
              });
        l.shared_allowed[i] = static_cast<uint64_t>(k.dynamic_shared_bytes);
      }
    }
    rollback.armed = false;
    loaded_[static_cast<size_t>(device_id)] = std::make_unique<Loaded>(std::move(l));
    const Loaded* done = loaded_[static_cast<size_t>(device_id)].get();
    if (static_cast<size_t>(device_id) < published_count_) {
      published_[static_cast<size_t>(device_id)].store(done, std::memory_order_release);
    }
    return *done;
  }

  // Lets kernel `index` on `device_id` (loaded: `fn`) take `bytes` of dynamic shared memory, if
  // an earlier launch there did not allow as much already.
  void OptInShared(CUDADeviceAPI* api, int32_t device_id, size_t index, CUfunction fn,
                   uint64_t bytes) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint64_t>& allowed = loaded_[static_cast<size_t>(device_id)]->shared_allowed;
    if (allowed.size() <= index) allowed.resize(data_.kernels.size(), 0);
    if (allowed[index] >= bytes) return;
    const KernelInfo& k = data_.kernels[index];
    Check(api->driver().cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           static_cast<int>(bytes)),
          [&] {
            return "kernel '" + k.name + "' needs " + std::to_string(bytes) +
                   " bytes of shared memory at this launch; cuFuncSetAttribute";
          });
    allowed[index] = bytes;
  }

  // The function table of a module (saved, or emitted) agrees with the kernel's IR, as the
  // launch kit reads it: parameter kinds, launch axes, written buffers.
  static void CheckTable(const KernelInfo& k, const launch::KernelSignature& sig) {
    bool same = k.arg_types.size() == sig.num_params() &&
                k.launch_axes.size() == sig.axes().size() && k.written.size() == sig.num_params() &&
                k.dynamic_shared_bytes == static_cast<int64_t>(sig.static_shared_bytes());
    for (size_t i = 0; same && i < sig.num_params(); ++i) {
      const launch::ParamKind kind = sig.param(i);
      same = (kind == launch::ParamKind::kBuffer ? "handle" : launch::ToString(kind)) ==
                 k.arg_types[i] &&
             k.written[i] == sig.written(i);
    }
    for (size_t a = 0; same && a < sig.axes().size(); ++a) {
      same = k.launch_axes[a] == sig.axes()[a].tag;
    }
    if (!same) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "cuda module: the function table's kernel '" + k.name +
                      "' does not match the module's IR (parameters, launch axes, written "
                      "buffers or shared memory); the module is damaged, rebuild it");
    }
  }

  // The plugin's allocations a thread's launches found last (LaunchBackend::Find), kept while
  // no allocation was freed (CUDADeviceAPI::Frees): a warm launch with the same buffers takes
  // no lock for them. Memory the driver knows but the plugin did not allocate is looked up
  // every time (its owner may free it without the plugin knowing).
  struct FoundAllocations {
    static constexpr int kSize = 8;
    struct Found {
      uintptr_t base = 0;
      size_t size = 0;
      int32_t device_id = 0;
    };
    uint64_t frees = ~uint64_t{0};  // CUDADeviceAPI::Frees() when the entries were found
    Found found[kSize];
    int count = 0;
    int next = 0;  // the entry a new one replaces when all are taken
  };

  // Reused by every launch on this thread: a warm launch allocates nothing.
  struct Scratch {
    launch::BoundLaunch b;
    std::vector<CUdeviceptr> addresses;
    std::vector<void*> pointers;
    int64_t offsets[3] = {0, 0, 0};  // the block offsets the kernel takes, per grid axis
    FoundAllocations found;
  };
  // The thread's Scratch, through a call the compiler does not see into. In this dlopen'ed
  // library each use of a thread_local's address is a __tls_get_addr call, and GCC made it
  // again at each use rather than keep it (two a parameter in the packing loop, 19 to 27 in
  // Launch); a plain pointer returned from here stays in a register or on the stack.
  __attribute__((noinline)) static Scratch& ThreadScratch() {
    thread_local Scratch scratch;
    return scratch;
  }

  // What the launch kit asks of this plugin: where a device address lies, and the limits.
  class LaunchBackend final : public launch::Backend {
   public:
    LaunchBackend(CUDADeviceAPI* api, FoundAllocations* cache) : api_(api), cache_(cache) {}
    launch::Allocation Find(DLDevice dev, void* handle) override {
      const uintptr_t p = reinterpret_cast<uintptr_t>(handle);
      const uint64_t frees = api_->Frees();  // before Locate: a free during it is seen next time
      FoundAllocations& c = *cache_;
      if (c.frees != frees) {
        c.frees = frees;
        c.count = 0;
        c.next = 0;
      }
      for (int i = 0; i < c.count; ++i) {
        const FoundAllocations::Found& f = c.found[i];
        // Strictly inside (as Locate counts one past the end, another allocation may start
        // there: that address is looked up).
        if (f.device_id == dev.device_id && p >= f.base &&
            p - f.base < std::max<size_t>(f.size, 1)) {
          return {reinterpret_cast<const void*>(f.base), p - f.base, f.size};
        }
      }
      const CUDADeviceAPI::Range r = api_->Locate(dev, p, [] { return std::string(); });
      if (r.plugins && p - r.base < std::max<size_t>(r.size, 1)) {
        c.found[c.next] = {r.base, r.size, dev.device_id};
        c.next = (c.next + 1) % FoundAllocations::kSize;
        c.count = std::max(c.count, c.next == 0 ? FoundAllocations::kSize : c.next);
      }
      return {reinterpret_cast<const void*>(r.base), p - r.base, r.size};
    }
    const launch::DeviceLimits& Limits(DLDevice dev) override {
      return api_->Limits(dev.device_id);
    }

   private:
    CUDADeviceAPI* api_;
    FoundAllocations* cache_;
  };

  // The hot path. A warm launch (the module loaded, the buffers found since the last free) of a
  // kernel without run-time checks on the null stream makes two driver calls (cuCtxGetCurrent,
  // cuLaunchKernel) and takes no lock (a created stream adds the stream registry's); the phase
  // timer (launch_phases.h) marks where the time goes when BACKPLANE_CUDA_LAUNCH_PHASES is set.
  void Launch(size_t index, PackedArgs args) override {
    LaunchPhaseTimer timer;
    const KernelInfo& k = data_.kernels[index];
    const launch::KernelSignature& sig = sigs_[index];
    CUDADeviceAPI* api = CUDADeviceAPI::Global();
    Scratch& scratch = ThreadScratch();
    launch::BoundLaunch& b = scratch.b;
    std::vector<CUdeviceptr>& addresses = scratch.addresses;
    std::vector<void*>& pointers = scratch.pointers;
    int64_t* offsets = scratch.offsets;
    LaunchBackend backend(api, &scratch.found);
    launch::Bind(sig, args, api->device_type(), backend, &b);
    timer.Mark(LaunchPhase::kBind);
    if (b.empty) return;  // an empty grid: nothing runs
    const DLDevice device = b.device;
    const size_t num_params = sig.num_params();
    addresses.resize(num_params);
    pointers.resize(num_params);
    for (size_t i = 0; i < num_params; ++i) {
      if (sig.param(i) == launch::ParamKind::kBuffer) {
        const launch::BufferArg& buf = b.buffer(i);
        addresses[i] = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(buf.handle)) +
                       static_cast<CUdeviceptr>(buf.byte_offset);
        pointers[i] = &addresses[i];
      } else {
        pointers[i] = const_cast<uint64_t*>(&b.scalar(i).raw);
      }
    }
    offsets[0] = offsets[1] = offsets[2] = 0;
    for (int d : offset_axes_[index]) pointers.push_back(&offsets[d]);
    const unsigned block[3] = {static_cast<unsigned>(b.block[0]), static_cast<unsigned>(b.block[1]),
                               static_cast<unsigned>(b.block[2])};
    timer.Mark(LaunchPhase::kPack);
    // The thread's current context is asked for at every launch, not cached: the application,
    // cuBLAS or the runtime API may change it between two launches without the plugin knowing.
    api->Activate(device);
    timer.Mark(LaunchPhase::kContext);
    const Loaded& loaded = Load(api, device.device_id);
    CUfunction fn = loaded.functions[index];
    // Bind checked the shared memory against the device's opt-in limit; past the 48 KiB every
    // kernel may have, the function must opt in to this launch's size.
    if (b.shared_bytes > static_cast<uint64_t>(kStaticSharedLimit)) {
      OptInShared(api, device.device_id, index, fn, b.shared_bytes);
    }
    timer.Mark(LaunchPhase::kModule);
    CUstream stream = api->ActiveStream(device);
    timer.Mark(LaunchPhase::kStream);
    // A kernel with run-time checks gets the record last; one such launch at a time per
    // module, which waits for the kernel and reads the record (docs/codegen-guide.md).
    std::unique_lock<std::mutex> fault_lock(fault_mu_, std::defer_lock);
    CUdeviceptr record = 0;
    if (k.faults) {
      fault_lock.lock();
      record = loaded.fault;
      pointers.push_back(&record);
    }
    timer.Mark(LaunchPhase::kFaultLock);
    // cuLaunchKernel copies the values `pointers` point to, so the offsets may change between
    // the parts of a split launch.
    auto launch_part = [&](const int64_t part[3]) {
      const unsigned grid[3] = {static_cast<unsigned>(part[0]), static_cast<unsigned>(part[1]),
                                static_cast<unsigned>(part[2])};
      Check(api->driver().cuLaunchKernel(fn, grid[0], grid[1], grid[2], block[0], block[1],
                                         block[2], static_cast<unsigned>(b.shared_bytes), stream,
                                         pointers.empty() ? nullptr : pointers.data(), nullptr),
            [&] {
              std::string m = "cuLaunchKernel of '" + k.name + "' with grid (" +
                              std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " +
                              std::to_string(grid[2]) + ") and block (" + std::to_string(block[0]) +
                              ", " + std::to_string(block[1]) + ", " + std::to_string(block[2]) +
                              ") on " + sdk::DeviceString(device);
              if (b.split) {
                m += ", the part from block (" + std::to_string(offsets[0]) + ", " +
                     std::to_string(offsets[1]) + ", " + std::to_string(offsets[2]) +
                     ") of a grid of (" + std::to_string(b.grid[0]) + ", " +
                     std::to_string(b.grid[1]) + ", " + std::to_string(b.grid[2]) + ") blocks";
              }
              return m;
            });
    };
    if (!b.split) {
      launch_part(b.grid);  // the common case: one launch, offsets 0
    } else {
      // More blocks than one launch takes (MAX_GRID_DIM_*): one launch per part, in order on
      // the stream, each with its part's block offsets.
      try {
        launch::ForEachGridPart(b, [&](const launch::GridPart& p) {
          for (int d = 0; d < 3; ++d) offsets[d] = p.offset[d];
          launch_part(p.grid);
        });
      } catch (...) {
        // The parts queued before the one that failed may write the fault record: wait for
        // them and clear it, so that the next call does not report their fault as its own
        // (best effort: this call reports the failed launch).
        if (k.faults) {
          const Driver& d = api->driver();
          const codegen::FaultRecord zero;
          if (d.cuStreamSynchronize(stream) == CUDA_SUCCESS &&
              d.cuMemcpyHtoDAsync(record, &zero, sizeof(zero), stream) == CUDA_SUCCESS) {
            d.cuStreamSynchronize(stream);
          }
        }
        throw;
      }
    }
    timer.Mark(LaunchPhase::kLaunch);
    if (k.faults) {
      const Driver& d = api->driver();
      codegen::FaultRecord r;
      Check(d.cuMemcpyDtoHAsync(&r, record, sizeof(r), stream), "reading the fault record");
      Check(d.cuStreamSynchronize(stream),
            [&] { return "reading the fault record of '" + k.name + "'"; });
      if (r.site != 0) {
        const codegen::FaultRecord zero;
        Check(d.cuMemcpyHtoDAsync(record, &zero, sizeof(zero), stream),
              "clearing the fault record");
        Check(d.cuStreamSynchronize(stream), "clearing the fault record");
        throw Error(BP_ERR_INVALID_ARGUMENT, codegen::FaultMessage(data_.fault_sites, r));
      }
    }
    timer.Mark(LaunchPhase::kFaultRead);
  }

  CUDAModuleData data_;
  ir::IRModule module_;
  std::vector<const ir::PrimFunc*> funcs_;
  std::vector<launch::KernelSignature> sigs_;  // per kernel, as the launch kit binds it
  std::vector<std::vector<int>> offset_axes_;  // per kernel: BlockOffsetAxes
  std::mutex mu_;
  std::vector<std::unique_ptr<Loaded>> loaded_;  // by device id, under mu_
  // By device id: the entries of loaded_ that are complete, for a launch to read without mu_.
  // Sized at construction to the device count, which is fixed when the plugin loads (the
  // DeviceAPI is made then; not std::call_once, which sets two thread_locals at every call).
  const size_t published_count_ =
      static_cast<size_t>(std::max(CUDADeviceAPI::Global()->DeviceCount(), 1));
  const std::unique_ptr<std::atomic<const Loaded*>[]> published_ =
      std::make_unique<std::atomic<const Loaded*>[]>(published_count_);
  std::mutex fault_mu_;  // held from the launch of a kernel with checks to its record read
};

using Json = nlohmann::json;

}  // namespace

void EmitCUDA(CUDAModuleData* data) { EmitCUDA(data, ir::Parse(data->ir, "the cuda module's IR")); }

void EmitCUDA(CUDAModuleData* data, const ir::IRModule& module) {
  ir::Verify(module);
  CUDAEmitter emitter;
  codegen::CheckOptions checks;
  checks.bounds_check = data->bounds_check;
  emitter.set_checks(checks);
  data->source = emitter.Emit(module);
  data->kernels = emitter.kernels();
  data->fault_sites = emitter.fault_sites();
}

namespace {

bool SameKernel(const KernelInfo& a, const KernelInfo& b) {
  return a.name == b.name && a.symbol == b.symbol && a.arg_types == b.arg_types &&
         a.written == b.written && a.launch_axes == b.launch_axes &&
         a.dynamic_shared_bytes == b.dynamic_shared_bytes && a.faults == b.faults;
}

// "" when `ptx` declares every kernel of `kernels` as an entry whose params are exactly the
// launch's (its params, its block offsets, then the fault record when it has checks), each a scalar
// of at most 8 bytes: cuLaunchKernel reads one value a declared param from the slots the launch
// passes, so more params, or a larger one, would read past them. Otherwise what is wrong.
std::string PtxProblem(const std::string& ptx, const std::vector<KernelInfo>& kernels) {
  for (const KernelInfo& k : kernels) {
    const std::string decl = ".entry " + k.symbol;
    size_t at = std::string::npos;
    for (size_t p = ptx.find(decl); p != std::string::npos; p = ptx.find(decl, p + 1)) {
      size_t q = p + decl.size();
      while (q < ptx.size() && (ptx[q] == ' ' || ptx[q] == '\t' || ptx[q] == '\n')) ++q;
      if (q < ptx.size() && ptx[q] == '(') {
        if (at != std::string::npos) return "its PTX declares kernel '" + k.symbol + "' twice";
        at = q + 1;
      }
    }
    if (at == std::string::npos) return "its PTX does not declare kernel '" + k.symbol + "'";
    const size_t close = ptx.find(')', at);
    if (close == std::string::npos) return "its PTX declaration of '" + k.symbol + "' has no end";
    std::vector<std::string> params;
    std::stringstream list(ptx.substr(at, close - at));
    for (std::string item; std::getline(list, item, ',');) {
      if (item.find_first_not_of(" \t\n") != std::string::npos) params.push_back(item);
    }
    const size_t want = k.arg_types.size() + BlockOffsetAxes(k).size() + (k.faults ? 1 : 0);
    if (params.size() != want) {
      return "its PTX declares kernel '" + k.symbol + "' with " + std::to_string(params.size()) +
             " params, but the launch passes " + std::to_string(want);
    }
    for (const std::string& p : params) {
      std::stringstream words(p);
      std::string param, type;
      words >> param >> type;
      static const std::set<std::string> kScalars = {".u8",  ".s8",  ".b8",  ".u16", ".s16",
                                                     ".b16", ".f16", ".u32", ".s32", ".b32",
                                                     ".f32", ".u64", ".s64", ".b64", ".f64"};
      if (param != ".param" || kScalars.count(type) == 0 || p.find('[') != std::string::npos) {
        return "its PTX gives kernel '" + k.symbol + "' a param that is not a scalar:" + p;
      }
    }
  }
  return "";
}

}  // namespace

Module MakeCUDAModule(CUDAModuleData data) {
  ir::IRModule module = ir::Parse(data.ir, "cuda module IR");
  return MakeCUDAModule(std::move(data), std::move(module));
}

Module MakeCUDAModule(CUDAModuleData data, ir::IRModule module) {
  return sdk::MakeModule(std::make_shared<CUDAModule>(std::move(data), std::move(module)));
}

std::string SerializeCUDAModule(const CUDAModuleData& data) {
  Json header;
  header["arch"] = data.arch;
  header["binary_format"] = data.cubin ? "cubin" : "ptx";
  header["sections"] = {
      {"ir", data.ir.size()}, {"source", data.source.size()}, {"binary", data.binary.size()}};
  Json functions = Json::array();
  for (const KernelInfo& k : data.kernels) {
    std::vector<std::string> axes;
    for (ir::ThreadTag t : k.launch_axes) axes.push_back(ir::ToString(t));
    functions.push_back({{"name", k.name},
                         {"symbol", k.symbol},
                         {"arg_types", k.arg_types},
                         {"written", k.written},
                         {"launch_params", axes},
                         {"dynamic_shared_bytes", k.dynamic_shared_bytes},
                         {"faults", k.faults}});
  }
  header["functions"] = functions;
  header["fault_sites"] = codegen::FaultSitesToJson(data.fault_sites);
  header["bounds_check"] = data.bounds_check;
  return std::string(kMagic) + header.dump() + "\n" + data.ir + data.source + data.binary;
}

Module LoadCUDAModule(const std::string& bytes) {
  auto bad = [](const std::string& what) {
    return Error(BP_ERR_INVALID_ARGUMENT,
                 "these bytes are not a cuda module (" + what +
                     "); load a file that a cuda module's save wrote, or rebuild it");
  };
  const std::string magic = kMagic;
  if (bytes.compare(0, magic.size(), magic) != 0) {
    throw bad(bytes.compare(0, 22, "backplane-cuda-module ") == 0
                  ? "an older Backplane's cuda module, which this one cannot check: rebuild it"
                  : "no 'backplane-cuda-module 3' header");
  }
  const size_t eol = bytes.find('\n', magic.size());
  if (eol == std::string::npos) throw bad("no function table");
  Json h = Json::parse(bytes.substr(magic.size(), eol - magic.size()), nullptr, false);
  CUDAModuleData data;
  size_t pos = eol + 1;
  try {
    if (h.is_discarded()) throw bad("the function table is not JSON");
    data.arch = h.at("arch").get<std::string>();
    data.cubin = h.at("binary_format").get<std::string>() == "cubin";
    std::string* sections[] = {&data.ir, &data.source, &data.binary};
    const char* names[] = {"ir", "source", "binary"};
    for (int i = 0; i < 3; ++i) {
      const size_t n = h.at("sections").at(names[i]).get<size_t>();
      if (n > bytes.size() - pos) throw bad(std::string("the ") + names[i] + " section is cut");
      *sections[i] = bytes.substr(pos, n);
      pos += n;
    }
    for (const Json& f : h.at("functions")) {
      KernelInfo k;
      k.name = f.at("name").get<std::string>();
      k.symbol = f.at("symbol").get<std::string>();
      k.arg_types = f.at("arg_types").get<std::vector<std::string>>();
      k.written = f.at("written").get<std::vector<bool>>();
      // A name that is no axis reads as kNone, which no kernel's IR lists: CheckTable refuses it.
      for (const std::string& name : f.at("launch_params").get<std::vector<std::string>>()) {
        ir::ThreadTag tag = ir::ThreadTag::kNone;
        ir::ParseThreadTag(name, &tag);
        k.launch_axes.push_back(tag);
      }
      k.dynamic_shared_bytes = f.at("dynamic_shared_bytes").get<int64_t>();
      k.faults = f.at("faults").get<bool>();
      if (k.written.size() != k.arg_types.size()) throw bad("a function entry is inconsistent");
      data.kernels.push_back(std::move(k));
    }
    data.fault_sites = codegen::FaultSitesFromJson(h.at("fault_sites").get<std::string>());
    data.bounds_check = h.at("bounds_check").get<bool>();
  } catch (const Json::exception& e) {
    throw bad(std::string("the function table lacks a field: ") + e.what());
  } catch (const ir::Error& e) {
    throw bad(e.what());
  }
  if (pos != bytes.size()) throw bad("trailing bytes after the sections");
  // What the build established, established again: the IR verifies, and the CUDA C, the function
  // table the launch binds by and the check table are what this code generator makes of it.
  CUDAModuleData emitted;
  emitted.ir = data.ir;
  emitted.bounds_check = data.bounds_check;
  ir::IRModule module;
  try {
    module = ir::Parse(data.ir, "the cuda module's IR");
    EmitCUDA(&emitted, module);
  } catch (const ir::Error& e) {
    throw bad(std::string("its IR is not a set of kernels this Backplane builds: ") + e.what());
  }
  bool same_table = emitted.kernels.size() == data.kernels.size();
  for (size_t i = 0; same_table && i < data.kernels.size(); ++i) {
    same_table = SameKernel(emitted.kernels[i], data.kernels[i]);
  }
  if (emitted.source != data.source || !same_table ||
      codegen::FaultSitesToJson(emitted.fault_sites) !=
          codegen::FaultSitesToJson(data.fault_sites)) {
    throw bad(
        "its CUDA C, function table or check table is not what this Backplane generates from its "
        "IR: the file was changed after it was built, or built by another version");
  }
  if (!data.cubin) {
    const std::string problem = PtxProblem(data.binary, data.kernels);
    if (!problem.empty()) throw bad(problem);
  }
  return MakeCUDAModule(std::move(data), std::move(module));
}

}  // namespace cuda
}  // namespace backplane
