// SPDX-License-Identifier: Apache-2.0
// The one ELF reader of the project: reads a shared library's headers and tables with pread,
// checking every offset against the file's size, without mapping or reading the whole file
// (a plugin with a GPU fat binary is hundreds of MiB). The core checks a plugin's program
// headers with it before dlopen (a damaged file would crash the host with SIGBUS); the
// conformance kit reads a plugin's exported symbols with it. Header-only and Linux-only, like
// backplane/file_trust.hpp, so the core and the kit share it without a library between them.
#ifndef BACKPLANE_ELF_FILE_HPP_
#define BACKPLANE_ELF_FILE_HPP_

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace backplane {
namespace elf {

// A file opened for reading its ELF structures. It never blocks on a FIFO and never becomes
// the controlling terminal.
class File {
 public:
  explicit File(const std::string& path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd_ < 0) {
      open_errno_ = errno;
      return;
    }
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
      stat_failed_ = true;
      return;
    }
    regular_ = S_ISREG(st.st_mode);
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // 0 when it opened, else open's errno.
  int open_errno() const { return open_errno_; }
  // Whether it opened and fstat told what it is.
  bool examined() const { return fd_ >= 0 && !stat_failed_; }
  bool regular() const { return regular_; }
  uint64_t size() const { return size_; }

  // Whether `n` bytes at `offset` lie inside the file.
  bool InFile(uint64_t offset, uint64_t n) const { return offset <= size_ && n <= size_ - offset; }

  // Reads `n` bytes at `offset`; false at the end of the file or on an error (errno says it).
  bool ReadAt(void* out, size_t n, uint64_t offset) const {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      const ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
      offset += static_cast<uint64_t>(got);
    }
    return true;
  }

  // `count` entries of type T at `offset`, read only when they lie inside the file.
  template <typename T>
  bool ReadTable(std::vector<T>* out, uint64_t offset, uint64_t count) const {
    if (count > size_ / sizeof(T) || !InFile(offset, count * sizeof(T))) return false;
    out->resize(static_cast<size_t>(count));
    return count == 0 || ReadAt(out->data(), static_cast<size_t>(count) * sizeof(T), offset);
  }

 private:
  int fd_ = -1;
  int open_errno_ = 0;
  bool stat_failed_ = false;
  bool regular_ = false;
  uint64_t size_ = 0;
};

// What a 64-bit ELF shared library exports.
struct Exports {
  std::string error;  // why the file could not be read as 64-bit ELF: "not an ELF file", ...
  std::vector<std::string> names;      // every exported symbol, in the table's order
  std::vector<std::string> functions;  // those that are functions
};

// The symbols a 64-bit ELF library exports: defined dynamic symbols of global, weak or unique
// binding and default or protected visibility.
inline Exports ReadExports(const std::string& path) {
  Exports out;
  const File file(path);
  Elf64_Ehdr eh;
  if (!file.examined() || file.size() < sizeof(eh) || !file.ReadAt(&eh, sizeof(eh), 0) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    out.error = "not an ELF file";
    return out;
  }
  if (eh.e_ident[EI_CLASS] != ELFCLASS64) {
    out.error = "not a 64-bit ELF file";
    return out;
  }
  std::vector<Elf64_Shdr> sections;
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || !file.ReadTable(&sections, eh.e_shoff, eh.e_shnum)) {
    out.error = "its section headers are out of range";
    return out;
  }
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= sections.size()) continue;
    const Elf64_Shdr& strtab = sections[sh.sh_link];
    std::vector<Elf64_Sym> symbols;
    std::vector<char> strings;
    if (!file.InFile(sh.sh_offset, sh.sh_size) ||
        !file.ReadTable(&symbols, sh.sh_offset, sh.sh_size / sizeof(Elf64_Sym)) ||
        !file.ReadTable(&strings, strtab.sh_offset, strtab.sh_size)) {
      out.error = "its dynamic symbol table is out of range";
      return out;
    }
    for (size_t i = 1; i < symbols.size(); ++i) {
      const Elf64_Sym& sym = symbols[i];
      const int bind = ELF64_ST_BIND(sym.st_info);
      const int vis = ELF64_ST_VISIBILITY(sym.st_other);
      if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strings.size()) continue;
      if (bind != STB_GLOBAL && bind != STB_WEAK && bind != STB_GNU_UNIQUE) continue;
      if (vis != STV_DEFAULT && vis != STV_PROTECTED) continue;
      const char* name = strings.data() + sym.st_name;
      std::string n(name, strnlen(name, strings.size() - sym.st_name));
      if (ELF64_ST_TYPE(sym.st_info) == STT_FUNC) out.functions.push_back(n);
      out.names.push_back(std::move(n));
    }
  }
  return out;
}

}  // namespace elf
}  // namespace backplane

#endif  // BACKPLANE_ELF_FILE_HPP_
