// SPDX-License-Identifier: Apache-2.0
#include "module.h"

#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <sstream>
#include <utility>

namespace simaccel {

namespace ir = backplane::ir;
namespace launch = backplane::launch;
namespace sdk = backplane::sdk;
using backplane::Any;
using backplane::Error;
using backplane::Function;
using backplane::PackedArgs;

namespace {

constexpr const char* kMagic = "simaccel-module";
constexpr int kFormatVersion = 1;

// A kernel argument kept until the launch has run: its own copy of shape and strides.
struct LaunchArg {
  ir::ArgView view;
  std::vector<int64_t> shape, strides;
};

// What the launch kit asks of simaccel: where a handle lies, and the launch limits. The
// allocations it finds are kept in `held`, so the queued kernel's memory outlives a free.
class LaunchBackend final : public launch::Backend {
 public:
  LaunchBackend(SimAccelDeviceAPI* api, const launch::DeviceLimits& limits,
                std::vector<std::shared_ptr<Allocation>>* held)
      : api_(api), limits_(limits), held_(held) {}
  launch::Allocation Find(DLDevice dev, void* handle) override {
    std::shared_ptr<Allocation> a = api_->Resolve(dev, handle, 0, 0, "kernel argument");
    held_->push_back(a);
    return {a.get(), 0, a->size};
  }
  const launch::DeviceLimits& Limits(DLDevice) override { return limits_; }

 private:
  SimAccelDeviceAPI* api_;
  const launch::DeviceLimits& limits_;
  std::vector<std::shared_ptr<Allocation>>* held_;
};

}  // namespace

SimAccelModule::SimAccelModule(SimAccelDeviceAPI* api, ir::IRModule kernels, KernelLimits limits)
    : api_(api), text_(ir::Print(kernels)), limits_(limits), program_(std::move(kernels)) {
  // The Target's limit, checked at each launch by the launch kit.
  launch_limits_.threads_per_block = limits_.max_num_threads;
  launch_limits_.shared_per_block = SimAccelDeviceAPI::kSharedMemoryPerBlock;
  for (const ir::PrimFunc& f : program_.module().functions()) {
    kernel_names_.push_back(f.name);
    sigs_.emplace_back(f, "simaccel");
  }
}

std::shared_ptr<SimAccelModule> SimAccelModule::FromBytes(SimAccelDeviceAPI* api,
                                                          const std::string& bytes) {
  // Line 1: "simaccel-module <version>", line 2: "max_num_threads <n>", then the IR text.
  const size_t line1 = bytes.find('\n');
  const size_t line2 = line1 == std::string::npos ? line1 : bytes.find('\n', line1 + 1);
  std::istringstream header(bytes.substr(0, line2 == std::string::npos ? 0 : line2));
  std::string magic, key;
  int version = 0;
  KernelLimits limits;
  header >> magic >> version >> key >> limits.max_num_threads;
  BACKPLANE_REQUIRE(header && magic == kMagic && key == "max_num_threads", BP_ERR_INVALID_ARGUMENT,
                    "these bytes are not a saved simaccel module (they do not start with '" +
                        std::string(kMagic) + " " + std::to_string(kFormatVersion) +
                        "' and its limits); load a file that backplane saved from a "
                        "simaccel module");
  BACKPLANE_REQUIRE(version == kFormatVersion, BP_ERR_VERSION_MISMATCH,
                    "this simaccel module was saved in format " + std::to_string(version) +
                        " but this plugin reads format " + std::to_string(kFormatVersion) +
                        "; rebuild the module with this plugin");
  ir::IRModule kernels = ir::Parse(bytes.substr(line2 + 1), "saved simaccel module");
  // As the build: kernels only (the launch kit checks each launch's extents against them).
  for (const ir::PrimFunc& f : kernels.functions()) {
    BACKPLANE_REQUIRE(f.launch_axes.has_value(), BP_ERR_INVALID_ARGUMENT,
                      "function '" + f.name +
                          "' is not a kernel (it has no launch_params); the module is not one "
                          "target.build.simaccel makes");
  }
  return std::make_shared<SimAccelModule>(api, std::move(kernels), limits);
}

std::optional<std::string> SimAccelModule::SaveToBytes() {
  return std::string(kMagic) + " " + std::to_string(kFormatVersion) + "\nmax_num_threads " +
         std::to_string(limits_.max_num_threads) + "\n" + text_;
}

std::optional<std::string> SimAccelModule::InspectSource(const std::string& format) {
  if (format.empty() || format == "ir") return text_;
  return std::nullopt;
}

void SimAccelModule::Launch(size_t index, PackedArgs args) {
  const launch::KernelSignature& sig = sigs_[index];
  // The launch kit binds and checks the call: the count, dtypes, shapes and strides, one
  // simaccel device for every tensor, each tensor inside its allocation, no written buffer
  // overlapping another, and the block within the Target's max_num_threads. A bad handle is
  // an error of this call, not of the stream.
  thread_local launch::BoundLaunch bound;
  auto held = std::make_shared<std::vector<std::shared_ptr<Allocation>>>();
  LaunchBackend backend(api_, launch_limits_, held.get());
  launch::Bind(sig, args, api_->device_type(), backend, &bound);
  if (bound.empty) return;  // an extent is 0: nothing runs

  // What the queued kernel runs with, copied: the call returns before it runs. The params,
  // each buffer at its allocation's bytes plus the tensor's byte offset, then the extents.
  const size_t num_params = sig.num_params();
  auto launch = std::make_shared<std::vector<LaunchArg>>(num_params + sig.axes().size());
  for (size_t i = 0; i < num_params; ++i) {
    LaunchArg& a = (*launch)[i];
    a.view = bound.views[i];
    if (sig.param(i) != launch::ParamKind::kBuffer) continue;
    const launch::BufferArg& buf = bound.buffer(i);
    const DLTensor* t = buf.tensor;
    const auto* where = static_cast<const Allocation*>(buf.where.id);  // null: spans no bytes
    a.shape.assign(t->shape, t->shape + t->ndim);
    if (t->strides != nullptr) a.strides.assign(t->strides, t->strides + t->ndim);
    a.view.data = where == nullptr ? nullptr : where->bytes.get() + buf.byte_offset;
    a.view.shape = a.shape.data();
    a.view.strides = t->strides != nullptr ? a.strides.data() : nullptr;
    a.view.user = nullptr;
  }
  for (size_t j = 0; j < sig.axes().size(); ++j) {
    const launch::Axis& axis = sig.axes()[j];
    LaunchArg& a = (*launch)[num_params + j];
    a.view.kind = ir::ArgView::Kind::kInt;
    a.view.i = axis.block ? bound.grid[axis.dim] : bound.block[axis.dim];
  }

  // Queued: the call returns before the kernel runs; StreamSync waits for it and reports
  // its failure (an out-of-bounds index, say) as BP_ERR_DEVICE.
  auto self = std::static_pointer_cast<SimAccelModule>(shared_from_this());
  api_->Launch(bound.device, [self, launch, held, name = sig.name()] {
    std::vector<ir::ArgView> views;
    views.reserve(launch->size());
    for (const LaunchArg& a : *launch) views.push_back(a.view);
    try {
      self->program_.Run(name, views);
    } catch (const ir::Error& e) {
      throw Error(BP_ERR_DEVICE, "simaccel kernel '" + name + "' failed: " + e.what());
    }
  });
}

}  // namespace simaccel
