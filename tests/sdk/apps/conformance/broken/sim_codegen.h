// SPDX-License-Identifier: Apache-2.0
// The simulated accelerator's code generator: target kind <name> on device type <name>,
// target.build.<name> and runtime.module.load_from_bytes.<name>. Kernels (after the core's
// SplitHostDevice) run in the IR interpreter on the device's memory, queued on the calling
// thread's active stream. Knobs let a broken plugin compute wrong results or refuse to load a
// saved module.
#ifndef BACKPLANE_TESTS_CONFORMANCE_BROKEN_SIM_CODEGEN_H_
#define BACKPLANE_TESTS_CONFORMANCE_BROKEN_SIM_CODEGEN_H_

#include <algorithm>
#include <backplane/ir/error.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/sdk/kernel_args.hpp>
#include <backplane/sdk/module.hpp>
#include <backplane/sdk/target.hpp>

#include "sim.h"

namespace backplane {
namespace sim {

struct CodegenOptions {
  bool wrong_results = false;  // add 1 to the first element of each kernel's last buffer
  bool clobber_input = false;  // add 1 to the first element of each kernel's first buffer
  bool refuse_load = false;    // runtime.module.load_from_bytes fails
  // target.build refuses a kernel whose text holds this (when not empty) with
  // BP_ERR_UNSUPPORTED and the message bp_build gives when a kernel needs a newer IR text
  // version than a code generator reads (docs/abi.md, "Old code generators")...
  std::string refuse_as_newer_ir;
  // ... and one whose text holds this with BP_ERR_UNSUPPORTED and a message without it.
  std::string refuse_unsupported;
};

// `Kind` holds the module kind: struct K { static constexpr const char* kKind = "..."; }.
template <typename Kind>
class SimModule : public sdk::ModuleBase {
 public:
  static constexpr const char* kKind = Kind::kKind;

  SimModule(SimDeviceAPI* api, std::string text, CodegenOptions options)
      : api_(api),
        text_(std::move(text)),
        interp_(ir::Parse(text_, "sim module")),
        options_(options) {}

  Function GetFunction(const std::string& name) override {
    const ir::PrimFunc* f = interp_.module().Find(name);
    if (f == nullptr) return Function();
    auto self = std::static_pointer_cast<SimModule>(shared_from_this());
    return Function::FromCallable([self, f](PackedArgs args) {
      self->Launch(*f, args);
      return Any();
    });
  }
  std::vector<std::string> ListFunctions() override {
    std::vector<std::string> names;
    for (const ir::PrimFunc& f : interp_.module().functions()) names.push_back(f.name);
    return names;
  }
  std::optional<std::string> SaveToBytes() override { return text_; }

 private:
  struct Launched {
    std::vector<ir::ArgView> views;
    std::vector<std::vector<int64_t>> shapes;
    std::vector<Region> regions;  // keep the memory alive until the kernel ran
  };

