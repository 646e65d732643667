// SPDX-License-Identifier: Apache-2.0
// libFuzzer target for the IR's text form (backplane::ir::Parse): any bytes in, no crash, hang
// or leak out, and only backplane::ir::Error as a failure. A module that parses must print
// text that parses back and prints the same (Print(Parse(Print(m))) == Print(m)); one that
// also verifies must read back structurally equal, split into host and device halves that
// verify and round-trip too (or fail with an Error), and compile in the interpreter.
//
// Built with clang -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt compiles the IR library's
// sources in); the same file with replay_main.cc replays the seed corpus under any compiler.
#include <backplane/ir/analysis.hpp>
#include <backplane/ir/interp.hpp>
#include <backplane/ir/text.hpp>
#include <backplane/ir/transform.hpp>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace bir = backplane::ir;

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "ir_parser_fuzz: %s\n%s\n", what, detail.c_str());
  std::abort();
}

// Print(Parse(Print(m))) == Print(m); returns the reparsed module.
bir::IRModule RoundTrip(const bir::IRModule& m, const char* what) {
  const std::string first = bir::Print(m);
  bir::IRModule again;
  try {
    again = bir::Parse(first);
  } catch (const bir::Error& e) {
    // What the printer writes for a tree the parser accepted must parse (docs/ir.md, "Limits").
    Die(what, "the printed text does not parse back: " + std::string(e.what()) + "\n" + first);
  }
  const std::string second = bir::Print(again);
  if (second != first) Die(what, "printing changed on re-parse:\n" + first + "\n----\n" + second);
  return again;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) { return 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  bir::IRModule m;
  try {
    m = bir::Parse(text, "fuzz");
  } catch (const bir::Error& e) {
    if (e.kind() != bir::ErrorKind::kParse) Die("Parse threw a non-parse error", e.what());
    if (std::string(e.what()).empty()) Die("a parse error without a message", "");
    return 0;
  }
  const bir::IRModule again = RoundTrip(m, "parsed module");
  if (!bir::VerifyErrors(m).empty()) return 0;
  if (!bir::StructuralEqual(m, again)) Die("reparsed module differs", bir::Print(m));

  bir::SplitResult split;
  for (bool cpu : {false, true}) {
    try {
      split = bir::SplitHostDevice(m, cpu);
    } catch (const bir::Error& e) {
      if (e.kind() != bir::ErrorKind::kVerify)
        Die("SplitHostDevice threw a non-verify error", e.what());
      continue;
    }
    for (const bir::IRModule* half : {&split.host, &split.device}) {
      const std::vector<std::string> errors = bir::VerifyErrors(*half);
      if (!errors.empty())
        Die("a half of SplitHostDevice does not verify", errors[0] + "\n" + bir::Print(*half));
      if (!bir::StructuralEqual(*half, RoundTrip(*half, "split module")))
        Die("a reparsed split module differs", bir::Print(*half));
    }
  }
  try {
    const bir::Interpreter interp(m);  // compiles every function; Run is not fuzzed (loops)
    (void)interp;
  } catch (const bir::Error& e) {
    Die("the interpreter refused a verified module", e.what());
  }
  return 0;
}
