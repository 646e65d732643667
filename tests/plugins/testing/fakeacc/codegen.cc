// SPDX-License-Identifier: Apache-2.0
// The fake accelerator's target kind `fakeacc` and code generator `target.build.fakeacc`:
// kernels made by SplitHostDevice run in the IR interpreter, which simulates the GPU grid
// (blocks, threads, shared memory, barriers), on the device's memory behind its opaque
// handles, asynchronously on the device's null stream. It is what a GPU backend looks like
// to the build flow, without a GPU: bp_build splits host code from kernels, the host part
// runs in the core, and the kernels launch here with their launch extents.
#include "codegen.h"

#include <backplane/ir/error.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/launch/launch.hpp>
#include <backplane/sdk/kernel_args.hpp>
#include <backplane/sdk/module.hpp>
#include <backplane/sdk/plugin.hpp>
#include <backplane/sdk/target.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "device_api.h"

namespace backplane {
namespace fakeacc {

namespace {

// A kernel argument kept alive until the launch has run: owned shape and strides, and the
// device buffer behind the handle.
struct LaunchArg {
  ir::ArgView view;
  std::vector<int64_t> shape, strides;
  std::shared_ptr<Buffer> buffer;
};

// The device's memory as the launch kit asks for it: the data space behind a handle. The fake
// accelerator has no launch limits.
class Backend final : public launch::Backend {
 public:
  explicit Backend(FakeAccDeviceAPI* api) : api_(api) {}
  launch::Allocation Find(DLDevice dev, void* handle) override {
    const std::shared_ptr<Buffer> b = api_->Resolve(dev, handle, 0, 0, "kernel argument");
    return {b.get(), 0, b->size};
  }
  const launch::DeviceLimits& Limits(DLDevice) override { return limits_; }

 private:
  FakeAccDeviceAPI* api_;
  launch::DeviceLimits limits_;
};

class FakeAccModule : public sdk::ModuleBase {
 public:
  static constexpr const char* kKind = "fakeacc";

  FakeAccModule(FakeAccDeviceAPI* api, std::string text)
      : api_(api), text_(std::move(text)), interp_(ir::Parse(text_, "fakeacc module")) {}

  Function GetFunction(const std::string& name) override {
    const ir::PrimFunc* f = interp_.module().Find(name);
    if (f == nullptr) return Function();
    std::shared_ptr<const launch::KernelSignature> sig;
    try {
      sig = std::make_shared<const launch::KernelSignature>(*f, "fakeacc");
    } catch (const ir::Error& e) {
      throw Error(BP_ERR_INVALID_ARGUMENT, e.what());
    }
    auto self = std::static_pointer_cast<FakeAccModule>(shared_from_this());
    return Function::FromCallable([self, sig](PackedArgs args) {
      self->Launch(*sig, args);
      return Any();
    });
  }
  std::vector<std::string> ListFunctions() override {
    std::vector<std::string> names;
    for (const ir::PrimFunc& f : interp_.module().functions()) names.push_back(f.name);
    return names;
  }
  std::optional<std::string> SaveToBytes() override { return text_; }
  std::optional<std::string> InspectSource(const std::string& format) override {
    if (format.empty() || format == "ir") return text_;
    return std::nullopt;
  }

 private:
  // The launch kit binds and checks the call (arguments, extents, buffers inside their data
  // spaces, no written buffer aliasing another); the kernel then runs in the interpreter on
  // the bytes behind the handles, with the launch extents after its params.
  void Launch(const launch::KernelSignature& sig, PackedArgs args) {
    thread_local launch::BoundLaunch bound;
    Backend backend(api_);
    launch::Bind(sig, args, api_->device_type(), backend, &bound);
    const size_t num_params = sig.num_params();
    std::vector<LaunchArg> launch(num_params + sig.axes().size());
    for (size_t i = 0; i < num_params; ++i) {
      LaunchArg& a = launch[i];
      a.view = bound.views[i];
      if (a.view.kind != ir::ArgView::Kind::kBuffer) continue;
      const launch::BufferArg& b = bound.buffer(i);
      const DLTensor* t = b.tensor;
      a.shape.assign(t->shape, t->shape + t->ndim);
      if (t->strides != nullptr) a.strides.assign(t->strides, t->strides + t->ndim);
      a.view.shape = a.shape.data();
      a.view.strides = t->strides != nullptr ? a.strides.data() : nullptr;
      a.view.user = nullptr;
      a.view.data = nullptr;  // an empty tensor reads no bytes and may have no data space
      if (b.span > 0) {
        a.buffer = api_->Resolve(bound.device, b.handle, b.byte_offset, b.span, "kernel argument");
        a.view.data = a.buffer->bytes.get() + b.byte_offset;
      }
    }
    for (size_t k = 0; k < sig.axes().size(); ++k) {
      ir::ArgView& v = launch[num_params + k].view;
      v.kind = ir::ArgView::Kind::kInt;
      v.i = args.Int(static_cast<int32_t>(num_params + k));
    }
    const std::string& name = sig.name();
    const DLDevice device = bound.device;
    auto self = std::static_pointer_cast<FakeAccModule>(shared_from_this());
    auto shared = std::make_shared<std::vector<LaunchArg>>(std::move(launch));
    api_->Launch(device, [self, shared, name] {
      std::vector<ir::ArgView> views;
      for (const LaunchArg& a : *shared) views.push_back(a.view);
      try {
        self->interp_.Run(name, views);
      } catch (const ir::Error& e) {
        throw Error(BP_ERR_DEVICE, "fakeacc kernel '" + name + "' failed: " + e.what());
      }
    });
  }

