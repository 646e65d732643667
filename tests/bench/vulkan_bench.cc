// SPDX-License-Identifier: Apache-2.0
// The Vulkan plugin against raw Vulkan on the same device (vulkan:0, lavapipe in CI), in the
// same run: an empty dispatch + wait, 64 MiB host <-> device copies and vector_add_gpu. The
// raw side has an instance and a VkDevice of its own on the same physical device and runs
// hand-written GLSL (tests/bench/vulkan/*.comp, compiled to SPIR-V by glslangValidator at
// build time) with the same workgroup geometry as the generated kernels. Each raw iteration
// records its command buffer, submits it and waits on a fence, as an application that
// pushes fresh arguments each time would. Pairs and goals are in bench_pairs.h; a machine
// without a Vulkan device skips them.
#include <backplane/c_api.h>
#include <benchmark/benchmark.h>
#include <vulkan/vulkan.h>

#include <algorithm>
#include <backplane/backplane.hpp>
#include <backplane/kernels/catalog.hpp>
#include <backplane/runner/runner.hpp>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "bench_pairs.h"
#include "vulkan_empty_spirv.h"
#include "vulkan_vector_add_spirv.h"

namespace {

using backplane::Device;
using backplane::Function;
using backplane::Module;
using backplane::Tensor;
using backplane::bench::kCopyBytes;
using backplane::bench::kVulkanVectorElements;

const DLDataType kF32{kDLFloat, 32, 1};

// The empty kernel on Backplane's side: a GPU kernel of one thread that stores nothing.
constexpr const char* kEmptyIR = R"IR(# backplane-ir 1
func empty_gpu(n: int32, x: buffer<float32>[n]) {
  for bx in thread(blockIdx.x, 0, 1) {
    for tx in thread(threadIdx.x, 0, 1) {
      if (n < 0) {
        x[0] = 0.0
      }
    }
  }
}
)IR";

void Ok(VkResult r, const char* what) {
  if (r != VK_SUCCESS) {
    throw std::runtime_error(std::string(what) + " failed with VkResult " +
                             std::to_string(static_cast<int>(r)));
  }
}

// A buffer of the raw side with its own memory (mapped when host-visible).
struct RawBuffer {
  VkBuffer buffer = VK_NULL_HANDLE;
  VkDeviceMemory memory = VK_NULL_HANDLE;
  void* mapped = nullptr;
};

// A compute pipeline of the raw side with one descriptor set of `bindings` storage buffers
// and an int pushed at offset 0.
struct RawPipeline {
  VkShaderModule shader = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkDescriptorSet set = VK_NULL_HANDLE;
};

// Raw Vulkan on the first physical device with a compute queue (vulkan:0): one queue, one
// command buffer and one fence, all made once.
struct Raw {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkPhysicalDeviceMemoryProperties mem{};
  uint32_t family = 0;
  VkDevice device = VK_NULL_HANDLE;
  VkQueue queue = VK_NULL_HANDLE;
  VkCommandPool pool = VK_NULL_HANDLE;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  std::vector<RawBuffer> buffers;
  std::vector<RawPipeline> pipelines;