  void Launch(const ir::PrimFunc& f, PackedArgs args) {
    const int32_t type = api_->type();
    const size_t num_params = f.params.size();
    const int32_t n = args.size();
    std::vector<ir::ArgView> params = sdk::BindKernelArgs(
        f, n > 0 ? &args[0] : nullptr, std::min<int32_t>(n, static_cast<int32_t>(num_params)),
        Kind::kKind, [type](DLDevice d) { return d.device_type == type; });
    auto launched = std::make_shared<Launched>();
    launched->shapes.resize(static_cast<size_t>(n));
    DLDevice device{static_cast<DLDeviceType>(type), 0};
    int first_buffer = -1;
    int last_buffer = -1;
    for (int32_t i = 0; i < n; ++i) {
      if (static_cast<size_t>(i) >= num_params) {
        ir::ArgView v;
        v.kind = ir::ArgView::Kind::kInt;
        v.i = args.Int(i);
        launched->views.push_back(v);
        continue;
      }
      ir::ArgView v = params[static_cast<size_t>(i)];
      if (v.kind == ir::ArgView::Kind::kBuffer) {
        const DLTensor* t = static_cast<const DLTensor*>(v.user);
        device = t->device;
        size_t count = 1;
        for (int d = 0; d < t->ndim; ++d) count *= static_cast<size_t>(t->shape[d]);
        const Region r = api_->Resolve(t->data, t->byte_offset,
                                       count * ((t->dtype.bits * t->dtype.lanes + 7) / 8));
        launched->regions.push_back(r);
        launched->shapes[static_cast<size_t>(i)].assign(t->shape, t->shape + t->ndim);
        v.data = r.data();
        v.shape = launched->shapes[static_cast<size_t>(i)].data();
        v.strides = nullptr;
        v.user = nullptr;
        if (first_buffer < 0) first_buffer = i;
        last_buffer = i;
      }
      launched->views.push_back(v);
    }
    auto self = std::static_pointer_cast<SimModule>(shared_from_this());
    const std::string name = f.name;
    api_->Launch(device, [self, launched, name, first_buffer, last_buffer] {
      try {
        self->interp_.Run(name, launched->views);
      } catch (const ir::Error& e) {
        throw Error(BP_ERR_DEVICE,
                    std::string(Kind::kKind) + " kernel '" + name + "': " + e.what());
      }
      if (self->options_.clobber_input && first_buffer >= 0 && first_buffer != last_buffer) {
        ir::ArgView& in = launched->views[static_cast<size_t>(first_buffer)];
        if (in.dtype.bits == 32) {
          float x;
          std::memcpy(&x, in.data, sizeof(x));
          x += 1.0f;
          std::memcpy(in.data, &x, sizeof(x));
        }
      }
      if (self->options_.wrong_results && last_buffer >= 0) {
        ir::ArgView& out = launched->views[static_cast<size_t>(last_buffer)];
        if (out.dtype.bits == 32) {
          float x;
          std::memcpy(&x, out.data, sizeof(x));
          x += 1.0f;
          std::memcpy(out.data, &x, sizeof(x));
        }
      }
    });
  }

  SimDeviceAPI* api_;
  std::string text_;
  ir::Interpreter interp_;
  CodegenOptions options_;
};

template <typename Kind>
Any SimModuleValue(SimDeviceAPI* api, std::string text, CodegenOptions options) {
  Module m = sdk::MakeModule(std::make_shared<SimModule<Kind>>(api, std::move(text), options));
  bp_value_t v{};
  v.type = BP_VALUE_OBJECT;
  ObjectRef obj = m.object();
  v.u.v_obj = obj.release();
  return Any(v);
}

// Registers target kind <api->name()>, target.build.<name> and
// runtime.module.load_from_bytes.<Kind::kKind>.
template <typename Kind>
void RegisterSimCodegen(SimDeviceAPI* api, CodegenOptions options) {
  const std::string name = api->name();
  sdk::TargetKindBuilder(name, name).Keys({name, "gpu"}).Register();
  sdk::RegisterFunction("target.build." + name, [api, options, name](PackedArgs args) {
    const std::string text = args.String(0);
    const auto holds = [&](const std::string& what) {
      return !what.empty() && text.find(what) != std::string::npos;
    };
    if (holds(options.refuse_as_newer_ir)) {
      throw Error(BP_ERR_UNSUPPORTED,
                  "bp_build for target kind '" + name + "': function 'construct' uses `" +
                      options.refuse_as_newer_ir +
                      "`, which needs IR text version 9; the code generator target.build." + name +
                      " (plugin '" + name + "' 1.0.0) reads IR text versions 1 to 8: use " +
                      "a build of plugin '" + name +
                      "' that reads version 9, or write the kernel without it");
    }
    if (holds(options.refuse_unsupported)) {
      throw Error(BP_ERR_UNSUPPORTED, "target.build." + name + " does not support `" +
                                          options.refuse_unsupported + "`");
    }
    try {
      return SimModuleValue<Kind>(api, ir::Print(ir::Parse(text, "target.build input")), options);
    } catch (const ir::Error& e) {
      throw Error(BP_ERR_INVALID_ARGUMENT, e.what());
    }
  });
  sdk::RegisterFunction(std::string("runtime.module.load_from_bytes.") + Kind::kKind,
                        [api, options](PackedArgs args) {
                          if (options.refuse_load) {
                            throw Error(BP_ERR_INVALID_ARGUMENT,
                                        "this module loader cannot read what its modules save");
                          }
                          const void* data = nullptr;
                          size_t size = 0;
                          Check(detail::Api()->bytes_get(args[0].u.v_obj, &data, &size));
                          return SimModuleValue<Kind>(
                              api, std::string(static_cast<const char*>(data), size), options);
                        });
}

}  // namespace sim
}  // namespace backplane

#endif  // BACKPLANE_TESTS_CONFORMANCE_BROKEN_SIM_CODEGEN_H_
