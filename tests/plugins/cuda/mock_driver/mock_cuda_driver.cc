// SPDX-License-Identifier: Apache-2.0
// A MOCK of the CUDA driver (libcuda.so.1), for testing the cuda plugin on a machine without
// a GPU. It is a mock by necessity: no GPU or driver can be had here, and what the tests
// check (copies ordered on streams, pooled buffers reused across streams, unknown addresses,
// launch limits, module contexts, PTX newer than the driver) needs a driver to answer.
//
// It implements the Driver API's documented contract on host memory, taking the weakest
// promise wherever the documentation leaves room, so code that relies on more than the
// contract fails here as it could on a real GPU:
//   - One device (set BACKPLANE_MOCK_CUDA_DEVICES for more), compute capability 9.0 (set
//     BACKPLANE_MOCK_CUDA_CC, e.g. "10.0"), H100-like limits: grid (2^31-1, 65535, 65535),
//     block (1024, 1024, 64), 1024 threads a block. Driver version 13000 (set
//     BACKPLANE_MOCK_CUDA_DRIVER_VERSION, e.g. 12020), which accepts PTX ISA up to 9.0.
//   - Device memory is host memory the mock tracks; cuMemGetAddressRange,
//     cuPointerGetAttribute and cuPointerGetAttributes answer from that table.
//   - Work on a created stream is queued and runs only when something waits for it
//     (cuStreamSynchronize, cuEventSynchronize, a later stream that waits on its event, or
//     cuStreamDestroy). An asynchronous copy reads its source when it runs, also from pageable
//     memory (the documentation says such a copy "might be synchronous", not that it is).
//     The legacy null stream runs its work at once and is not ordered with non-blocking
//     streams, as documented.
//   - A queued copy that touches an address no allocation holds is an illegal address: the
//     context is then broken and every later call returns CUDA_ERROR_ILLEGAL_ADDRESS, as a
//     real context is after a fault.
//   - Modules load into the current context, which cuModuleUnload also needs; PTX whose
//     `.version` is newer than the driver's or whose `.target` is an arch-specific `sm_XYa`
//     for another device fails as the driver does, with the JIT log filled in. Kernels do not
//     run: cuLaunchKernel checks its arguments against the limits, copies the kernel's params
//     (as many, and as large, as the PTX declares: cuLaunchKernel copies them at the call)
//     and counts and logs the launch. Two knobs stand in for what only a GPU does: with
//     BACKPLANE_MOCK_CUDA_FAIL_LAUNCH=N the Nth cuLaunchKernel call of the process fails
//     (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES); with BACKPLANE_MOCK_CUDA_FAULT_LAUNCH=N the Nth
//     launch, when it runs, writes a fault into its last param's record (site 1), as generated
//     code whose run-time check fails does.
// Tests read what happened through the bp_mock_cuda_* functions at the end.
#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct CUctx_st {
  int device = 0;
};
struct CUstream_st {
  std::deque<std::function<void()>> ops;
  uint64_t queued = 0;  // ops ever queued
  uint64_t done = 0;    // ops run
};
struct CUevent_st {
  CUstream_st* stream = nullptr;  // null: never recorded, or recorded on the null stream
  uint64_t target = 0;            // complete once stream->done reaches this
  unsigned int flags = 0;         // CU_EVENT_DISABLE_TIMING: cannot be timed
  bool recorded = false;
  // When the recorded point was passed (steady clock, ns; -1 until then): stamped by an op
  // queued at the record, which outlives the event if it is destroyed first.
  std::shared_ptr<std::atomic<int64_t>> passed_ns;
};
struct CUfunc_st {
  struct CUmod_st* module = nullptr;
  std::string name;
  std::vector<int> param_bytes;  // per param, as the PTX declares it (empty: a cubin)
};
struct CUmod_st {
  CUctx_st* ctx = nullptr;
  std::vector<std::string> entries;
  std::vector<std::vector<int>> entry_param_bytes;    // per entry: its params' sizes
  std::vector<std::unique_ptr<CUfunc_st>> functions;  // handed out; released with the module
};