  Raw() {
    VkApplicationInfo app{};
    app.sType = VK_STRUCTURE_TYPE_APPLICATION_INFO;
    app.apiVersion = VK_API_VERSION_1_2;
    VkInstanceCreateInfo ici{};
    ici.sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO;
    ici.pApplicationInfo = &app;
    Ok(vkCreateInstance(&ici, nullptr, &instance), "vkCreateInstance");
    uint32_t n = 0;
    vkEnumeratePhysicalDevices(instance, &n, nullptr);
    std::vector<VkPhysicalDevice> phys(n);
    vkEnumeratePhysicalDevices(instance, &n, phys.data());
    for (VkPhysicalDevice p : phys) {
      uint32_t qn = 0;
      vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, nullptr);
      std::vector<VkQueueFamilyProperties> qs(qn);
      vkGetPhysicalDeviceQueueFamilyProperties(p, &qn, qs.data());
      for (uint32_t i = 0; i < qn && physical == VK_NULL_HANDLE; ++i) {
        if (qs[i].queueFlags & VK_QUEUE_COMPUTE_BIT) {
          physical = p;
          family = i;
        }
      }
      if (physical != VK_NULL_HANDLE) break;
    }
    if (physical == VK_NULL_HANDLE) throw std::runtime_error("no Vulkan device with compute");
    vkGetPhysicalDeviceMemoryProperties(physical, &mem);
    const float priority = 1.0f;
    VkDeviceQueueCreateInfo q{};
    q.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO;
    q.queueFamilyIndex = family;
    q.queueCount = 1;
    q.pQueuePriorities = &priority;
    VkDeviceCreateInfo dci{};
    dci.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO;
    dci.queueCreateInfoCount = 1;
    dci.pQueueCreateInfos = &q;
    Ok(vkCreateDevice(physical, &dci, nullptr, &device), "vkCreateDevice");
    vkGetDeviceQueue(device, family, 0, &queue);
    VkCommandPoolCreateInfo pci{};
    pci.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO;
    pci.flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT;
    pci.queueFamilyIndex = family;
    Ok(vkCreateCommandPool(device, &pci, nullptr, &pool), "vkCreateCommandPool");
    VkCommandBufferAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO;
    ai.commandPool = pool;
    ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
    ai.commandBufferCount = 1;
    Ok(vkAllocateCommandBuffers(device, &ai, &cmd), "vkAllocateCommandBuffers");
    VkFenceCreateInfo fci{};
    fci.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO;
    Ok(vkCreateFence(device, &fci, nullptr, &fence), "vkCreateFence");
  }

  ~Raw() {
    if (device != VK_NULL_HANDLE) {
      vkDeviceWaitIdle(device);
      for (RawPipeline& p : pipelines) {
        vkDestroyDescriptorPool(device, p.pool, nullptr);
        vkDestroyPipeline(device, p.pipeline, nullptr);
        vkDestroyPipelineLayout(device, p.layout, nullptr);
        vkDestroyDescriptorSetLayout(device, p.set_layout, nullptr);
        vkDestroyShaderModule(device, p.shader, nullptr);
      }
      for (RawBuffer& b : buffers) {
        vkDestroyBuffer(device, b.buffer, nullptr);
        vkFreeMemory(device, b.memory, nullptr);
      }
      vkDestroyFence(device, fence, nullptr);
      vkDestroyCommandPool(device, pool, nullptr);
      vkDestroyDevice(device, nullptr);
    }
    if (instance != VK_NULL_HANDLE) vkDestroyInstance(instance, nullptr);
  }

  // A buffer of `bytes`: host-visible, coherent and mapped when `host`, else device-local
  // where the device has such memory.
  RawBuffer Buffer(VkDeviceSize bytes, bool host) {
    RawBuffer b;
    VkBufferCreateInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO;
    bi.size = bytes;
    bi.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
               VK_BUFFER_USAGE_TRANSFER_DST_BIT;
    Ok(vkCreateBuffer(device, &bi, nullptr, &b.buffer), "vkCreateBuffer");
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(device, b.buffer, &req);
    const VkMemoryPropertyFlags want =
        host ? VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT
             : VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
    uint32_t type = UINT32_MAX;
    for (uint32_t i = 0; i < mem.memoryTypeCount && type == UINT32_MAX; ++i) {
      if ((req.memoryTypeBits & (1u << i)) && (mem.memoryTypes[i].propertyFlags & want) == want) {
        type = i;
      }
    }
    if (type == UINT32_MAX) throw std::runtime_error("no fitting memory type");
    VkMemoryAllocateInfo mi{};
    mi.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO;
    mi.allocationSize = req.size;
    mi.memoryTypeIndex = type;
    Ok(vkAllocateMemory(device, &mi, nullptr, &b.memory), "vkAllocateMemory");
    Ok(vkBindBufferMemory(device, b.buffer, b.memory, 0), "vkBindBufferMemory");
    if (host) Ok(vkMapMemory(device, b.memory, 0, VK_WHOLE_SIZE, 0, &b.mapped), "vkMapMemory");
    buffers.push_back(b);
    return b;
  }

  // A pipeline running `spirv` with `bound` bound in order to bindings 0, 1, ...
  RawPipeline Pipeline(const uint32_t* spirv, size_t spirv_bytes,
                       const std::vector<VkBuffer>& bound) {
    RawPipeline p;
    VkShaderModuleCreateInfo smi{};
    smi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
    smi.codeSize = spirv_bytes;
    smi.pCode = spirv;
    Ok(vkCreateShaderModule(device, &smi, nullptr, &p.shader), "vkCreateShaderModule");
    std::vector<VkDescriptorSetLayoutBinding> bindings(bound.size());
    for (size_t i = 0; i < bound.size(); ++i) {
      bindings[i].binding = static_cast<uint32_t>(i);
      bindings[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      bindings[i].descriptorCount = 1;
      bindings[i].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
    }
    VkDescriptorSetLayoutCreateInfo dli{};
    dli.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
    dli.bindingCount = static_cast<uint32_t>(bindings.size());
    dli.pBindings = bindings.data();
    Ok(vkCreateDescriptorSetLayout(device, &dli, nullptr, &p.set_layout),
       "vkCreateDescriptorSetLayout");
    VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(int32_t)};
    VkPipelineLayoutCreateInfo pli{};
    pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
    pli.setLayoutCount = 1;
    pli.pSetLayouts = &p.set_layout;
    pli.pushConstantRangeCount = 1;
    pli.pPushConstantRanges = &range;
    Ok(vkCreatePipelineLayout(device, &pli, nullptr, &p.layout), "vkCreatePipelineLayout");
    VkComputePipelineCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = p.shader;
    ci.stage.pName = "main";
    ci.layout = p.layout;
    Ok(vkCreateComputePipelines(device, VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipeline),
       "vkCreateComputePipelines");
    VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                              static_cast<uint32_t>(bound.size())};
    VkDescriptorPoolCreateInfo dpi{};
    dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
    dpi.maxSets = 1;
    dpi.poolSizeCount = 1;
    dpi.pPoolSizes = &size;
    Ok(vkCreateDescriptorPool(device, &dpi, nullptr, &p.pool), "vkCreateDescriptorPool");
    VkDescriptorSetAllocateInfo ai{};
    ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
    ai.descriptorPool = p.pool;
    ai.descriptorSetCount = 1;
    ai.pSetLayouts = &p.set_layout;
    Ok(vkAllocateDescriptorSets(device, &ai, &p.set), "vkAllocateDescriptorSets");
    std::vector<VkDescriptorBufferInfo> infos(bound.size());
    std::vector<VkWriteDescriptorSet> writes(bound.size());
    for (size_t i = 0; i < bound.size(); ++i) {
      infos[i] = VkDescriptorBufferInfo{bound[i], 0, VK_WHOLE_SIZE};
      writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
      writes[i].dstSet = p.set;
      writes[i].dstBinding = static_cast<uint32_t>(i);
      writes[i].descriptorCount = 1;
      writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      writes[i].pBufferInfo = &infos[i];
    }
    vkUpdateDescriptorSets(device, static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
    pipelines.push_back(p);
    return p;
  }

  // Records `record` into the command buffer, submits it and waits for the fence.
  template <typename Record>
  void Submit(Record record) {
    VkCommandBufferBeginInfo bi{};
    bi.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO;
    bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
    vkBeginCommandBuffer(cmd, &bi);
    record(cmd);
    vkEndCommandBuffer(cmd);
    VkSubmitInfo si{};
    si.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO;
    si.commandBufferCount = 1;
    si.pCommandBuffers = &cmd;
    Ok(vkQueueSubmit(queue, 1, &si, fence), "vkQueueSubmit");
    Ok(vkWaitForFences(device, 1, &fence, VK_TRUE, UINT64_MAX), "vkWaitForFences");
    vkResetFences(device, 1, &fence);
  }

  // Records and runs one dispatch of `p` with `n` pushed.
  void Dispatch(const RawPipeline& p, int32_t n, uint32_t groups) {
    Submit([&](VkCommandBuffer c) {
      vkCmdBindPipeline(c, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
      vkCmdBindDescriptorSets(c, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &p.set, 0,
                              nullptr);
      vkCmdPushConstants(c, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, sizeof(n), &n);
      vkCmdDispatch(c, groups, 1, 1);
    });
  }

  void Copy(VkBuffer src, VkBuffer dst, VkDeviceSize bytes) {
    Submit([&](VkCommandBuffer c) {
      VkBufferCopy region{0, 0, bytes};
      vkCmdCopyBuffer(c, src, dst, 1, &region);
    });
  }
};

