// SPDX-License-Identifier: Apache-2.0
// The vulkan runtime Module: saving and loading (no device needed), and launching a kernel:
// on its first call on a device the shader module, descriptor-set layout, pipeline layout,
// compute pipeline (through the device's pipeline cache, kept on disk) and a descriptor set
// are made; each call binds the tensors' VkBuffers, pushes the scalars, dispatches the
// blockIdx extents as group counts and submits on the active stream.
#include "module.h"

#include <algorithm>
#include <backplane/codegen/c_family.hpp>
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/half.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/module.hpp>
#include <backplane/sdk/plugin.hpp>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "device_api.h"
#include "float_controls.h"
#include "spirv_check.h"

namespace backplane {
namespace vulkan {

namespace {

// Version 4 saves the code generator's options, so loading emits each kernel's GLSL and layout
// again and compares (version 3 could not be checked); version 3 gave kernels their division and
// bounds-check sites (`faults` layout line) besides their loop sites; version 2 had loop sites
// only (its kernels divided unchecked) and version 1 neither (its kernels could be cut short
// silently). Versions before 4 are refused.
constexpr const char* kMagicPrefix = "backplane-vulkan-module ";
constexpr const char* kMagic = "backplane-vulkan-module 4\n";

// ---- Saving and loading: "<key> <length>\n<bytes>\n" fields after the magic line ----------

void Put(std::string& out, const std::string& key, const std::string& value) {
  out += key + " " + std::to_string(value.size()) + "\n" + value + "\n";
}

class Reader {
 public:
  explicit Reader(const std::string& bytes) : bytes_(bytes) {}
  // The value of the next field, which must be `key`.
  std::string Get(const std::string& key) {
    const size_t space = bytes_.find(' ', pos_), nl = bytes_.find('\n', pos_);
    if (space == std::string::npos || nl == std::string::npos || space > nl ||
        bytes_.compare(pos_, space - pos_, key) != 0) {
      Bad("expected the field '" + key + "' at byte " + std::to_string(pos_));
    }
    size_t len = 0;
    try {
      len = std::stoull(bytes_.substr(space + 1, nl - space - 1));
    } catch (const std::exception&) {
      Bad("the field '" + key + "' has no valid length");
    }
    // Written so that no length, however large, wraps the sum (a length near 2^64 did).
    if (len >= bytes_.size() - (nl + 1) || bytes_[nl + 1 + len] != '\n') {
      Bad("the field '" + key + "' is cut short");
    }
    std::string value = bytes_.substr(nl + 1, len);
    pos_ = nl + 1 + len + 1;
    return value;
  }
  size_t Remaining() const { return bytes_.size() - pos_; }
  [[noreturn]] static void Bad(const std::string& what) {
    throw Error(
        BP_ERR_INVALID_ARGUMENT,
        "not a vulkan module (" + what +
            "); pass bytes a vulkan module's SaveToBytes wrote, from this Backplane version");
  }