namespace {

struct Allocation {
  size_t size = 0;
  bool host = false;  // cuMemHostAlloc (pinned) rather than cuMemAlloc
};

// A launch that ran: its grid and block, and its params' values (zero-extended).
struct LaunchRecord {
  unsigned dims[6] = {0, 0, 0, 0, 0, 0};
  std::vector<uint64_t> params;
};

struct State {
  std::recursive_mutex mu;
  std::map<uintptr_t, Allocation> allocations;
  std::vector<std::unique_ptr<CUctx_st>> contexts;  // primary contexts, by device
  CUresult sticky = CUDA_SUCCESS;                   // a broken context's error
  int driver_version = 13000;
  size_t total_memory = size_t{2} << 30;
  size_t used_memory = 0;
  long long launches = 0;
  long long launch_calls = 0;  // cuLaunchKernel calls, for the FAIL/FAULT_LAUNCH knobs
  int fail_launch = 0;         // BACKPLANE_MOCK_CUDA_FAIL_LAUNCH, read by cuInit
  int fault_launch = 0;        // BACKPLANE_MOCK_CUDA_FAULT_LAUNCH, read by cuInit
  unsigned last_launch[6] = {0, 0, 0, 0, 0, 0};
  std::vector<LaunchRecord> launch_log;  // every launch that ran, in order
  long long unload_errors = 0;
  long long live_modules = 0;
  std::string fail_function;  // BACKPLANE_MOCK_CUDA_FAIL_FUNCTION: cuModuleGetFunction fails
};

State& S() {
  static State* s = new State();  // lives until the process ends
  return *s;
}

thread_local CUctx_st* t_current = nullptr;
thread_local std::vector<CUctx_st*> t_stack;

using Lock = std::lock_guard<std::recursive_mutex>;

// The allocation holding [p, p + n), or nullptr.
const Allocation* Holding(uintptr_t p, size_t n, uintptr_t* base = nullptr) {
  auto& a = S().allocations;
  auto it = a.upper_bound(p);
  if (it == a.begin()) return nullptr;
  --it;
  const size_t size = std::max<size_t>(it->second.size, 1);
  if (p < it->first || p + n > it->first + size) return nullptr;
  if (base != nullptr) *base = it->first;
  return &it->second;
}

void RunOne(CUstream_st* s) {
  std::function<void()> op = std::move(s->ops.front());
  s->ops.pop_front();
  ++s->done;
  op();
}

void RunUntil(CUstream_st* s, uint64_t target) {
  while (s->done < target && !s->ops.empty()) RunOne(s);
}

void RunAll(CUstream_st* s) { RunUntil(s, s->queued); }

// Queues `op` on `s`, or runs it now on the null stream.
void Enqueue(CUstream_st* s, std::function<void()> op) {
  if (s == nullptr) {
    op();
    return;
  }
  s->ops.push_back(std::move(op));
  ++s->queued;
}

// A copy of `n` bytes, checked when it runs: an address outside every allocation breaks the
// context (host addresses of pageable memory are taken as they are).
void Copy(uintptr_t dst, bool dst_device, uintptr_t src, bool src_device, size_t n) {
  if ((dst_device && Holding(dst, n) == nullptr) || (src_device && Holding(src, n) == nullptr)) {
    S().sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
    return;
  }
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
}

// The compute capability as major * 10 + minor: BACKPLANE_MOCK_CUDA_CC, read at every use so a
// test can move the device to a later GPU between a build and a launch; 9.0 by default.
int ComputeCapability() {
  const char* cc = std::getenv("BACKPLANE_MOCK_CUDA_CC");
  int major = 9, minor = 0;
  if (cc != nullptr && std::sscanf(cc, "%d.%d", &major, &minor) != 2) return 90;
  return major * 10 + minor;
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '\0' ? std::atoi(v) : fallback;
}

// The newest PTX ISA (major * 10 + minor) a driver of `version` JIT-compiles.
int MaxPtxIsa(int version) {
  const int major = version / 1000, minor = version % 1000 / 10;
  if (major >= 13) return 90 + minor;
  if (major == 12) return minor <= 5 ? 80 + minor : std::min(minor - 1, 9) + 80;
  return 70 + minor;
}

// Every driver function's calls, counted by name (bp_mock_cuda_calls): the tests pin how many
// driver calls a warm launch makes. Each function finds its slot once (a function-local
// static); counting is one relaxed increment, so the mock's own cost per call barely moves.
constexpr int kMaxFunctions = 96;
struct CallCounts {
  std::mutex mu;
  const char* names[kMaxFunctions] = {};
  std::atomic<long long> calls[kMaxFunctions] = {};
  int used = 0;
};
CallCounts& Calls() {
  static CallCounts* c = new CallCounts();  // lives until the process ends
  return *c;
}
int CallSlot(const char* name) {
  CallCounts& c = Calls();
  std::lock_guard<std::mutex> lock(c.mu);
  for (int i = 0; i < c.used; ++i) {
    if (std::strcmp(c.names[i], name) == 0) return i;
  }
  if (c.used == kMaxFunctions) std::abort();  // raise kMaxFunctions
  c.names[c.used] = name;
  return c.used++;
}
#define MOCK_COUNT()                                    \
  static const int mock_call_slot = CallSlot(__func__); \
  Calls().calls[mock_call_slot].fetch_add(1, std::memory_order_relaxed);

#define MOCK_BEGIN   \
  Lock lock(S().mu); \
  if (S().sticky != CUDA_SUCCESS) return S().sticky;

}  // namespace

