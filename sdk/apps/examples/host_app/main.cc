// SPDX-License-Identifier: Apache-2.0
// An example host application, built against the installed Backplane package only
// (CMakeLists.txt beside this file): it loads the plugins, lists the devices, builds a kernel
// file for a Target given on the command line, runs it on random tensors on the Target's
// device, checks the result and prints it.
//
//   host_app KERNEL_FILE FUNCTION TARGET [--plugin-path DIR]...
//   host_app $P/share/backplane/kernels/vector_add.bpir vector_add c
//   host_app $P/share/backplane/kernels/matmul.bpir matmul_gpu simaccel
//   host_app vector_add.bpir vector_add c      (a name without '/': from the kernel catalog)
//
// Everything that touches a device is the C++ host API (backplane/backplane.hpp), spelled
// out below. The random inputs, the float64 reference and the tolerance come from the
// reference kernels' catalog (Backplane::kernels), so FUNCTION is one of its kernels
// (`backplane demo` lists them).
#include <backplane/backplane.hpp>
#include <backplane/ir/error.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/kernels/catalog.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace bp = backplane;

namespace {

constexpr const char* kUsage =
    "usage: host_app KERNEL_FILE FUNCTION TARGET [--plugin-path DIR]...\n"
    "  e.g. host_app share/backplane/kernels/vector_add.bpir vector_add 'c'\n"
    "  A KERNEL_FILE without '/' is read from the reference kernels' folder of the\n"
    "  installed package (BACKPLANE_KERNEL_DIR overrides it).\n";

// Device 0 of the device type the Target's kind runs on (from the kinds' description).
bp::Device DeviceOf(const bp::Target& target) {
  const nlohmann::json kinds = nlohmann::json::parse(bp::TargetKinds::Describe())["kinds"];
  for (const nlohmann::json& kind : kinds) {
    if (kind["name"] == target.Kind()) {
      return bp::Device(kind["device_type"].get<std::string>(), 0);
    }
  }
  throw bp::Error(BP_ERR_NOT_FOUND, "no target kind '" + target.Kind() + "'");
}

// The text of a kernel file: a path, or a bare name (no '/') read from the catalog's folder,
// which Backplane::kernels finds beside the libbackplane this program loaded.
std::string ReadKernel(const std::string& path) {
  if (path.find('/') == std::string::npos) {
    std::printf("kernels: %s\n", bp::kernels::KernelDir().c_str());
    return bp::kernels::ReadKernelFile(path);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw bp::Error(BP_ERR_NOT_FOUND, "cannot read kernel file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The IR text of a module holding only `func` from a kernel file. Kernel files hold CPU and
// GPU variants side by side, and a CPU Target refuses GPU kernels, so one function is built.
std::string OneFunction(const std::string& path, const std::string& func) {
  bp::ir::IRModule file = bp::ir::Parse(ReadKernel(path), path);
  const bp::ir::PrimFunc* f = file.Find(func);
  if (f == nullptr) {
    throw bp::Error(BP_ERR_NOT_FOUND, "kernel file " + path + " has no function '" + func + "'");
  }
  bp::ir::IRModule one;
  one.Add(*f);
  return bp::ir::Print(one);
}

int Run(const std::string& kernel_file, const std::string& func, const std::string& target_text) {
  // 1. Plugins: every one on the path now, so the devices can be listed. A plugin that
  //    cannot load is skipped with its reason (bp_plugins_list); the host goes on.
  bp::Check(bp_plugins_load_all());
  std::printf("devices:\n");
  for (const bp::DeviceEntry& d : bp::ListDevices()) {
    std::printf("  %-12s %s\n", d.device.ToString().c_str(), d.name.c_str());
  }

  // 2. The Target, and the device its kind runs on.
  const bp::Target target = bp::Target::Parse(target_text);
  const bp::Device dev = DeviceOf(target);
  if (!bp::DeviceAPI::Get(dev).Exists()) {
    throw bp::Error(BP_ERR_NOT_FOUND, "target " + target.Kind() + " runs on " + dev.ToString() +
                                          ", which this machine does not have");
  }
  std::printf("target: %s\ndevice: %s\n", target.ToJson().c_str(), dev.ToString().c_str());

  // 3. Build the kernel for the Target. The module saves to bytes and loads back, here or on
  //    another machine; the loaded one is what runs. A module for a CPU Target holds a shared
  //    library, native code that loads only when the caller allows it: this program built the
  //    bytes itself a line above, so it does. A host that reads a module from a file allows it
  //    only for files it trusts (docs/security.md, "Saved modules").
  const bp::Module built = bp::Build(OneFunction(kernel_file, func), target);
  const bp::Module module =
      bp::Module::LoadFromBytes(built.SaveToBytes(), bp::ModuleLoadOptions{/*allow_native=*/true});
  std::printf("module: kind %s, %zu imported module(s)\n", module.Kind().c_str(),
              module.Imports().size());

  // 4. Random inputs and the float64 reference, from the catalog.
  const bp::kernels::Case* c = bp::kernels::Find(func);
  if (c == nullptr) {
    throw bp::Error(BP_ERR_NOT_FOUND, "'" + func + "' is not one of the reference kernels, so " +
                                          "host_app has no inputs or reference for it");
  }
  std::vector<bp::kernels::Arg> args = c->make_args(c->small, /*seed=*/2024);
  std::vector<bp::kernels::Arg> want = args;
  c->reference(want);

  // 5. Tensors on the device: allocate, copy the inputs in. Scalars pass as values.
  std::vector<bp::Tensor> tensors(args.size());
  std::vector<bp_value_t> values(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const bp::kernels::Arg& a = args[i];
    if (!a.is_buffer) {
      values[i] = a.dtype.is_float() ? bp::detail::ToArg(a.scalar)
                                     : bp::detail::ToArg(static_cast<int64_t>(a.scalar));
      continue;
    }
    if (a.dtype != bp::ir::Float32()) {
      throw bp::Error(BP_ERR_UNSUPPORTED, "host_app passes float32 buffers only; '" + a.name +
                                              "' is " + bp::ir::ToString(a.dtype));
    }
    tensors[i] = bp::Tensor::Empty(a.shape, bp::Float32(), dev);
    tensors[i].CopyFrom(std::vector<float>(a.data.begin(), a.data.end()));
    values[i] = bp::detail::ToArg(tensors[i].dl());
  }

  // 6. Call the function by name. On a GPU-like device the call only queues the kernels, so
  //    synchronise the stream before reading the outputs (ToVector waits for its own copy).
  const bp::Function fn = module.GetFunction(func);
  fn.CallPacked(values.data(), static_cast<int32_t>(values.size()));
  bp::DeviceAPI::Get(dev).StreamSync();

  // 7. Copy the outputs back and compare them with the reference.
  double max_error = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_output) continue;
    const std::vector<float> out = tensors[i].ToVector<float>();
    args[i].data.assign(out.begin(), out.end());
    max_error = std::max(max_error, bp::kernels::RelativeError(args[i], want[i]));
    std::printf("%s[0..3] = ", args[i].name.c_str());
    for (size_t k = 0; k < out.size() && k < 4; ++k) std::printf("%s%g", k ? ", " : "", out[k]);
    std::printf("%s\n", out.size() > 4 ? ", ..." : "");
  }
  const bool ok = max_error <= c->tolerance;
  std::printf("%s on %s: %s (max relative error %.3g, tolerance %.3g)\n", func.c_str(),
              dev.ToString().c_str(), ok ? "ok" : "FAILED", max_error, c->tolerance);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> positional;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--plugin-path" && i + 1 < argc) {
        bp::Check(bp_plugin_path_add(argv[++i]));  // searched before the install's folder
      } else if (arg == "-h" || arg == "--help") {
        std::fputs(kUsage, stdout);
        return 0;
      } else {
        positional.push_back(arg);
      }
    }
    if (positional.size() != 3) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    return Run(positional[0], positional[1], positional[2]);
  } catch (const bp::Error& e) {
    std::fprintf(stderr, "host_app: error (%s): %s\n", bp_error_kind_name(e.kind()), e.what());
  } catch (const bp::ir::Error& e) {
    std::fprintf(stderr, "host_app: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "host_app: %s\n", e.what());
  }
  return 1;
}