Device Vk() { return Device("vulkan", 0); }

std::vector<float> RandomFloats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor DeviceTensor(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t = Tensor::Empty(shape, kF32, Vk());
  const std::vector<float> host = RandomFloats(t.NumElements(), seed);
  t.CopyFromBytes(host.data(), host.size() * sizeof(float));
  return t;
}

void Sync() { backplane::Check(bp_device_stream_sync(Vk().dl, nullptr)); }

// Runs `body` unless there is no Vulkan device; errors skip the benchmark with the message.
template <typename Body>
void Guarded(benchmark::State& state, Body body) {
  try {
    if (!backplane::DeviceAPI::Get(Vk()).Exists()) {
      state.SkipWithError("no Vulkan device (install mesa-vulkan-drivers for lavapipe)");
      return;
    }
    body();
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void BM_Vulkan_EmptyKernel(benchmark::State& state) {
  Guarded(state, [&] {
    Module m = backplane::Build(kEmptyIR, backplane::Target::FromDevice(Vk()));
    Function f = m.GetFunction("empty_gpu");
    Tensor x = DeviceTensor({1}, 1);
    f(1, x.dl());  // creates the pipeline
    Sync();
    for (auto _ : state) {
      f(1, x.dl());
      Sync();
    }
  });
}
BENCHMARK(BM_Vulkan_EmptyKernel)->UseRealTime();

void BM_Vulkan_EmptyKernel_Raw(benchmark::State& state) {
  Guarded(state, [&] {
    Raw raw;
    RawBuffer x = raw.Buffer(sizeof(float), false);
    RawPipeline p = raw.Pipeline(kEmptySpirv, sizeof(kEmptySpirv), {x.buffer});
    raw.Dispatch(p, 1, 1);  // warm: lavapipe compiles the shader on first use
    for (auto _ : state) raw.Dispatch(p, 1, 1);
  });
}
BENCHMARK(BM_Vulkan_EmptyKernel_Raw)->UseRealTime();

DLTensor Bytes(void* data, DLDevice dev, int64_t* shape) {
  DLTensor t{};
  t.data = data;
  t.device = dev;
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  return t;
}

void Copy(benchmark::State& state, bool to_device) {
  Guarded(state, [&] {
    std::vector<uint8_t> host(kCopyBytes, 0x5A);
    Tensor dev = Tensor::Empty({static_cast<int64_t>(kCopyBytes)}, DLDataType{kDLUInt, 8, 1}, Vk());
    int64_t shape[1] = {static_cast<int64_t>(kCopyBytes)};
    DLTensor h = Bytes(host.data(), DLDevice{kDLCPU, 0}, shape);
    for (auto _ : state) {
      backplane::Check(to_device ? bp_device_copy_data_from_to(&h, dev.dl(), nullptr)
                                 : bp_device_copy_data_from_to(dev.dl(), &h, nullptr));
      Sync();
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
  });
}

// The raw staging copy: memcpy into (or out of) a mapped host-visible buffer made once, and
// one vkCmdCopyBuffer to (or from) a device-local buffer, waited for with a fence.
void RawCopy(benchmark::State& state, bool to_device) {
  Guarded(state, [&] {
    Raw raw;
    std::vector<uint8_t> host(kCopyBytes, 0x5A);
    RawBuffer staging = raw.Buffer(kCopyBytes, true);
    RawBuffer dev = raw.Buffer(kCopyBytes, false);
    for (auto _ : state) {
      if (to_device) {
        std::memcpy(staging.mapped, host.data(), kCopyBytes);
        raw.Copy(staging.buffer, dev.buffer, kCopyBytes);
      } else {
        raw.Copy(dev.buffer, staging.buffer, kCopyBytes);
        std::memcpy(host.data(), staging.mapped, kCopyBytes);
      }
    }
    state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(kCopyBytes));
  });
}
void BM_Vulkan_CopyH2D_64MiB(benchmark::State& state) { Copy(state, true); }
void BM_Vulkan_CopyD2H_64MiB(benchmark::State& state) { Copy(state, false); }
void BM_Vulkan_CopyH2D_64MiB_Raw(benchmark::State& state) { RawCopy(state, true); }
void BM_Vulkan_CopyD2H_64MiB_Raw(benchmark::State& state) { RawCopy(state, false); }
BENCHMARK(BM_Vulkan_CopyH2D_64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Vulkan_CopyH2D_64MiB_Raw)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Vulkan_CopyD2H_64MiB)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Vulkan_CopyD2H_64MiB_Raw)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Vulkan_VectorAdd(benchmark::State& state) {
  Guarded(state, [&] {
    const int64_t n = static_cast<int64_t>(kVulkanVectorElements);
    const backplane::kernels::Case* c = backplane::kernels::Find("vector_add_gpu");
    if (c == nullptr) throw std::runtime_error("no kernel vector_add_gpu in the catalog");
    Module m =
        backplane::Build(backplane::runner::KernelSource(*c), backplane::Target::FromDevice(Vk()));
    Function f = m.GetFunction("vector_add_gpu");
    Tensor a = DeviceTensor({n}, 1), b = DeviceTensor({n}, 2), out = DeviceTensor({n}, 3);
    f(n, a.dl(), b.dl(), out.dl());
    Sync();
    for (auto _ : state) {
      f(n, a.dl(), b.dl(), out.dl());
      Sync();
    }
    state.SetBytesProcessed(state.iterations() * 3 * n * static_cast<int64_t>(sizeof(float)));
  });
}
BENCHMARK(BM_Vulkan_VectorAdd)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Vulkan_VectorAdd_Raw(benchmark::State& state) {
  Guarded(state, [&] {
    Raw raw;
    const int32_t n = static_cast<int32_t>(kVulkanVectorElements);
    const VkDeviceSize bytes = static_cast<VkDeviceSize>(n) * sizeof(float);
    RawBuffer staging = raw.Buffer(bytes, true);
    RawBuffer a = raw.Buffer(bytes, false), b = raw.Buffer(bytes, false),
              c = raw.Buffer(bytes, false);
    for (auto [buffer, seed] : {std::pair{a.buffer, 1}, std::pair{b.buffer, 2}}) {
      const std::vector<float> host = RandomFloats(static_cast<size_t>(n), seed);
      std::memcpy(staging.mapped, host.data(), bytes);
      raw.Copy(staging.buffer, buffer, bytes);
    }
    RawPipeline p =
        raw.Pipeline(kVectorAddSpirv, sizeof(kVectorAddSpirv), {a.buffer, b.buffer, c.buffer});
    const uint32_t groups = static_cast<uint32_t>((n + 255) / 256);
    raw.Dispatch(p, n, groups);
    for (auto _ : state) raw.Dispatch(p, n, groups);
    state.SetBytesProcessed(state.iterations() * 3 * static_cast<int64_t>(bytes));
  });
}
BENCHMARK(BM_Vulkan_VectorAdd_Raw)->Unit(benchmark::kMillisecond)->UseRealTime();