  FakeAccDeviceAPI* api_;
  std::string text_;
  ir::Interpreter interp_;
};

Any ModuleValue(const Module& m) {
  bp_value_t v{};
  v.type = BP_VALUE_OBJECT;
  ObjectRef obj = m.object();
  v.u.v_obj = obj.release();
  return Any(v);
}

}  // namespace

void RegisterCodegen(FakeAccDeviceAPI* api) {
  sdk::TargetKindBuilder("fakeacc", "fakeacc")
      .Keys({"fakeacc", "gpu"})
      .Attr<int64_t>("max_num_threads", int64_t{256}, BP_ATTR_MAX_THREADS_PER_BLOCK,
                     "threads a block may have")
      .Attr<int64_t>("thread_warp_size", int64_t{1}, "threads that run in lockstep")
      .Register();
  sdk::RegisterFunction(
      "target.build.fakeacc",
      [api](PackedArgs args) {
        Target target(ObjectRef::Borrow(args[1].u.v_obj));
        if (target.Kind() != "fakeacc") {
          throw Error(BP_ERR_INVALID_ARGUMENT,
                      "target.build.fakeacc got a Target of kind '" + target.Kind() + "'");
        }
        const std::string text = args.String(0);
        try {
          ir::IRModule m = ir::Parse(text, "target.build.fakeacc input");
          for (const ir::PrimFunc& f : m.functions()) {
            if (!f.launch_axes) {
              throw Error(BP_ERR_INVALID_ARGUMENT,
                          "target.build.fakeacc: function '" + f.name +
                              "' is not a kernel (no launch_params); build through bp_build, which "
                              "splits host code from kernels");
            }
          }
          return ModuleValue(sdk::MakeModule(std::make_shared<FakeAccModule>(api, ir::Print(m))));
        } catch (const ir::Error& e) {
          throw Error(BP_ERR_INVALID_ARGUMENT, std::string("target.build.fakeacc: ") + e.what());
        }
        // It reads what its IR library parses (a code generator registered without
        // sdk::RegisterCodegen declares it itself).
      },
      BP_FUNCTION_READS_IR(1, ir::kTextFormatVersion));
  sdk::RegisterFunction("runtime.module.load_from_bytes.fakeacc", [api](PackedArgs args) {
    const void* data = nullptr;
    size_t size = 0;
    if (args.size() != 1 || args[0].type != BP_VALUE_OBJECT) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  "runtime.module.load_from_bytes.fakeacc takes one bytes object");
    }
    Check(detail::Api()->bytes_get(args[0].u.v_obj, &data, &size));
    try {
      // As the build: kernels only (the interpreter verifies the IR and checks each launch's
      // extents against the kernel's loops).
      const std::string text(static_cast<const char*>(data), size);
      const ir::IRModule saved = ir::Parse(text, "saved fakeacc module");
      for (const ir::PrimFunc& f : saved.functions()) {
        if (!f.launch_axes) {
          throw Error(BP_ERR_INVALID_ARGUMENT,
                      "runtime.module.load_from_bytes.fakeacc: function '" + f.name +
                          "' is not a kernel (no launch_params); the module is not one "
                          "target.build.fakeacc makes");
        }
      }
      return ModuleValue(sdk::MakeModule(std::make_shared<FakeAccModule>(api, text)));
    } catch (const ir::Error& e) {
      throw Error(BP_ERR_INVALID_ARGUMENT,
                  std::string("runtime.module.load_from_bytes.fakeacc: ") + e.what());
    }
  });
}

}  // namespace fakeacc
}  // namespace backplane
