// SPDX-License-Identifier: Apache-2.0
// Plugin manifests: <name>.bpplugin.json beside each plugin library, read without loading
// the library.
#ifndef BACKPLANE_CORE_MANIFEST_H_
#define BACKPLANE_CORE_MANIFEST_H_

#include <string>
#include <vector>

namespace backplane {
namespace core {

inline constexpr const char* kManifestSuffix = ".bpplugin.json";

struct Manifest {
  std::string path;
  std::string name;
  std::string library;  // a file name in the manifest's folder
  std::string abi_version;
  std::string version;
  std::string vendor;
  std::vector<std::string> provides;
  std::vector<std::string> device_types;
};

// Reads and checks a manifest; throws a CoreError saying what is wrong and where.
Manifest ReadManifest(const std::string& path);

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_MANIFEST_H_
