// SPDX-License-Identifier: Apache-2.0
#include "elf_check.h"

#include <link.h>

#include <backplane/elf_file.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

namespace backplane {
namespace core {
namespace {

// This host's ELF: what dlopen will accept.
#if __SIZEOF_POINTER__ == 8
constexpr unsigned char kHostClass = ELFCLASS64;
#else
constexpr unsigned char kHostClass = ELFCLASS32;
#endif
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
constexpr unsigned char kHostData = ELFDATA2LSB;
#else
constexpr unsigned char kHostData = ELFDATA2MSB;
#endif
#if defined(__x86_64__)
constexpr uint16_t kHostMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr uint16_t kHostMachine = EM_AARCH64;
#elif defined(__i386__)
constexpr uint16_t kHostMachine = EM_386;
#elif defined(__powerpc64__)
constexpr uint16_t kHostMachine = EM_PPC64;
#elif defined(__riscv)
constexpr uint16_t kHostMachine = EM_RISCV;
#else
constexpr uint16_t kHostMachine = EM_NONE;  // not checked
#endif

// At most this many program headers are read (real libraries have about ten).
constexpr size_t kMaxProgramHeaders = 4096;

std::string SegmentName(uint32_t type) {
  switch (type) {
    case PT_LOAD:
      return "a loadable segment (PT_LOAD)";
    case PT_DYNAMIC:
      return "the dynamic section (PT_DYNAMIC)";
    case PT_INTERP:
      return "the interpreter name (PT_INTERP)";
    case PT_NOTE:
      return "a note segment (PT_NOTE)";
    case PT_TLS:
      return "the TLS template (PT_TLS)";
    default:
      return "a segment of type " + std::to_string(type);
  }
}

std::string Damaged(const std::string& path, const std::string& what) {
  return "the library " + path + " is truncated or damaged: " + what +
         "; loading it would crash the process (SIGBUS), so it is refused; reinstall the plugin";
}

}  // namespace

std::string ElfLoadProblem(const std::string& path) {
  const elf::File file(path);
  if (file.open_errno() != 0) {
    return "the library " + path + " cannot be opened: " + std::strerror(file.open_errno());
  }
  if (!file.examined()) return "the library " + path + " cannot be examined";
  if (!file.regular()) return "the library " + path + " is not a regular file";
  const uint64_t size = file.size();

  ElfW(Ehdr) eh;
  if (size < sizeof(eh) || !file.ReadAt(&eh, sizeof(eh), 0)) {
    return Damaged(path, "it is " + std::to_string(size) + " bytes, shorter than an ELF header");
  }
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    return "the library " + path + " is not an ELF shared library (no ELF magic number)";
  }
  if (eh.e_ident[EI_CLASS] != kHostClass || eh.e_ident[EI_DATA] != kHostData) {
    return "the library " + path +
           " is an ELF file for another word size or byte order than "
           "this host's; build the plugin for this machine";
  }
  if (kHostMachine != EM_NONE && eh.e_machine != kHostMachine) {
    return "the library " + path + " is built for another machine (ELF e_machine " +
           std::to_string(eh.e_machine) + ", this host is " + std::to_string(kHostMachine) +
           "); build the plugin for this machine";
  }
  if (eh.e_type != ET_DYN) {
    return "the library " + path + " is not a shared object (ELF e_type " +
           std::to_string(eh.e_type) + "); build it as a shared library";
  }
  if (eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0 || eh.e_phnum > kMaxProgramHeaders) {
    return Damaged(path, "its program header table is malformed (" + std::to_string(eh.e_phnum) +
                             " entries of " + std::to_string(eh.e_phentsize) + " bytes)");
  }
  const uint64_t table_bytes = static_cast<uint64_t>(eh.e_phnum) * sizeof(ElfW(Phdr));
  if (eh.e_phoff > size || table_bytes > size - eh.e_phoff) {
    return Damaged(path, "its program header table (" + std::to_string(table_bytes) +
                             " bytes at offset " + std::to_string(eh.e_phoff) +
                             ") ends past the end of the file (" + std::to_string(size) +
                             " bytes)");
  }
  std::vector<ElfW(Phdr)> headers(eh.e_phnum);
  if (!file.ReadAt(headers.data(), table_bytes, eh.e_phoff)) {
    return "the library " + path + " cannot be read: " + std::strerror(errno);
  }
  for (size_t i = 0; i < headers.size(); ++i) {
    const ElfW(Phdr)& ph = headers[i];
    if (ph.p_filesz == 0) continue;
    if (ph.p_offset > size || ph.p_filesz > size - ph.p_offset) {
      return Damaged(path, SegmentName(ph.p_type) + " (program header " + std::to_string(i) + ": " +
                               std::to_string(ph.p_filesz) + " bytes at offset " +
                               std::to_string(ph.p_offset) + ") ends past the end of the file (" +
                               std::to_string(size) + " bytes)");
    }
    if (ph.p_type == PT_LOAD && ph.p_filesz > ph.p_memsz) {
      return Damaged(path, "a loadable segment (program header " + std::to_string(i) +
                               ") has more bytes in the file than in memory");
    }
  }
  return "";
}

}  // namespace core
}  // namespace backplane
