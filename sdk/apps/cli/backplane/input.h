// SPDX-License-Identifier: Apache-2.0
// Reading the files a user names on the command line (kernel files, saved modules) with a
// size cap: a directory, an empty file, /dev/null, /dev/zero, a FIFO or a file too large is
// refused with a message that names the file, what was expected and what to do; nothing is
// ever read until the memory runs out.
#ifndef BACKPLANE_TOOLS_INPUT_H_
#define BACKPLANE_TOOLS_INPUT_H_

#include <cstddef>
#include <string>

namespace backplane {
namespace cli {

// The largest kernel file (the IR's text form) the tool reads: the same cap bp_build puts on
// its IR text (docs/host-guide.md, "Input limits").
constexpr size_t kMaxKernelFileBytes = size_t{16} << 20;  // 16 MiB
// The largest saved module `backplane run` reads: a module holds compiled code (a shared
// library, SPIR-V, PTX) besides its IR, so more room than for IR text.
constexpr size_t kMaxModuleFileBytes = size_t{256} << 20;  // 256 MiB

// What a file should hold, for the messages: "a kernel file in the IR's text form (.bpir)".
struct InputKind {
  const char* what;      // "kernel file", "module file"
  const char* expected;  // "the IR's text form (.bpir), e.g. share/backplane/kernels/matmul.bpir"
  size_t max_bytes;
};

// Reads `path` whole into `*out`, at most kind.max_bytes (reads one byte more to tell that a
// file or stream is larger, never more). Returns "" on success, else the message (without a
// command prefix): the file cannot be opened, is a directory, is empty, or is larger than the
// cap. Character devices and FIFOs are read as streams, under the same cap.
std::string ReadInputFile(const std::string& path, const InputKind& kind, std::string* out);

}  // namespace cli
}  // namespace backplane

#endif  // BACKPLANE_TOOLS_INPUT_H_
