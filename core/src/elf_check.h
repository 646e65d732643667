// SPDX-License-Identifier: Apache-2.0
// A look at a plugin library's ELF headers before dlopen maps it: a truncated or damaged file
// whose segments reach past its end would be mapped all the same, and the first touch of a
// page beyond the end kills the host with SIGBUS inside dlopen, before any check could help.
#ifndef BACKPLANE_CORE_ELF_CHECK_H_
#define BACKPLANE_CORE_ELF_CHECK_H_

#include <string>

namespace backplane {
namespace core {

// Why the shared library at `path` cannot be loaded safely, or "": it must be an ELF shared
// object of this host's class, byte order and machine, and its program header table and
// every segment with bytes in the file must lie inside the file.
std::string ElfLoadProblem(const std::string& path);

}  // namespace core
}  // namespace backplane

#endif  // BACKPLANE_CORE_ELF_CHECK_H_