extern "C" {

CUresult CUDAAPI cuInit(unsigned int) {
  MOCK_COUNT()
  Lock lock(S().mu);
  S().driver_version = EnvInt("BACKPLANE_MOCK_CUDA_DRIVER_VERSION", 13000);
  const int devices = EnvInt("BACKPLANE_MOCK_CUDA_DEVICES", 1);
  while (static_cast<int>(S().contexts.size()) < devices) {
    S().contexts.push_back(std::make_unique<CUctx_st>());
    S().contexts.back()->device = static_cast<int>(S().contexts.size()) - 1;
  }
  S().fail_launch = EnvInt("BACKPLANE_MOCK_CUDA_FAIL_LAUNCH", 0);
  S().fault_launch = EnvInt("BACKPLANE_MOCK_CUDA_FAULT_LAUNCH", 0);
  const char* fail = std::getenv("BACKPLANE_MOCK_CUDA_FAIL_FUNCTION");
  if (fail != nullptr) S().fail_function = fail;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDriverGetVersion(int* v) {
  MOCK_COUNT()
  *v = EnvInt("BACKPLANE_MOCK_CUDA_DRIVER_VERSION", 13000);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorName(CUresult r, const char** s) {
  MOCK_COUNT()
  switch (r) {
    case CUDA_SUCCESS:
      *s = "CUDA_SUCCESS";
      break;
    case CUDA_ERROR_INVALID_VALUE:
      *s = "CUDA_ERROR_INVALID_VALUE";
      break;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *s = "CUDA_ERROR_OUT_OF_MEMORY";
      break;
    case CUDA_ERROR_INVALID_CONTEXT:
      *s = "CUDA_ERROR_INVALID_CONTEXT";
      break;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
      *s = "CUDA_ERROR_NO_BINARY_FOR_GPU";
      break;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
      *s = "CUDA_ERROR_UNSUPPORTED_PTX_VERSION";
      break;
    case CUDA_ERROR_INVALID_HANDLE:
      *s = "CUDA_ERROR_INVALID_HANDLE";
      break;
    case CUDA_ERROR_NOT_FOUND:
      *s = "CUDA_ERROR_NOT_FOUND";
      break;
    case CUDA_ERROR_NOT_READY:
      *s = "CUDA_ERROR_NOT_READY";
      break;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      *s = "CUDA_ERROR_ILLEGAL_ADDRESS";
      break;
    case CUDA_ERROR_INVALID_DEVICE:
      *s = "CUDA_ERROR_INVALID_DEVICE";
      break;
    default:
      *s = "CUDA_ERROR_UNKNOWN";
      break;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult r, const char** s) {
  MOCK_COUNT()
  *s = r == CUDA_SUCCESS ? "no error" : "reported by the mock CUDA driver";
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* count) {
  MOCK_COUNT()
  Lock lock(S().mu);
  *count = static_cast<int>(S().contexts.size());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) {
  MOCK_COUNT()
  Lock lock(S().mu);
  if (ordinal < 0 || ordinal >= static_cast<int>(S().contexts.size())) {
    return CUDA_ERROR_INVALID_DEVICE;
  }
  *d = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
  MOCK_COUNT()
  std::snprintf(name, static_cast<size_t>(len), "Backplane mock CUDA device (no GPU)");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute attr, CUdevice) {
  MOCK_COUNT()
  Lock lock(S().mu);
  switch (attr) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z:
      *v = 64;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *v = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
      *v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *v = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *v = 49152;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *v = 232448;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK:
      *v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR:
      *v = 65536;
      break;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE:
      *v = 1980000;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = 132;
      break;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE:
      *v = 52428800;
      break;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
      *v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = ComputeCapability() / 10;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = ComputeCapability() % 10;
      break;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
      *v = 1;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice) {
  MOCK_COUNT()
  *bytes = S().total_memory;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetUuid(CUuuid* uuid, CUdevice d) {
  MOCK_COUNT()
  for (int i = 0; i < 16; ++i) uuid->bytes[i] = static_cast<char>(0x40 + i + d);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetPCIBusId(char* id, int len, CUdevice d) {
  MOCK_COUNT()
  std::snprintf(id, static_cast<size_t>(len), "0000:%02X:00.0", 0x17 + d);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceCanAccessPeer(int* can, CUdevice, CUdevice) {
  MOCK_COUNT()
  *can = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (d < 0 || d >= static_cast<int>(S().contexts.size())) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = S().contexts[static_cast<size_t>(d)].get();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) {
  MOCK_COUNT()
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  MOCK_COUNT()
  t_current = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  MOCK_COUNT()
  *ctx = t_current;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPushCurrent(CUcontext ctx) {
  MOCK_COUNT()
  t_stack.push_back(t_current);
  t_current = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxPopCurrent(CUcontext* ctx) {
  MOCK_COUNT()
  if (t_stack.empty()) return CUDA_ERROR_INVALID_CONTEXT;
  if (ctx != nullptr) *ctx = t_current;
  t_current = t_stack.back();
  t_stack.pop_back();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext, unsigned int) {
  MOCK_COUNT()
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t* free_bytes, size_t* total) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *total = S().total_memory;
  *free_bytes = S().total_memory - S().used_memory;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t n) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (n == 0) return CUDA_ERROR_INVALID_VALUE;
  if (n > S().total_memory - S().used_memory) return CUDA_ERROR_OUT_OF_MEMORY;
  // 256-byte aligned, as cuMemAlloc documents.
  void* m = std::aligned_alloc(256, (n + 255) / 256 * 256);
  if (m == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  S().allocations[reinterpret_cast<uintptr_t>(m)] = Allocation{n, false};
  S().used_memory += n;
  *p = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(m));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  MOCK_COUNT()
  MOCK_BEGIN
  auto it = S().allocations.find(static_cast<uintptr_t>(p));
  if (it == S().allocations.end() || it->second.host) return CUDA_ERROR_INVALID_VALUE;
  S().used_memory -= it->second.size;
  std::free(reinterpret_cast<void*>(it->first));
  S().allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetAddressRange(CUdeviceptr* base, size_t* size, CUdeviceptr p) {
  MOCK_COUNT()
  MOCK_BEGIN
  uintptr_t b = 0;
  const Allocation* a = Holding(static_cast<uintptr_t>(p), 1, &b);
  if (a == nullptr || a->host) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = static_cast<CUdeviceptr>(b);
  if (size != nullptr) *size = a->size;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void* data, CUpointer_attribute attr, CUdeviceptr p) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (attr != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_INVALID_VALUE;
  const Allocation* a = Holding(static_cast<uintptr_t>(p), 1);
  if (a == nullptr) return CUDA_ERROR_INVALID_VALUE;  // pageable host memory: unknown to CUDA
  *static_cast<unsigned int*>(data) = a->host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
  return CUDA_SUCCESS;
}

// As documented: memory CUDA does not know answers 0 (not an error); only MEMORY_TYPE here.
CUresult CUDAAPI cuPointerGetAttributes(unsigned int n, CUpointer_attribute* attrs, void** data,
                                        CUdeviceptr p) {
  MOCK_COUNT()
  MOCK_BEGIN
  const Allocation* a = Holding(static_cast<uintptr_t>(p), 1);
  for (unsigned int i = 0; i < n; ++i) {
    if (attrs[i] != CU_POINTER_ATTRIBUTE_MEMORY_TYPE) return CUDA_ERROR_INVALID_VALUE;
    *static_cast<unsigned int*>(data[i]) =
        a == nullptr ? 0u : (a->host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE);
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemHostAlloc(void** p, size_t n, unsigned int) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (n == 0) return CUDA_ERROR_INVALID_VALUE;
  if (n > (size_t{1} << 40)) return CUDA_ERROR_OUT_OF_MEMORY;  // more than any host pins
  void* m = std::aligned_alloc(4096, (n + 4095) / 4096 * 4096);
  if (m == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  S().allocations[reinterpret_cast<uintptr_t>(m)] = Allocation{n, true};
  *p = m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFreeHost(void* p) {
  MOCK_COUNT()
  MOCK_BEGIN
  auto it = S().allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == S().allocations.end() || !it->second.host) return CUDA_ERROR_INVALID_VALUE;
  std::free(p);
  S().allocations.erase(it);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (s == nullptr && t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const auto d = static_cast<uintptr_t>(dst);
  const auto h = reinterpret_cast<uintptr_t>(src);
  Enqueue(s, [d, h, n] { Copy(d, true, h, false, n); });
  return S().sticky;
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t n, CUstream s) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (s == nullptr && t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const auto h = reinterpret_cast<uintptr_t>(dst);
  const auto d = static_cast<uintptr_t>(src);
  Enqueue(s, [h, d, n] { Copy(h, false, d, true, n); });
  return S().sticky;
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (s == nullptr && t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  const auto d = static_cast<uintptr_t>(dst);
  const auto from = static_cast<uintptr_t>(src);
  Enqueue(s, [d, from, n] { Copy(d, true, from, true, n); });
  return S().sticky;
}

CUresult CUDAAPI cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t n,
                                   CUstream s) {
  MOCK_COUNT()
  return cuMemcpyDtoDAsync(dst, src, n, s);
}

CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  MOCK_COUNT()
  MOCK_BEGIN
  const auto d = static_cast<uintptr_t>(dst);
  const auto from = static_cast<uintptr_t>(src);
  const bool d_dev = Holding(d, n) != nullptr && !Holding(d, n)->host;
  const bool s_dev = Holding(from, n) != nullptr && !Holding(from, n)->host;
  Enqueue(s, [d, d_dev, from, s_dev, n] { Copy(d, d_dev, from, s_dev, n); });
  return S().sticky;
}

CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  *s = new CUstream_st();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  MOCK_COUNT()
  Lock lock(S().mu);
  if (s == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  RunAll(s);  // queued work completes, then the stream is released
  delete s;
  return S().sticky;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (s != nullptr) RunAll(s);
  return S().sticky;
}

CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int flags) {
  MOCK_COUNT()
  MOCK_BEGIN
  *e = new CUevent_st();
  (*e)->flags = flags;
  return CUDA_SUCCESS;
}

static int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  MOCK_COUNT()
  MOCK_BEGIN
  e->recorded = true;
  if ((e->flags & CU_EVENT_DISABLE_TIMING) == 0) {
    // A timed event: an op stamps the time its point is passed.
    auto stamp = std::make_shared<std::atomic<int64_t>>(-1);
    e->passed_ns = stamp;
    Enqueue(s, [stamp] { stamp->store(NowNs()); });
  }
  e->stream = s;
  e->target = s == nullptr ? 0 : s->queued;
  return CUDA_SUCCESS;
}

// As documented: either event made with CU_EVENT_DISABLE_TIMING or never recorded is
// CUDA_ERROR_INVALID_HANDLE; one not yet passed is CUDA_ERROR_NOT_READY.
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent end) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (ms == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (CUevent e : {start, end}) {
    if ((e->flags & CU_EVENT_DISABLE_TIMING) != 0 || !e->recorded) {
      return CUDA_ERROR_INVALID_HANDLE;
    }
    if (e->passed_ns->load() < 0) return CUDA_ERROR_NOT_READY;
  }
  *ms = static_cast<float>(end->passed_ns->load() - start->passed_ns->load()) / 1e6f;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventQuery(CUevent e) {
  MOCK_COUNT()
  MOCK_BEGIN
  return e->stream == nullptr || e->stream->done >= e->target ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (e->stream != nullptr) RunUntil(e->stream, e->target);
  return S().sticky;
}

CUresult CUDAAPI cuEventDestroy(CUevent e) {
  MOCK_COUNT()
  Lock lock(S().mu);
  delete e;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamWaitEvent(CUstream s, CUevent e, unsigned int) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (e->stream == nullptr || e->stream == s) return CUDA_SUCCESS;
  // `s` runs the recorded work of the event's stream before its own later work. (An event
  // destroyed after the wait is fine: the op keeps what it needs.)
  CUstream_st* src = e->stream;
  const uint64_t target = e->target;
  Enqueue(s, [src, target] { RunUntil(src, target); });
  return CUDA_SUCCESS;
}

// Reads the PTX `.version` and `.target` lines and the `.entry` names.
static CUresult LoadImage(CUmodule* m, const void* image, unsigned int n, CUjit_option* options,
                          void** values) {
  MOCK_BEGIN
  if (t_current == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  char* log = nullptr;
  size_t log_size = 0;
  for (unsigned int i = 0; i < n; ++i) {
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER) log = static_cast<char*>(values[i]);
    if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES) {
      log_size = static_cast<size_t>(reinterpret_cast<uintptr_t>(values[i]));
    }
  }
  auto fail = [&](CUresult r, const std::string& text) {
    if (log != nullptr && log_size > 0) std::snprintf(log, log_size, "%s", text.c_str());
    return r;
  };
  const char* bytes = static_cast<const char*>(image);
  auto module = std::make_unique<CUmod_st>();
  module->ctx = t_current;
  if (std::strncmp(bytes,
                   "\x7f"
                   "ELF",
                   4) != 0) {
    const std::string ptx(bytes);
    int major = 0, minor = 0;
    const size_t v = ptx.find(".version ");
    if (v == std::string::npos ||
        std::sscanf(ptx.c_str() + v, ".version %d.%d", &major, &minor) != 2) {
      return fail(CUDA_ERROR_INVALID_PTX, "ptxas fatal   : no .version directive");
    }
    const int max = MaxPtxIsa(S().driver_version);
    if (major * 10 + minor > max) {
      return fail(CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
                  "ptxas application ptx input, line " + std::to_string(1) +
                      "; fatal   : Unsupported .version " + std::to_string(major) + "." +
                      std::to_string(minor) + "; current version is '" + std::to_string(max / 10) +
                      "." + std::to_string(max % 10) + "'");
    }
    char arch[32] = {0};
    const size_t t = ptx.find(".target ");
    if (t != std::string::npos &&
        std::sscanf(ptx.c_str() + t, ".target sm_%31[0-9a-z]", arch) == 1) {
      const std::string a(arch);
      const int want = std::atoi(a.c_str());
      const int have = ComputeCapability();
      const bool specific = a.back() == 'a' || a.back() == 'f';
      if (want > have || (specific && want != have)) {
        return fail(CUDA_ERROR_NO_BINARY_FOR_GPU, "ptxas fatal   : PTX for sm_" + a +
                                                      " cannot be compiled for sm_" +
                                                      std::to_string(have));
      }
    }
    for (size_t p = ptx.find(".entry "); p != std::string::npos; p = ptx.find(".entry ", p + 1)) {
      size_t q = p + 7;
      while (q < ptx.size() && ptx[q] == ' ') ++q;
      size_t e = q;
      while (e < ptx.size() &&
             (std::isalnum(static_cast<unsigned char>(ptx[e])) || ptx[e] == '_')) {
        ++e;
      }
      module->entries.push_back(ptx.substr(q, e - q));
      // ".entry name(\n\t.param .u64 name_param_0,\n ...)": the size of each param's type.
      std::vector<int> sizes;
      const size_t open = ptx.find('(', e), close = ptx.find(')', e);
      if (open != std::string::npos && close != std::string::npos && open < close) {
        const std::string list = ptx.substr(open + 1, close - open - 1);
        for (size_t at = list.find(".param"); at != std::string::npos;
             at = list.find(".param", at + 1)) {
          size_t t = at + 6;
          while (t < list.size() && (list[t] == ' ' || list[t] == '\t')) ++t;
          int bits = 0;
          if (t + 2 < list.size() && list[t] == '.') bits = std::atoi(list.c_str() + t + 2);
          sizes.push_back(bits / 8);
        }
      }
      module->entry_param_bytes.push_back(sizes);
    }
  }
  ++S().live_modules;
  *m = module.release();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule* m, const void* image) {
  MOCK_COUNT()
  return LoadImage(m, image, 0, nullptr, nullptr);
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule* m, const void* image, unsigned int n,
                                    CUjit_option* options, void** values) {
  MOCK_COUNT()
  return LoadImage(m, image, n, options, values);
}

CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  MOCK_COUNT()
  Lock lock(S().mu);
  // "Unloads a module hmod from the current context."
  if (t_current != m->ctx) {
    ++S().unload_errors;
    return CUDA_ERROR_INVALID_CONTEXT;
  }
  --S().live_modules;
  delete m;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  MOCK_COUNT()
  MOCK_BEGIN
  const bool known = m->entries.empty() ||
                     std::find(m->entries.begin(), m->entries.end(), name) != m->entries.end();
  if (!known || S().fail_function == name) return CUDA_ERROR_NOT_FOUND;
  std::vector<int> sizes;
  for (size_t i = 0; i < m->entries.size(); ++i) {
    if (m->entries[i] == name) sizes = m->entry_param_bytes[i];
  }
  m->functions.push_back(std::make_unique<CUfunc_st>(CUfunc_st{m, name, sizes}));
  *f = m->functions.back().get();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction f, CUfunction_attribute, int) {
  MOCK_COUNT()
  MOCK_BEGIN
  return f == nullptr ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                                unsigned int bx, unsigned int by, unsigned int bz, unsigned int,
                                CUstream s, void** params, void**) {
  MOCK_COUNT()
  MOCK_BEGIN
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  if (t_current != f->module->ctx) return CUDA_ERROR_INVALID_CONTEXT;
  if (gx == 0 || gy == 0 || gz == 0 || bx == 0 || by == 0 || bz == 0 || gy > 65535 || gz > 65535 ||
      gx > 2147483647u || bx > 1024 || by > 1024 || bz > 64 || uint64_t{bx} * by * bz > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const long long call = ++S().launch_calls;
  if (call == S().fail_launch) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  const bool fault = call == S().fault_launch;
  LaunchRecord record;
  const unsigned dims[6] = {gx, gy, gz, bx, by, bz};
  std::copy(dims, dims + 6, record.dims);
  // "The kernel parameters are copied at the call": read now, as many as the PTX declares.
  if (!f->param_bytes.empty() && params == nullptr) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < f->param_bytes.size(); ++i) {
    uint64_t v = 0;
    std::memcpy(&v, params[i], static_cast<size_t>(std::min(f->param_bytes[i], 8)));
    record.params.push_back(v);
  }
  if (fault && record.params.empty()) return CUDA_ERROR_INVALID_VALUE;  // no record to write
  Enqueue(s, [record, fault] {
    if (fault) {
      auto* site = reinterpret_cast<int32_t*>(static_cast<uintptr_t>(record.params.back()));
      if (*site == 0) *site = 1;  // the first failing check claims the record
    }
    ++S().launches;
    std::copy(record.dims, record.dims + 6, S().last_launch);
    S().launch_log.push_back(record);
  });
  return CUDA_SUCCESS;
}

// ---- What the tests read -----------------------------------------------------------------

// Kernel launches that ran (a queued launch counts once its stream ran it).
long long bp_mock_cuda_launches() {
  Lock lock(S().mu);
  return S().launches;
}

// The grid and block of the last launch that ran.
void bp_mock_cuda_last_launch(unsigned dims[6]) {
  Lock lock(S().mu);
  std::copy(S().last_launch, S().last_launch + 6, dims);
}

// Launches logged (every launch that ran since the last bp_mock_cuda_clear_launch_log).
long long bp_mock_cuda_launch_log_size() {
  Lock lock(S().mu);
  return static_cast<long long>(S().launch_log.size());
}

// Launch `i` of the log: its grid and block in `dims`, up to `max` of its params' values
// (zero-extended) in `params`; returns how many params it had.
int bp_mock_cuda_launch_log(long long i, unsigned dims[6], unsigned long long* params, int max) {
  Lock lock(S().mu);
  const LaunchRecord& r = S().launch_log.at(static_cast<size_t>(i));
  std::copy(r.dims, r.dims + 6, dims);
  for (size_t p = 0; p < r.params.size() && static_cast<int>(p) < max; ++p) params[p] = r.params[p];
  return static_cast<int>(r.params.size());
}

void bp_mock_cuda_clear_launch_log() {
  Lock lock(S().mu);
  S().launch_log.clear();
}

// cuModuleUnload calls made without the module's context current.
long long bp_mock_cuda_unload_errors() {
  Lock lock(S().mu);
  return S().unload_errors;
}

// Modules loaded and not unloaded.
long long bp_mock_cuda_live_modules() {
  Lock lock(S().mu);
  return S().live_modules;
}

// The broken context's error (CUDA_SUCCESS while it works).
int bp_mock_cuda_sticky_error() {
  Lock lock(S().mu);
  return S().sticky;
}

// Calls of the driver function `name` since the process started, or of every driver function
// for null. `name` is the symbol cuda.h maps the call to ("cuLaunchKernel", "cuMemAlloc_v2").
long long bp_mock_cuda_calls(const char* name) {
  CallCounts& c = Calls();
  std::lock_guard<std::mutex> lock(c.mu);
  long long sum = 0;
  for (int i = 0; i < c.used; ++i) {
    if (name == nullptr || std::strcmp(c.names[i], name) == 0) {
      sum += c.calls[i].load(std::memory_order_relaxed);
    }
  }
  return sum;
}

// Bytes of device memory allocated and not freed.
long long bp_mock_cuda_used_memory() {
  Lock lock(S().mu);
  return static_cast<long long>(S().used_memory);
}

}  // extern "C"