 private:
  const std::string& bytes_;
  size_t pos_ = std::strlen(kMagic);
};

// Whether a kernel's pipeline depends on sizes known only at launch: shared arrays or
// workgroup axes sized at launch.
bool SizedAtLaunch(const KernelLayout& l, const launch::KernelSignature& sig) {
  return sig.num_launch_sized() > 0 || l.local_size[0] == 0 || l.local_size[1] == 0 ||
         l.local_size[2] == 0;
}

std::string LayoutText(const KernelLayout& l) {
  std::ostringstream o;
  o << "bindings";
  for (int32_t b : l.bindings) o << " " << b;
  o << "\npush_size " << l.push_size << "\n";
  for (const PushField& f : l.push)
    o << "push " << f.param << " " << f.offset << " " << f.kind << "\n";
  o << "local_size " << l.local_size[0] << " " << l.local_size[1] << " " << l.local_size[2] << "\n";
  o << "launch";
  for (const std::string& p : l.launch_params) o << " " << p;
  o << "\nuses " << l.uses_int64 << " " << l.uses_float64 << "\n";
  if (l.uses_float16) o << "float16 1\n";
  if (l.atomics != 0) o << "atomics " << l.atomics << "\n";
  for (const StatusSite& site : l.sites) o << "site " << site.code << " " << site.what << "\n";
  if (!l.faults.empty()) o << "faults " << codegen::FaultSitesToJson(l.faults) << "\n";
  return o.str();
}

// The code generator's options, one "key value" line each.
std::string OptionsText(const GlslOptions& o) {
  return "max_threads " + std::to_string(o.max_threads) + "\nmax_push_constants " +
         std::to_string(o.max_push_constants) + "\nfp_contract " +
         std::to_string(o.fp_contract ? 1 : 0) + "\nbounds_check " +
         std::to_string(o.bounds_check ? 1 : 0) + "\n";
}

GlslOptions ParseOptions(const std::string& text) {
  GlslOptions o;
  std::istringstream in(text);
  int fp_contract = -1, bounds_check = -1;
  std::string k1, k2, k3, k4;
  in >> k1 >> o.max_threads >> k2 >> o.max_push_constants >> k3 >> fp_contract >> k4 >>
      bounds_check;
  if (in.fail() || k1 != "max_threads" || k2 != "max_push_constants" || k3 != "fp_contract" ||
      k4 != "bounds_check" || (fp_contract != 0 && fp_contract != 1) ||
      (bounds_check != 0 && bounds_check != 1) || o.max_threads <= 0 || o.max_push_constants <= 0) {
    Reader::Bad("its options are damaged");
  }
  o.fp_contract = fp_contract == 1;
  o.bounds_check = bounds_check == 1;
  return o;
}

int64_t Detail(const uint32_t* words, int k) {
  const uint64_t v = uint64_t{words[2 + 2 * k]} | (uint64_t{words[3 + 2 * k]} << 32);
  return static_cast<int64_t>(v);
}

// Throws the error that a kernel's error record holds (docs/vulkan.md).
[[noreturn]] void RaiseStatus(const KernelLayout& l, const std::string& device,
                              const uint32_t* words) {
  const uint32_t code = words[0], site = words[1];
  if ((code == kStatusDivisionByZero || code == kStatusOutOfBounds) && site >= 1 &&
      site <= l.faults.size()) {
    // The interpreter's message, as the other code generators raise it.
    codegen::FaultRecord r;
    r.site = static_cast<int32_t>(site);
    for (int k = 0; k < 3; ++k) r.arg[k] = Detail(words, k);
    throw Error(
        codegen::FaultIsOutOfMemory(l.faults, r) ? BP_ERR_OUT_OF_MEMORY : BP_ERR_INVALID_ARGUMENT,
        codegen::FaultMessage(l.faults, r));
  }
  const std::string where =
      site < l.sites.size() ? l.sites[site].what : "check site " + std::to_string(site);
  const std::string kernel = "vulkan kernel '" + l.name + "' on " + device;
  if (code == kStatusLoopCutShort) {
    throw Error(
        BP_ERR_DEVICE,
        kernel + ": " + where + " stopped at " + std::to_string(Detail(words, 0)) +
            " before its end " + std::to_string(Detail(words, 1)) + " in invocation " +
            std::to_string(Detail(words, 2)) +
            " (global linear index), so its results are incomplete. The driver left the loop "
            "early: lavapipe (llvmpipe) lets each group of invocations it runs as one SIMD "
            "vector take 65535 loop back edges in all its loops together, then leaves every "
            "loop (the code generator runs innermost loops 32 iterations per back edge when "
            "the body is small, else 8: about 2 million or 500 thousand iterations). Give each "
            "invocation less work: bind the loop, or an outer one, to blockIdx/threadIdx, or "
            "split it over several launches");
  }
  throw Error(BP_ERR_DEVICE,
              kernel + ": " + where + " recorded error code " + std::to_string(code) +
                  " (details " + std::to_string(Detail(words, 0)) + ", " +
                  std::to_string(Detail(words, 1)) + ", " + std::to_string(Detail(words, 2)) +
                  "), which this Backplane version does not know; rebuild the "
                  "kernel with this version");
}

// The pipelines a kernel with shared arrays or a workgroup sized at launch keeps for distinct
// sizes.
constexpr size_t kMaxSizedPipelines = 64;

// A kernel's Vulkan objects on one device.
struct Pipeline {
  VkShaderModule shader = VK_NULL_HANDLE;
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;  // null for a kernel with sizes set at launch
  // For a kernel with shared arrays or a workgroup sized at launch, a pipeline per set of their
  // sizes (the specialization constants), made on first use.
  std::map<std::vector<uint32_t>, VkPipeline> sized;
  VkDescriptorPool pool = VK_NULL_HANDLE;
  VkDescriptorSet set = VK_NULL_HANDLE;
  // What `set` holds, and the device's FreedCount when it was written: a call binding the
  // same buffers, ranges and count needs no vkUpdateDescriptorSets.
  std::vector<VkDescriptorBufferInfo> bound;
  uint64_t bound_freed = 0;
  Use last_use;  // the last dispatch that read `set`
  // The kernel's error buffer (at binding bindings.size()) when the shader makes checks.
  std::shared_ptr<KernelStatus> status;