// ---- A kernel's first call: the pipeline ---------------------------------
// Each iteration of BM_Vulkan_FirstCall/<kernel> builds the catalog kernel again for `vulkan` (a
// new module, its SPIR-V from the code generator's cache; untimed) and times its first call
// with the stream synced (runner::RunCase's first_call_seconds, its small sizes): the shader
// module, the layouts, the pipeline through the device's VkPipelineCache, the descriptor set
// and the dispatch, which on lavapipe also makes llvmpipe's machine code (from Mesa's shader
// cache when warm). BM_Vulkan_FirstCall_Raw/<kernel> times the same objects made by hand from
// the same SPIR-V (its bindings and specialization constants read from the words, each
// constant 8, lavapipe's SIMD width, as the catalog sizes a block there), then one workgroup
// with zero pushed constants (so the kernel returns at once). Each side first makes one call
// untimed, which fills the caches (the benchmarks' cache folder is a fresh one): each iteration is
// then a first call with warm caches, as in a new process. Counters: pipeline_ms (the part in
// vkCreateComputePipelines) and again_ms (a second call).

const char* const kFirstCallKernels[] = {"vector_add_gpu", "saxpy_gpu",  "sum_gpu",
                                         "softmax_gpu",    "matmul_gpu", "matmul_tiled_gpu",
                                         "transpose_gpu",  "conv2d_gpu"};

