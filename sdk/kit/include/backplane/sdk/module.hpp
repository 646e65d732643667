// SPDX-License-Identifier: Apache-2.0
// Plugin-author helper for runtime Modules: derive from ModuleBase, wrap it with MakeModule.
//
//   class FooModule : public backplane::sdk::ModuleBase {
//    public:
//     static constexpr const char* kKind = "foo";
//     backplane::Function GetFunction(const std::string& name) override;  // empty if absent
//     std::vector<std::string> ListFunctions() override;
//     std::optional<std::string> SaveToBytes() override;                  // optional
//     std::optional<std::string> InspectSource(const std::string& format) override;
//   };
//   backplane::Module m = backplane::sdk::MakeModule(std::make_shared<FooModule>(...));
//
// kKind is required: it names the module's kind ([a-z0-9_]+), which the saved bytes carry
// and which picks the loader ("runtime.module.load_from_bytes.<kind>") that reads them back.
// A class without it fails MakeModule's static_assert, whose message says what to add.
//
// The module object holds a std::shared_ptr to the implementation, so functions handed out
// by GetFunction may capture shared_from_this() and outlive the module object safely.
#ifndef BACKPLANE_SDK_MODULE_HPP_
#define BACKPLANE_SDK_MODULE_HPP_

#include <backplane/backplane.hpp>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace backplane {
namespace sdk {

class ModuleBase : public std::enable_shared_from_this<ModuleBase> {
 public:
  virtual ~ModuleBase() = default;
  // The function `name`, or an empty Function when the module lacks it. May throw.
  virtual Function GetFunction(const std::string& name) = 0;
  // Every function name.
  virtual std::vector<std::string> ListFunctions() = 0;
  // The module's own bytes, read back by "runtime.module.load_from_bytes.<kind>"; nullopt
  // if this module cannot be saved.
  virtual std::optional<std::string> SaveToBytes() { return std::nullopt; }
  // Generated source in `format` ("" = the main form); nullopt when unknown.
  virtual std::optional<std::string> InspectSource(const std::string& /*format*/) {
    return std::nullopt;
  }
};

// The base of a module of device kernels (the GPU-style plugins'): GetFunction and
// ListFunctions come from the kernels' names, and calling a kernel's Function runs
// Launch(its index, args) with the module kept alive by the Function. A derived class fills
// kernel_names_ before the module is handed out and never changes it after.
class KernelModule : public ModuleBase {
 public:
  Function GetFunction(const std::string& name) override {
    for (size_t i = 0; i < kernel_names_.size(); ++i) {
      if (kernel_names_[i] != name) continue;
      auto self = std::static_pointer_cast<KernelModule>(shared_from_this());
      return Function::FromCallable([self, i](PackedArgs args) {
        self->Launch(i, args);
        return Any();
      });
    }
    return Function();
  }
  std::vector<std::string> ListFunctions() override { return kernel_names_; }

 protected:
  // Launches kernel `index` (of kernel_names_) with the call's arguments; may throw.
  virtual void Launch(size_t index, PackedArgs args) = 0;
  std::vector<std::string> kernel_names_;
};

namespace detail {

// Whether T declares `static constexpr const char* kKind`, the kind MakeModule<T> needs.
template <typename T, typename = void>
struct HasModuleKind : std::false_type {};
template <typename T>
struct HasModuleKind<T, std::void_t<decltype(T::kKind)>>
    : std::is_convertible<decltype(T::kKind), const char*> {};

// T::kKind, or null where T lacks it (MakeModule's static_assert reports that; this keeps the
// compiler from adding errors of its own about the missing member).
template <typename T>
constexpr const char* ModuleKind() {
  if constexpr (HasModuleKind<T>::value) {
    return T::kKind;
  } else {
    return nullptr;
  }
}

template <typename T>
struct ModuleAdapter {
  static std::shared_ptr<T>& Self(void* self) { return *static_cast<std::shared_ptr<T>*>(self); }
  static bp_status_t GetFunction(void* self, const char* name, bp_object_t** out) {
    *out = nullptr;
    return CatchAtEdge([&] {
      Function f = Self(self)->GetFunction(name);
      if (f) {
        ObjectRef obj = f.object();
        *out = obj.release();
      }
    });
  }
  static bp_status_t ListFunctions(void* self, bp_object_t** out) {
    return CatchAtEdge([&] {
      std::vector<std::string> names = Self(self)->ListFunctions();
      std::vector<bp_value_t> values(names.size());
      for (size_t i = 0; i < names.size(); ++i) {
        values[i].type = BP_VALUE_STR;
        values[i].reserved0 = 0;
        values[i].u.v_str = names[i].c_str();
      }
      Check(::backplane::detail::Api()->array_create(values.data(), values.size(), out));
    });
  }
  static bp_status_t Save(void* self, bp_object_t** out) {
    return CatchAtEdge([&] {
      std::optional<std::string> bytes = Self(self)->SaveToBytes();
      if (!bytes) {
        throw Error(BP_ERR_UNSUPPORTED,
                    std::string("a module of kind '") + ModuleKind<T>() + "' cannot be saved");
      }
      Check(::backplane::detail::Api()->bytes_create(bytes->data(), bytes->size(), out));
    });
  }
  static bp_status_t Inspect(void* self, const char* format, bp_object_t** out) {
    *out = nullptr;
    return CatchAtEdge([&] {
      std::optional<std::string> text = Self(self)->InspectSource(format == nullptr ? "" : format);
      if (text) *out = MakeString(*text).release();
    });
  }
  static void Destroy(void* self) noexcept { delete static_cast<std::shared_ptr<T>*>(self); }
};

}  // namespace detail

// Wraps `impl` as a module object of kind T::kKind. T derives from ModuleBase and declares
//   static constexpr const char* kKind = "foo";  // [a-z0-9_]+, the loader's <kind>
// (a compile error names what is missing otherwise).
template <typename T>
Module MakeModule(std::shared_ptr<T> impl) {
  static_assert(std::is_base_of_v<ModuleBase, T>,
                "backplane::sdk::MakeModule<T>: T must derive from backplane::sdk::ModuleBase "
                "(or KernelModule); see backplane/sdk/module.hpp");
  static_assert(detail::HasModuleKind<T>::value,
                "backplane::sdk::MakeModule<T>: the module class T has no kind. Add "
                "`static constexpr const char* kKind = \"yourkind\";` to it: [a-z0-9_]+, the "
                "name saved modules carry and that the loader "
                "runtime.module.load_from_bytes.yourkind is registered under (see "
                "backplane/sdk/module.hpp and docs/plugin-guide.md)");
  static const bp_module_vtable_t kTable = [] {
    bp_module_vtable_t t{};
    t.struct_size = sizeof(bp_module_vtable_t);
    t.kind = detail::ModuleKind<T>();
    t.get_function = detail::ModuleAdapter<T>::GetFunction;
    t.list_functions = detail::ModuleAdapter<T>::ListFunctions;
    t.save_to_bytes = detail::ModuleAdapter<T>::Save;
    t.inspect_source = detail::ModuleAdapter<T>::Inspect;
    t.destroy = detail::ModuleAdapter<T>::Destroy;
    return t;
  }();
  auto* self = new std::shared_ptr<T>(std::move(impl));
  bp_object_t* out = nullptr;
  // On failure the core has already called destroy(self).
  Check(::backplane::detail::Api()->module_create(&kTable, self, &out));
  return Module(ObjectRef::Adopt(out));
}

}  // namespace sdk
}  // namespace backplane

#endif  // BACKPLANE_SDK_MODULE_HPP_