  void Destroy(VkDevice dev) {
    if (pool != VK_NULL_HANDLE) vkDestroyDescriptorPool(dev, pool, nullptr);
    if (pipeline != VK_NULL_HANDLE) vkDestroyPipeline(dev, pipeline, nullptr);
    for (auto& [lengths, sized_pipeline] : sized) vkDestroyPipeline(dev, sized_pipeline, nullptr);
    if (layout != VK_NULL_HANDLE) vkDestroyPipelineLayout(dev, layout, nullptr);
    if (set_layout != VK_NULL_HANDLE) vkDestroyDescriptorSetLayout(dev, set_layout, nullptr);
    if (shader != VK_NULL_HANDLE) vkDestroyShaderModule(dev, shader, nullptr);
    *this = Pipeline{};  // a status still watched is freed after its last read
  }
};

void Check(VkResult r, const std::string& what) {
  if (r == VK_SUCCESS) return;
  throw Error(r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY
                  ? BP_ERR_OUT_OF_MEMORY
                  : BP_ERR_DEVICE,
              "vulkan: " + what + " failed with VkResult " + std::to_string(static_cast<int>(r)) +
                  "; check the Vulkan driver (vulkaninfo)");
}

class VulkanModule : public sdk::KernelModule {
 public:
  static constexpr const char* kKind = "vulkan";

  VulkanModule(ir::IRModule m, std::vector<CompiledKernel> kernels, GlslOptions options)
      : ir_text_(ir::Print(m)), ir_(std::move(m)), kernels_(std::move(kernels)), options_(options) {
    for (const CompiledKernel& k : kernels_) {
      kernel_names_.push_back(k.layout.name);
      const ir::PrimFunc* f = ir_.Find(k.layout.name);
      if (f == nullptr) Reader::Bad("kernel '" + k.layout.name + "' is not in its IR");
      funcs_.push_back(f);
      sigs_.emplace_back(*f, "vulkan");
      for (int32_t b : k.layout.bindings) {
        if (b < 0 || static_cast<size_t>(b) >= f->params.size() || !f->params[b].is_buffer()) {
          Reader::Bad("kernel '" + k.layout.name + "' binds a parameter that is not a buffer");
        }
      }
      for (const PushField& p : k.layout.push) {
        if (p.param < 0 || static_cast<size_t>(p.param) >= f->params.size() ||
            f->params[p.param].is_buffer() || p.offset + 8 > 4096) {
          Reader::Bad("kernel '" + k.layout.name + "' pushes a parameter that is not a scalar");
        }
      }
    }
  }

  ~VulkanModule() override {
    for (auto& [device_id, pipelines] : pipelines_) {
      try {
        VulkanDeviceAPI::Global()->WithDevice(DLDevice{kDLVulkan, device_id}, [&](DeviceScope& s) {
          s.WaitIdle();  // a queued dispatch may still use them
          for (Pipeline& p : pipelines) p.Destroy(s.device());
        });
      } catch (const std::exception&) {
        // The device is gone; its objects went with it.
      }
    }
  }

  std::optional<std::string> SaveToBytes() override {
    std::string out = kMagic;
    Put(out, "ir", ir_text_);
    Put(out, "options", OptionsText(options_));
    Put(out, "kernels", std::to_string(kernels_.size()));
    for (const CompiledKernel& k : kernels_) {
      Put(out, "name", k.layout.name);
      Put(out, "layout", LayoutText(k.layout));
      Put(out, "glsl", k.glsl);
      Put(out, "spirv",
          std::string(reinterpret_cast<const char*>(k.spirv.data()),
                      k.spirv.size() * sizeof(uint32_t)));
    }
    return out;
  }

  // "" or "glsl": every kernel's GLSL; "ir": the kernels' IR.
  std::optional<std::string> InspectSource(const std::string& format) override {
    if (format == "ir") return ir_text_;
    if (!format.empty() && format != "glsl") return std::nullopt;
    std::string text;
    for (const CompiledKernel& k : kernels_) text += k.glsl + "\n";
    return text;
  }