Module BuildForVulkan(const backplane::kernels::Case& c) {
  return backplane::Build(backplane::runner::KernelSource(c), backplane::Target::Parse("vulkan"));
}

// The microseconds vulkan.pipeline_cache_stats says were spent in vkCreateComputePipelines.
double PipelineMicroseconds() {
  const std::string s = Function::Get("vulkan.pipeline_cache_stats")().AsString();
  const size_t at = s.find("pipeline_us=");
  return at == std::string::npos ? 0 : std::stod(s.substr(at + 12));
}

void FirstCall(benchmark::State& state, const std::string& kernel) {
  Guarded(state, [&] {
    const backplane::kernels::Case* c = backplane::kernels::Find(kernel);
    if (c == nullptr) throw std::runtime_error("no kernel " + kernel + " in the catalog");
    // Untimed: the VkDevice, and a first call that fills the caches (the benchmarks' cache
    // folder is a fresh one, kernel_bench.cc), so that each iteration is a first call with
    // warm caches.
    if (!backplane::runner::RunCase(*c, BuildForVulkan(*c), Vk(), c->small, 1).ok) {
      throw std::runtime_error(kernel + " failed");
    }
    double pipeline_us = 0, again_s = 0;
    for (auto _ : state) {
      state.PauseTiming();
      Module m = BuildForVulkan(*c);
      const double before = PipelineMicroseconds();
      state.ResumeTiming();
      const backplane::runner::Result r = backplane::runner::RunCase(*c, m, Vk(), c->small, 1);
      if (!r.ok) throw std::runtime_error(kernel + ": " + r.error);
      state.SetIterationTime(r.first_call_seconds);
      pipeline_us += PipelineMicroseconds() - before;
      again_s += r.seconds;
    }
    const double n = static_cast<double>(state.iterations());
    state.counters["pipeline_ms"] = pipeline_us / 1e3 / n;
    state.counters["again_ms"] = again_s * 1e3 / n;
  });
}

