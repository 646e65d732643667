// SPDX-License-Identifier: Apache-2.0
#include "module.h"

#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/sdk/kernel_args.hpp>
#include <sstream>
#include <utility>

namespace simaccel {

namespace ir = backplane::ir;
namespace sdk = backplane::sdk;
using backplane::Any;
using backplane::Error;
using backplane::Function;
using backplane::PackedArgs;

namespace {

constexpr const char* kMagic = "simaccel-module";
constexpr int kFormatVersion = 1;

// A kernel argument kept alive until the launch has run: its own copy of shape and strides,
// and the allocation behind the handle.
struct LaunchArg {
  ir::ArgView view;
  std::vector<int64_t> shape, strides;
  std::shared_ptr<Allocation> allocation;
};

// The launch params of a kernel ("blockIdx.x,threadIdx.x" -> {"blockIdx.x", "threadIdx.x"}).
std::vector<std::string> LaunchParams(const ir::PrimFunc& f) {
  std::vector<std::string> out;
  auto it = f.attrs.find("launch_params");
  if (it == f.attrs.end()) return out;
  std::stringstream in(it->second);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

}  // namespace

SimAccelModule::SimAccelModule(SimAccelDeviceAPI* api, ir::IRModule kernels, KernelLimits limits)
    : api_(api), text_(ir::Print(kernels)), limits_(limits), program_(std::move(kernels)) {}

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
  const std::string text = bytes.substr(line2 + 1);
  return std::make_shared<SimAccelModule>(api, ir::Parse(text, "saved simaccel module"), limits);
}

Function SimAccelModule::GetFunction(const std::string& name) {
  const ir::PrimFunc* f = program_.module().Find(name);
  if (f == nullptr) return Function();
  // The function keeps the module alive: it may outlive the module object it came from.
  auto self = std::static_pointer_cast<SimAccelModule>(shared_from_this());
  return Function::FromCallable([self, f](PackedArgs args) {
    self->Launch(*f, args);
    return Any();
  });
}

std::vector<std::string> SimAccelModule::ListFunctions() {
  std::vector<std::string> names;
  for (const ir::PrimFunc& f : program_.module().functions()) names.push_back(f.name);
  return names;
}

std::optional<std::string> SimAccelModule::SaveToBytes() {
  return std::string(kMagic) + " " + std::to_string(kFormatVersion) + "\nmax_num_threads " +
         std::to_string(limits_.max_num_threads) + "\n" + text_;
}

std::optional<std::string> SimAccelModule::InspectSource(const std::string& format) {
  if (format.empty() || format == "ir") return text_;
  return std::nullopt;
}

void SimAccelModule::Launch(const ir::PrimFunc& f, PackedArgs args) {
  const int32_t type = api_->device_type();
  const std::vector<std::string> launch_params = LaunchParams(f);
  const int32_t num_params = static_cast<int32_t>(f.params.size());
  BACKPLANE_REQUIRE(args.size() == num_params + static_cast<int32_t>(launch_params.size()),
                    BP_ERR_INVALID_ARGUMENT,
                    "simaccel kernel '" + f.name + "' takes " + std::to_string(num_params) +
                        " arguments and " + std::to_string(launch_params.size()) +
                        " launch extents, got " + std::to_string(args.size()) +
                        " values; call it through the module bp_build made");

  // The params: dtype, shape, strides and device checked against the PrimFunc, then each
  // tensor's handle resolved now, so a bad handle is an error of this call, not of the stream.
  std::vector<ir::ArgView> params =
      sdk::BindKernelArgs(f, num_params > 0 ? &args[0] : nullptr, num_params, "simaccel",
                          [type](DLDevice d) { return d.device_type == type; });
  auto launch = std::make_shared<std::vector<LaunchArg>>(static_cast<size_t>(args.size()));
  DLDevice device = api_->ActiveDevice();
  bool have_tensor = false;
  for (int32_t i = 0; i < num_params; ++i) {
    LaunchArg& a = (*launch)[i];
    a.view = params[i];
    if (a.view.kind != ir::ArgView::Kind::kBuffer) continue;
    const DLTensor* t = static_cast<const DLTensor*>(a.view.user);
    BACKPLANE_REQUIRE(
        !have_tensor || t->device.device_id == device.device_id, BP_ERR_INVALID_ARGUMENT,
        "simaccel kernel '" + f.name + "': its tensors are on " + sdk::DeviceString(device) +
            " and " + sdk::DeviceString(t->device) + "; put every tensor of a call on one device");
    device = t->device;
    have_tensor = true;
    a.allocation =
        api_->Resolve(t->device, t->data, t->byte_offset, sdk::TensorBytes(t), "kernel argument");
    a.shape.assign(t->shape, t->shape + t->ndim);
    if (t->strides != nullptr) a.strides.assign(t->strides, t->strides + t->ndim);
    a.view.data = a.allocation->bytes.get() + t->byte_offset;
    a.view.shape = a.shape.data();
    a.view.strides = t->strides != nullptr ? a.strides.data() : nullptr;
    a.view.user = nullptr;
  }

  // The launch extents, and the block size the Target allowed.
  int64_t threads_per_block = 1;
  for (size_t j = 0; j < launch_params.size(); ++j) {
    LaunchArg& a = (*launch)[static_cast<size_t>(num_params) + j];
    a.view.kind = ir::ArgView::Kind::kInt;
    a.view.i = args.Int(num_params + static_cast<int32_t>(j));
    if (launch_params[j].rfind("threadIdx.", 0) == 0) threads_per_block *= a.view.i;
  }
  BACKPLANE_REQUIRE(threads_per_block <= limits_.max_num_threads, BP_ERR_INVALID_ARGUMENT,
                    "simaccel kernel '" + f.name + "' launches blocks of " +
                        std::to_string(threads_per_block) +
                        " threads but it was built for a Target with max_num_threads = " +
                        std::to_string(limits_.max_num_threads) +
                        "; use smaller blocks or build for a Target that allows more");

  // Queued: the call returns before the kernel runs; StreamSync waits for it and reports
  // its failure (an out-of-bounds index, say) as BP_ERR_DEVICE.
  auto self = std::static_pointer_cast<SimAccelModule>(shared_from_this());
  api_->Launch(device, [self, launch, name = f.name] {
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