 private:
  // A compute pipeline of kernel `k` (whose shader and layout `p` holds) on the device of `s`,
  // with `lengths` as its specialization constants: first the lengths of its shared
  // arrays sized at launch, constants 0, 1, ...; then its workgroup's size on each axis the
  // kernel sizes at launch, constant kLocalSizeSpecId + axis (emitter.cc).
  static VkPipeline MakePipeline(const CompiledKernel& k, const Pipeline& p, DeviceScope& s,
                                 const std::vector<uint32_t>& lengths) {
    std::vector<VkSpecializationMapEntry> entries(lengths.size());
    size_t axes = 0;
    for (uint32_t size : k.layout.local_size) axes += size == 0 ? 1 : 0;
    for (size_t j = 0, axis = 0; j < lengths.size(); ++j) {
      entries[j].constantID = static_cast<uint32_t>(j);
      if (j >= lengths.size() - axes) {  // a workgroup axis sized at launch
        while (k.layout.local_size[axis] != 0) ++axis;
        entries[j].constantID = kLocalSizeSpecId + static_cast<uint32_t>(axis++);
      }
      entries[j].offset = static_cast<uint32_t>(j * sizeof(uint32_t));
      entries[j].size = sizeof(uint32_t);
    }
    VkSpecializationInfo spec{};
    spec.mapEntryCount = static_cast<uint32_t>(entries.size());
    spec.pMapEntries = entries.data();
    spec.dataSize = lengths.size() * sizeof(uint32_t);
    spec.pData = lengths.data();
    VkComputePipelineCreateInfo ci{};
    ci.sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO;
    ci.stage.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO;
    ci.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    ci.stage.module = p.shader;
    ci.stage.pName = "main";
    ci.stage.pSpecializationInfo = lengths.empty() ? nullptr : &spec;
    ci.layout = p.layout;
    // A grid over maxComputeWorkGroupCount is dispatched in parts (Launch), each from its base.
    if (s.properties().apiVersion >= VK_API_VERSION_1_1) {
      ci.flags |= VK_PIPELINE_CREATE_DISPATCH_BASE_BIT;
    }
    return s.CreateComputePipeline(ci, "kernel '" + k.layout.name + "'");
  }

  // Makes kernel i's objects on the device of `s`.
  Pipeline Create(size_t i, DeviceScope& s) {
    const CompiledKernel& k = kernels_[i];
    VkDevice dev = s.device();
    Pipeline p;
    try {
      // The IR keeps subnormal floats, signed zeros, infinities and NaNs; a device that can
      // keep them is asked to.
      const std::vector<uint32_t> code =
          s.float_controls().Any() ? WithFloatControls(k.spirv, s.float_controls()) : k.spirv;
      VkShaderModuleCreateInfo smi{};
      smi.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO;
      smi.codeSize = code.size() * sizeof(uint32_t);
      smi.pCode = code.data();
      Check(vkCreateShaderModule(dev, &smi, nullptr, &p.shader), "vkCreateShaderModule");
      const bool checks = k.layout.HasChecks();
      std::vector<VkDescriptorSetLayoutBinding> bindings(k.layout.bindings.size() +
                                                         (checks ? 1 : 0));
      for (size_t b = 0; b < bindings.size(); ++b) {
        bindings[b].binding = static_cast<uint32_t>(b);
        bindings[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        bindings[b].descriptorCount = 1;
        bindings[b].stageFlags = VK_SHADER_STAGE_COMPUTE_BIT;
      }
      VkDescriptorSetLayoutCreateInfo dli{};
      dli.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO;
      dli.bindingCount = static_cast<uint32_t>(bindings.size());
      dli.pBindings = bindings.data();
      Check(vkCreateDescriptorSetLayout(dev, &dli, nullptr, &p.set_layout),
            "vkCreateDescriptorSetLayout");
      VkPushConstantRange range{VK_SHADER_STAGE_COMPUTE_BIT, 0, k.layout.push_size};
      VkPipelineLayoutCreateInfo pli{};
      pli.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO;
      pli.setLayoutCount = 1;
      pli.pSetLayouts = &p.set_layout;
      pli.pushConstantRangeCount = k.layout.push_size > 0 ? 1 : 0;
      pli.pPushConstantRanges = &range;
      Check(vkCreatePipelineLayout(dev, &pli, nullptr, &p.layout), "vkCreatePipelineLayout");
      if (!SizedAtLaunch(k.layout, sigs_[i])) p.pipeline = MakePipeline(k, p, s, {});
      if (!bindings.empty()) {
        VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER,
                                  static_cast<uint32_t>(bindings.size())};
        VkDescriptorPoolCreateInfo dpi{};
        dpi.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO;
        dpi.maxSets = 1;
        dpi.poolSizeCount = 1;
        dpi.pPoolSizes = &size;
        Check(vkCreateDescriptorPool(dev, &dpi, nullptr, &p.pool), "vkCreateDescriptorPool");
        VkDescriptorSetAllocateInfo ai{};
        ai.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO;
        ai.descriptorPool = p.pool;
        ai.descriptorSetCount = 1;
        ai.pSetLayouts = &p.set_layout;
        Check(vkAllocateDescriptorSets(dev, &ai, &p.set), "vkAllocateDescriptorSets");
      }
      if (checks) {
        p.status =
            s.NewKernelStatus([layout = k.layout, device = std::string(s.properties().deviceName)](
                                  const uint32_t* words) { RaiseStatus(layout, device, words); });
        VkDescriptorBufferInfo info{p.status->buffer.buffer, 0,
                                    kStatusBufferWords * sizeof(uint32_t)};
        VkWriteDescriptorSet w{};
        w.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        w.dstSet = p.set;
        w.dstBinding = static_cast<uint32_t>(k.layout.bindings.size());
        w.descriptorCount = 1;
        w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        w.pBufferInfo = &info;
        vkUpdateDescriptorSets(dev, 1, &w, 0, nullptr);
      }
    } catch (...) {
      p.Destroy(dev);
      throw;
    }
    return p;
  }