// The SPIR-V of a built vulkan module (its import, saved: the "spirv <length>" field).
std::vector<uint32_t> SpirvOf(const Module& m) {
  const std::string saved = m.Imports().at(0).SaveToBytes();
  const size_t at = saved.find("\nspirv ");
  if (at == std::string::npos) throw std::runtime_error("no SPIR-V in the vulkan module");
  const size_t nl = saved.find('\n', at + 1);
  const size_t len = std::stoull(saved.substr(at + 7, nl - at - 7));
  std::vector<uint32_t> words(len / sizeof(uint32_t));
  std::memcpy(words.data(), saved.data() + nl + 1, words.size() * sizeof(uint32_t));
  return words;
}

void FirstCallRaw(benchmark::State& state, const std::string& kernel) {
  Guarded(state, [&] {
    const backplane::kernels::Case* c = backplane::kernels::Find(kernel);
    if (c == nullptr) throw std::runtime_error("no kernel " + kernel + " in the catalog");
    const std::vector<uint32_t> spirv = SpirvOf(BuildForVulkan(*c));
    // OpDecorate <id> Binding <n> and OpDecorate <id> SpecId <n>.
    std::vector<uint32_t> bindings, spec_ids;
    for (size_t at = 5; at < spirv.size() && (spirv[at] >> 16) != 0; at += spirv[at] >> 16) {
      if ((spirv[at] & 0xffffu) != 71 || (spirv[at] >> 16) < 4) continue;
      if (spirv[at + 2] == 33) bindings.push_back(spirv[at + 3]);
      if (spirv[at + 2] == 1) spec_ids.push_back(spirv[at + 3]);
    }
    std::sort(bindings.begin(), bindings.end());
    Raw raw;
    std::vector<VkBuffer> buffers;
    for (size_t i = 0; i < bindings.size(); ++i)
      buffers.push_back(raw.Buffer(1 << 16, false).buffer);
    std::vector<VkSpecializationMapEntry> entries;
    const std::vector<uint32_t> values(spec_ids.size(), 8);
    for (size_t i = 0; i < spec_ids.size(); ++i) {
      entries.push_back(
          {spec_ids[i], static_cast<uint32_t>(i * sizeof(uint32_t)), sizeof(uint32_t)});
    }
    const VkSpecializationInfo spec{static_cast<uint32_t>(entries.size()), entries.data(),
                                    values.size() * sizeof(uint32_t), values.data()};
    const std::vector<char> push(128, 0);  // lavapipe's maxPushConstantsSize; all zero
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point a, Clock::time_point b) {
      return std::chrono::duration<double>(b - a).count();
    };
    double pipeline_s = 0, again_s = 0;
    // Makes the objects, dispatches twice; returns the seconds to the end of the first dispatch.
    auto first_call = [&] {
      const auto t0 = Clock::now();
      RawPipeline p;
      VkShaderModuleCreateInfo smi{};
      smi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
      smi.codeSize = spirv.size() * sizeof(uint32_t);
      smi.pCode = spirv.data();
      Ok(vkCreateShaderModule(raw.device, &smi, nullptr, &p.shader), "vkCreateShaderModule");
      std::vector<VkDescriptorSetLayoutBinding> b(bindings.size());
      for (size_t i = 0; i < b.size(); ++i) {
        b[i] = {bindings[i], VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1, VK_SHADER_STAGE_COMPUTE_BIT,
                nullptr};
      }
      VkDescriptorSetLayoutCreateInfo dli{};
      dli.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
      dli.bindingCount = static_cast<uint32_t>(b.size());
      dli.pBindings = b.data();
      Ok(vkCreateDescriptorSetLayout(raw.device, &dli, nullptr, &p.set_layout),
         "vkCreateDescriptorSetLayout");
      VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, static_cast<uint32_t>(push.size())};
      VkPipelineLayoutCreateInfo pli{};
      pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
      pli.setLayoutCount = 1;
      pli.pSetLayouts = &p.set_layout;
      pli.pushConstantRangeCount = 1;
      pli.pPushConstantRanges = &range;
      Ok(vkCreatePipelineLayout(raw.device, &pli, nullptr, &p.layout), "vkCreatePipelineLayout");
      VkComputePipelineCreateInfo ci{};
      ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
      ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
      ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
      ci.stage.module = p.shader;
      ci.stage.pName = "main";
      ci.stage.pSpecializationInfo = entries.empty() ? nullptr : &spec;
      ci.layout = p.layout;
      const auto tp = Clock::now();
      Ok(vkCreateComputePipelines(raw.device, VK_NULL_HANDLE, 1, &ci, nullptr, &p.pipeline),
         "vkCreateComputePipelines");
      pipeline_s += seconds(tp, Clock::now());
      VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                static_cast<uint32_t>(std::max<size_t>(b.size(), 1))};
      VkDescriptorPoolCreateInfo dpi{};
      dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
      dpi.maxSets = 1;
      dpi.poolSizeCount = 1;
      dpi.pPoolSizes = &size;
      Ok(vkCreateDescriptorPool(raw.device, &dpi, nullptr, &p.pool), "vkCreateDescriptorPool");
      VkDescriptorSetAllocateInfo ai{};
      ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
      ai.descriptorPool = p.pool;
      ai.descriptorSetCount = 1;
      ai.pSetLayouts = &p.set_layout;
      Ok(vkAllocateDescriptorSets(raw.device, &ai, &p.set), "vkAllocateDescriptorSets");
      std::vector<VkDescriptorBufferInfo> infos(b.size());
      std::vector<VkWriteDescriptorSet> writes(b.size());
      for (size_t i = 0; i < b.size(); ++i) {
        infos[i] = VkDescriptorBufferInfo{buffers[i], 0, VK_WHOLE_SIZE};
        writes[i].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        writes[i].dstSet = p.set;
        writes[i].dstBinding = bindings[i];
        writes[i].descriptorCount = 1;
        writes[i].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[i].pBufferInfo = &infos[i];
      }
      vkUpdateDescriptorSets(raw.device, static_cast<uint32_t>(writes.size()), writes.data(), 0,
                             nullptr);
      raw.pipelines.push_back(p);  // destroyed with `raw`
      auto dispatch = [&] {
        raw.Submit([&](VkCommandBuffer cmd) {
          vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
          vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &p.set, 0,
                                  nullptr);
          vkCmdPushConstants(cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                             static_cast<uint32_t>(push.size()), push.data());
          vkCmdDispatch(cmd, 1, 1, 1);
        });
      };
      dispatch();
      const auto t1 = Clock::now();
      dispatch();
      again_s += seconds(t1, Clock::now());
      return seconds(t0, t1);
    };
    first_call();  // untimed, as on Backplane's side: fills Mesa's shader cache
    pipeline_s = again_s = 0;
    for (auto _ : state) state.SetIterationTime(first_call());
    const double n = static_cast<double>(state.iterations());
    state.counters["pipeline_ms"] = pipeline_s * 1e3 / n;
    state.counters["again_ms"] = again_s * 1e3 / n;
  });
}

const bool kFirstCallRegistered = [] {
  for (const char* kernel : kFirstCallKernels) {
    const std::string k = kernel;
    benchmark::RegisterBenchmark(("BM_Vulkan_FirstCall/" + k).c_str(),
                                 [k](benchmark::State& s) { FirstCall(s, k); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("BM_Vulkan_FirstCall_Raw/" + k).c_str(),
                                 [k](benchmark::State& s) { FirstCallRaw(s, k); })
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  return true;
}();

}  // namespace