  // What the launch kit asks of this plugin: a handle's live data space, and the limits.
  class LaunchBackend final : public launch::Backend {
   public:
    explicit LaunchBackend(VulkanDeviceAPI* api) : api_(api) {}
    launch::Allocation Find(DLDevice dev, void* handle) override {
      return api_->FindDataSpace(dev, handle);
    }
    const launch::DeviceLimits& Limits(DLDevice dev) override { return api_->LaunchLimits(dev); }

   private:
    VulkanDeviceAPI* api_;
  };

  // The launch's phases, in order: Bind (the launch kit), CheckLocalSize, PushConstants, then on
  // the device CheckFeatures, the pipeline (SizedPipeline for the sizes given at launch),
  // BindBuffers, and Record submitted on the stream.
  void Launch(size_t i, PackedArgs args) override {
    const CompiledKernel& k = kernels_[i];
    const KernelLayout& l = k.layout;
    const launch::KernelSignature& sig = sigs_[i];
    VulkanDeviceAPI* api = VulkanDeviceAPI::Global();
    // Reused by every launch on this thread: a warm launch allocates nothing there.
    thread_local launch::BoundLaunch bound;
    LaunchBackend backend(api);
    launch::Bind(sig, args, kDLVulkan, backend, &bound);
    CheckLocalSize(l, sig, bound);
    if (bound.empty) return;  // an empty grid: nothing runs
    // Within the kit's grid limit (UINT32_MAX with vkCmdDispatchBase, else
    // maxComputeWorkGroupCount): each fits a uint32_t.
    const uint32_t groups[3] = {static_cast<uint32_t>(bound.grid[0]),
                                static_cast<uint32_t>(bound.grid[1]),
                                static_cast<uint32_t>(bound.grid[2])};
    const DLDevice device = bound.device;
    const std::string push = PushConstants(l, sig, bound);
    api->WithDevice(device, [&](DeviceScope& s) {
      CheckFeatures(l, s);
      s.CheckStatus();  // an earlier kernel's error, found since, is raised before more work
      std::vector<Pipeline>& per_device = PipelinesOf(device.device_id);
      if (per_device[i].shader == VK_NULL_HANDLE) per_device[i] = Create(i, s);
      Pipeline& p = per_device[i];
      const VkPipeline pipeline =
          SizedAtLaunch(l, sig) ? SizedPipeline(k, sig, bound, s, p) : p.pipeline;
      BindBuffers(l, bound, s, p);
      p.last_use =
          s.Submit([&](VkCommandBuffer cmd) { Record(cmd, p, pipeline, push, bound, groups); });
      if (p.status) s.Watch(p.status, p.last_use);
    });
  }

  static void CheckLocalSize(const KernelLayout& l, const launch::KernelSignature& sig,
                             const launch::BoundLaunch& bound) {
    // The shader's workgroup size is fixed when it is built, except on the axes it sizes at
    // launch (local size 0; Bind kept those within the device's limits): the threadIdx extents
    // must be it.
    for (const launch::Axis& a : sig.axes()) {
      if (a.block || l.local_size[a.dim] == 0 || bound.block[a.dim] == l.local_size[a.dim]) {
        continue;
      }
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "vulkan kernel '" + l.name + "': the launch extent of " + ir::ToString(a.tag) +
                      " is " + std::to_string(bound.block[a.dim]) +
                      ", but the shader was built with local size " +
                      std::to_string(l.local_size[a.dim]) + "; launch it as built");
    }
  }

  // The push constants of the scalar params, laid out as the shader declares them.
  // A float16 param is a float push constant holding the half the launch kit rounded the
  // argument to (once), which the shader's rounding keeps.
  static std::string PushConstants(const KernelLayout& l, const launch::KernelSignature& sig,
                                   const launch::BoundLaunch& bound) {
    std::string push(l.push_size, '\0');
    for (const PushField& p : l.push) {
      const ir::ArgView& v = bound.views[p.param];
      char* at = push.data() + p.offset;
      auto put = [at](auto x) { std::memcpy(at, &x, sizeof(x)); };
      switch (p.kind) {
        case 'f':
          if (sig.param(static_cast<size_t>(p.param)) == launch::ParamKind::kFloat16) {
            put(ir::HalfToFloat(bound.scalar(static_cast<size_t>(p.param)).f16));
          } else {
            put(static_cast<float>(v.kind == ir::ArgView::Kind::kFloat ? v.f : v.i));
          }
          break;
        case 'd':
          put(v.kind == ir::ArgView::Kind::kFloat ? v.f : static_cast<double>(v.i));
          break;
        case 'l':
        case 'L':
          put(v.i);
          break;
        default:
          put(static_cast<int32_t>(v.i));
      }
    }
    return push;
  }

  // Refuses a kernel that uses a feature the device lacks.
  static void CheckFeatures(const KernelLayout& l, DeviceScope& s) {
    if ((l.uses_int64 && !s.shader_int64()) || (l.uses_float64 && !s.shader_float64())) {
      throw Error(
          BP_ERR_UNSUPPORTED,
          "vulkan kernel '" + l.name + "' uses " +
              (l.uses_int64 ? "64-bit integers (shaderInt64)" : "64-bit floats (shaderFloat64)") +
              ", which " + s.properties().deviceName +
              " lacks; use 32-bit types in the kernel (floordiv/floormod on ints use "
              "int64; a float32 fma computes in float64 to round once)");
    }
    if (l.uses_float16 && !s.float16()) {
      throw Error(BP_ERR_UNSUPPORTED,
                  "vulkan kernel '" + l.name +
                      "' uses float16, which needs shaderFloat16 and "
                      "storageBuffer16BitAccess; " +
                      s.properties().deviceName +
                      " lacks one (its supports_fp16 attribute is 0): compute in float32");
    }
    if (const uint32_t missing = l.atomics & ~s.atomics()) {
      throw Error(BP_ERR_UNSUPPORTED,
                  "vulkan kernel '" + l.name + "' uses " +
                      ((missing & kAtomicInt64) ? "64-bit atomics (int64 or float64, both "
                                                  "through shaderBufferInt64Atomics and "
                                                  "shaderSharedInt64Atomics)"
                                                : "float32 atomic add "
                                                  "(VK_EXT_shader_atomic_float)") +
                      ", which " + s.properties().deviceName +
                      " lacks; accumulate in int32, or per thread and then reduce");
    }
  }

  // The pipeline of kernel `k` for the sizes this launch gives (shared arrays and workgroup
  // axes sized at launch); the caller holds the device's lock.
  VkPipeline SizedPipeline(const CompiledKernel& k, const launch::KernelSignature& sig,
                           const launch::BoundLaunch& bound, DeviceScope& s, Pipeline& p) {
    const KernelLayout& l = k.layout;
    // The lengths of the shared arrays sized at launch (at least 1: a specialization
    // constant sizes a GLSL array), then the workgroup's axes sized at launch; one pipeline
    // per set of sizes, kept.
    std::vector<uint32_t> lengths(sig.num_launch_sized(), 1);
    for (int axis = 0; axis < 3; ++axis) {
      // Bind kept the extent within maxComputeWorkGroupSize: it fits a uint32.
      if (l.local_size[axis] == 0) {
        lengths.push_back(static_cast<uint32_t>(std::max<int64_t>(bound.block[axis], 1)));
      }
    }
    for (size_t j = 0; j < sig.shared().size(); ++j) {
      const launch::SharedArray& a = sig.shared()[j];
      if (!a.at_launch()) continue;
      // Bind kept the array within maxComputeSharedMemorySize bytes, so it fits a uint32;
      // checked again, as a truncated length would size the array silently wrong.
      const uint64_t n = std::max<uint64_t>(bound.shared_elements[j], 1);
      if (n > UINT32_MAX) {
        throw Error(BP_ERR_INVALID_ARGUMENT,
                    "vulkan kernel '" + l.name + "': shared allocation '" + a.alloc->buffer.name() +
                        "' has " + std::to_string(n) +
                        " elements at this launch, more than a specialization constant "
                        "holds; launch it with a smaller size");
      }
      lengths[static_cast<size_t>(a.launch_index)] = static_cast<uint32_t>(n);
    }
    auto found = p.sized.find(lengths);
    if (found == p.sized.end() && p.sized.size() >= kMaxSizedPipelines) {
      // A caller that launches with ever new sizes would otherwise keep a pipeline for each:
      // past the cap they all go (after the last dispatch that may use one), and the sizes
      // in use are made again.
      s.Wait(p.last_use);
      for (auto& [old_lengths, old] : p.sized) vkDestroyPipeline(s.device(), old, nullptr);
      p.sized.clear();
      found = p.sized.end();
    }
    if (found == p.sized.end()) {
      found = p.sized.emplace(lengths, MakePipeline(k, p, s, lengths)).first;
    }
    return found->second;
  }

  // Resolves the buffer arguments under the device's lock and writes them to the pipeline's
  // descriptor set where they changed.
  static void BindBuffers(const KernelLayout& l, const launch::BoundLaunch& bound, DeviceScope& s,
                          Pipeline& p) {
    const VkPhysicalDeviceLimits& lim = s.properties().limits;
    std::vector<VkDescriptorBufferInfo> infos(l.bindings.size());
    for (size_t j = 0; j < l.bindings.size(); ++j) {
      const launch::BufferArg& arg = bound.buffer(static_cast<size_t>(l.bindings[j]));
      const uint64_t nbytes = arg.span;
      auto what = [&l, &j] {
        return "kernel '" + l.name + "' argument " + std::to_string(l.bindings[j]);
      };
      if (arg.byte_offset % lim.minStorageBufferOffsetAlignment != 0) {
        throw Error(BP_ERR_INVALID_ARGUMENT,
                    "vulkan " + what() + " has byte_offset " + std::to_string(arg.byte_offset) +
                        ", not a multiple of the device's minStorageBufferOffsetAlignment " +
                        std::to_string(lim.minStorageBufferOffsetAlignment) +
                        "; copy it to a tensor of its own");
      }
      if (nbytes > lim.maxStorageBufferRange) {
        throw Error(BP_ERR_INVALID_ARGUMENT,
                    "vulkan " + what() + " holds " + std::to_string(nbytes) +
                        " bytes, more than the device's maxStorageBufferRange " +
                        std::to_string(lim.maxStorageBufferRange) + "; split the work");
      }
      // Looked up again under the device's lock: a buffer freed since Bind is refused here.
      infos[j].buffer = s.Resolve(arg.handle, arg.byte_offset, nbytes, what);
      infos[j].offset = nbytes == 0 ? 0 : arg.byte_offset;
      infos[j].range = nbytes == 0 ? VK_WHOLE_SIZE : nbytes;
    }
    // The set is rewritten only when the bindings changed or a buffer was freed since (a
    // freed buffer's handle may now name another), after the dispatch that last read it.
    auto same = [](const VkDescriptorBufferInfo& x, const VkDescriptorBufferInfo& y) {
      return x.buffer == y.buffer && x.offset == y.offset && x.range == y.range;
    };
    const bool current = p.bound.size() == infos.size() && p.bound_freed == s.FreedCount() &&
                         std::equal(infos.begin(), infos.end(), p.bound.begin(), same);
    if (!infos.empty() && !current) {
      s.Wait(p.last_use);  // a queued dispatch may still read the set
      std::vector<VkWriteDescriptorSet> writes(infos.size());
      for (size_t b = 0; b < infos.size(); ++b) {
        writes[b].sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET;
        writes[b].dstSet = p.set;
        writes[b].dstBinding = static_cast<uint32_t>(b);
        writes[b].descriptorCount = 1;
        writes[b].descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
        writes[b].pBufferInfo = &infos[b];
      }
      vkUpdateDescriptorSets(s.device(), static_cast<uint32_t>(writes.size()), writes.data(), 0,
                             nullptr);
      p.bound = infos;
      p.bound_freed = s.FreedCount();
    }
  }

  // Records the dispatch (in parts where the grid is larger than one dispatch may be), and the
  // barrier that makes the kernel's status record visible to the host.
  static void Record(VkCommandBuffer cmd, const Pipeline& p, VkPipeline pipeline,
                     const std::string& push, const launch::BoundLaunch& bound,
                     const uint32_t (&groups)[3]) {
    vkCmdBindPipeline(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, pipeline);
    if (p.set != VK_NULL_HANDLE) {
      vkCmdBindDescriptorSets(cmd, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &p.set, 0,
                              nullptr);
    }
    if (!push.empty()) {
      vkCmdPushConstants(cmd, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         static_cast<uint32_t>(push.size()), push.data());
    }
    if (!bound.split) {
      vkCmdDispatch(cmd, groups[0], groups[1], groups[2]);
    } else {
      // Larger than one dispatch may be (the kit allowed it: the device has
      // vkCmdDispatchBase): the kit's parts, each from its base, so gl_WorkGroupID runs
      // over the whole grid. Every offset and size fits a uint32_t (the grid does).
      launch::ForEachGridPart(bound, [cmd](const launch::GridPart& part) {
        vkCmdDispatchBase(
            cmd, static_cast<uint32_t>(part.offset[0]), static_cast<uint32_t>(part.offset[1]),
            static_cast<uint32_t>(part.offset[2]), static_cast<uint32_t>(part.grid[0]),
            static_cast<uint32_t>(part.grid[1]), static_cast<uint32_t>(part.grid[2]));
      });
    }
    if (p.status) {
      // The record is read on the host once the dispatch is done.
      VkBufferMemoryBarrier b{};
      b.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER;
      b.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT;
      b.dstAccessMask = VK_ACCESS_HOST_READ_BIT;
      b.srcQueueFamilyIndex = b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
      b.buffer = p.status->buffer.buffer;
      b.offset = 0;
      b.size = VK_WHOLE_SIZE;
      vkCmdPipelineBarrier(cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_HOST_BIT, 0,
                           0, nullptr, 1, &b, 0, nullptr);
    }
  }

  // The pipelines of device `id` (one slot per kernel); the caller holds the device's lock.
  std::vector<Pipeline>& PipelinesOf(int32_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Pipeline>& v = pipelines_[id];
    v.resize(kernels_.size());
    return v;
  }

  std::string ir_text_;
  ir::IRModule ir_;
  std::vector<CompiledKernel> kernels_;
  GlslOptions options_;
  std::vector<const ir::PrimFunc*> funcs_;
  std::vector<launch::KernelSignature> sigs_;  // per kernel, as the launch kit binds it
  std::mutex mu_;
  std::map<int32_t, std::vector<Pipeline>> pipelines_;
};

}  // namespace

Module MakeVulkanModule(ir::IRModule m, std::vector<CompiledKernel> kernels, GlslOptions options) {
  return sdk::MakeModule(std::make_shared<VulkanModule>(std::move(m), std::move(kernels), options));
}

Module LoadVulkanModule(const std::string& bytes) {
  if (bytes.compare(0, std::strlen(kMagic), kMagic) != 0) {
    if (bytes.compare(0, std::strlen(kMagicPrefix), kMagicPrefix) == 0) {
      const size_t nl = bytes.find('\n');
      const std::string version = bytes.substr(
          std::strlen(kMagicPrefix), std::min<size_t>(nl, 40) - std::strlen(kMagicPrefix));
      Reader::Bad("its version is " + version +
                  ", an older Backplane's, which this one cannot check; this Backplane reads "
                  "version 4 only: build the module again from its IR");
    }
    Reader::Bad("it does not start with \"backplane-vulkan-module 4\"");
  }
  Reader r(bytes);
  std::string ir_text = r.Get("ir");
  const GlslOptions options = ParseOptions(r.Get("options"));
  // What the build established, established again: the IR verifies, and each kernel's GLSL and
  // layout (by which the runtime binds buffers, pushes scalars and sizes the grid) are what the
  // code generator makes of it with these options.
  ir::IRModule m;
  try {
    m = ir::Parse(ir_text, "the vulkan module's IR");
    ir::Verify(m);
  } catch (const ir::Error& e) {
    Reader::Bad(std::string("its IR is not a set of kernels: ") + e.what());
  }
  size_t count = 0;
  try {
    count = std::stoull(r.Get("kernels"));
  } catch (const std::logic_error&) {
    Reader::Bad("the kernel count is not a number");
  }
  if (count != m.functions().size()) {
    Reader::Bad("it lists " + std::to_string(count) + " kernels but its IR has " +
                std::to_string(m.functions().size()));
  }
  std::vector<CompiledKernel> kernels;
  for (size_t i = 0; i < count; ++i) {
    const ir::PrimFunc& f = m.functions()[i];
    const std::string name = r.Get("name");
    if (name != f.name) {
      Reader::Bad("kernel " + std::to_string(i) + " is '" + name + "' but the IR's is '" + f.name +
                  "'");
    }
    GlslKernel emitted;
    try {
      emitted = EmitGlslKernel(f, options);
    } catch (const ir::Error& e) {
      Reader::Bad("kernel '" + name + "' is not one this code generator builds: " + e.what());
    }
    if (r.Get("layout") != LayoutText(emitted.layout) || r.Get("glsl") != emitted.source) {
      Reader::Bad("kernel '" + name +
                  "' has a layout or GLSL that is not what this Backplane generates from its IR "
                  "(the file was changed after it was built, or built by another version)");
    }
    CompiledKernel k;
    k.layout = std::move(emitted.layout);
    k.glsl = std::move(emitted.source);
    const std::string spirv = r.Get("spirv");
    if (spirv.size() % 4 != 0 || spirv.size() < 20) {
      Reader::Bad("kernel '" + name + "' has no valid SPIR-V");
    }
    k.spirv.resize(spirv.size() / 4);
    std::memcpy(k.spirv.data(), spirv.data(), spirv.size());
    const std::string problem = SpirvInterfaceProblem(k.spirv, k.layout);
    if (!problem.empty()) Reader::Bad("kernel '" + name + "': " + problem);
    kernels.push_back(std::move(k));
  }
  if (r.Remaining() != 0) Reader::Bad("it has bytes after its last kernel");
  return MakeVulkanModule(std::move(m), std::move(kernels), options);
}

}  // namespace vulkan
}  // namespace backplane
