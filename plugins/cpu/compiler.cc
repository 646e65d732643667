// SPDX-License-Identifier: Apache-2.0
#include "compiler.h"

#include <limits.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <backplane/sdk/child_process.hpp>
#include <backplane/sdk/disk_cache.hpp>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "compiler_flags.h"
#include "target.h"

namespace backplane {
namespace cpu {

namespace {

// Bumped when the generated code's conventions change, so old cache entries are not reused.
constexpr const char* kCacheFormat = "c-cache-1";

std::string Arch(const std::string& triple) { return triple.substr(0, triple.find('-')); }

// What running a program gave.
struct RunResult {
  bool started = false;
  int error = 0;  // errno when it could not start
  int status = 0;
  std::string output;  // stdout and stderr together
};

// Whether this process runs with rights its caller lacks (set-user-ID or set-group-ID, file
// capabilities): then the caller's environment chooses nothing (secure_getenv's rule).
bool SecureProcess() { return getauxval(AT_SECURE) != 0; }

// The environment a compiler runs with in a secure process: nothing of the caller's, whose
// PATH, COMPILER_PATH, GCC_EXEC_PREFIX or TMPDIR would choose the assembler, the linker or
// where they write.
char* const kSecureEnvironment[] = {const_cast<char*>("PATH=/usr/bin:/bin"),
                                    const_cast<char*>("LC_ALL=C"), nullptr};

// Runs argv[0] (a path, or a name looked up on PATH) without a shell, so no attribute value
// is ever interpreted by one, and collects what it prints. In a secure process argv[0] is an
// absolute path (CompilerProgram) and the environment is kSecureEnvironment.
RunResult Run(const std::vector<std::string>& argv) {
  sdk::ChildOptions o;
  o.argv = argv;
  o.search_path = true;
  if (SecureProcess()) {
    o.env.emplace();
    for (char* const* e = kSecureEnvironment; *e != nullptr; ++e) o.env->push_back(*e);
  }
  o.own_group = false;    // the caller's group: a Ctrl-C at the terminal stops it too
  o.output_head = 65536;  // the first 64 KiB: enough for any message a person reads
  o.output_tail = 0;
  o.result_keep = 0;
  sdk::ChildProcess child(o);
  RunResult result;
  if (!child.started()) {
    result.error = child.start_errno();
    return result;
  }
  result.started = true;
  child.Wait();
  result.status = child.status();
  result.output = child.output_head();
  return result;
}

std::string Quote(const std::vector<std::string>& argv) {
  std::string text;
  for (const std::string& a : argv) {
    text += (text.empty() ? "" : " ") +
            (a.find_first_of(" \t'\"") == std::string::npos ? a : "'" + a + "'");
  }
  return text;
}

// Why a secure process must not run `path`, or "" when it may: it must be an absolute path to
// an executable regular file that, like every folder above it, only root or this process's
// effective user can change, so that no one else chose what runs with this process's rights.
// `*real` is the path with its links resolved.
std::string Untrusted(const std::string& path, std::string* real) {
  if (path.empty() || path[0] != '/') return "not an absolute path";
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) return std::strerror(errno);
  *real = resolved;
  struct stat st;
  if (stat(real->c_str(), &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & 0111) == 0) {
    return *real + " is not an executable file";
  }
  for (std::string at = *real;;) {
    if (stat(at.c_str(), &st) != 0) return at + ": " + std::strerror(errno);
    if ((st.st_uid != 0 && st.st_uid != geteuid()) || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      char mode[8];
      std::snprintf(mode, sizeof(mode), "%04o", static_cast<unsigned>(st.st_mode & 07777));
      return at + " can be changed by another user (owner " + std::to_string(st.st_uid) +
             ", mode " + mode + ")";
    }
    if (at == "/") return "";
    const size_t slash = at.find_last_of('/');
    at = slash == 0 ? "/" : at.substr(0, slash);
  }
}

// The compiler a secure process runs for the Target's `cc`: never one found through the
// caller's PATH or BACKPLANE_CC, only one at a fixed place that passes Untrusted: for "cc" the
// compiler found when Backplane was configured, else /usr/bin/cc; for a plain name
// /usr/bin/<name> or /bin/<name>.
std::string SecureCompiler(const std::string& cc) {
  const std::vector<std::string> places =
      cc == "cc" ? std::vector<std::string>{BACKPLANE_CONFIGURED_CC, "/usr/bin/cc"}
                 : std::vector<std::string>{"/usr/bin/" + cc, "/bin/" + cc};
  std::string reasons;
  for (const std::string& place : places) {
    std::string real;
    const std::string why = Untrusted(place, &real);
    if (why.empty()) return real;
    reasons += (reasons.empty() ? "" : "; ") + place + ": " + why;
  }
  throw Error(BP_ERR_NOT_FOUND,
              "target.build.c: this process runs set-user-ID or set-group-ID (AT_SECURE), so the "
              "C compiler for cc '" +
                  cc +
                  "' is neither looked up on the caller's PATH nor taken from BACKPLANE_CC, "
                  "only from a fixed place that only root can change, and none holds one (" +
                  reasons + "); install " + (cc == "cc" ? "a C compiler" : cc) +
                  " in /usr/bin, or build outside the privileged process");
}

// What to do when the compiler for the Target's `cc` cannot run.
std::string CompilerAdvice(const std::string& target_cc) {
  return target_cc == "cc"
             ? "install one (apt-get install gcc) or set BACKPLANE_CC to the compiler the host "
               "should run"
             : "install it, or build for a Target whose cc is one this machine has (cc, the "
               "host's compiler, is the default)";
}

// The first line of `cc --version`, once per compiler per process.
std::string CompilerVersion(const std::string& cc, const std::string& target_cc) {
  static std::mutex mu;
  static std::map<std::string, std::string> versions;
  std::lock_guard<std::mutex> lock(mu);
  auto it = versions.find(cc);
  if (it != versions.end()) return it->second;
  RunResult r = Run({cc, "--version"});
  if (!r.started) {
    throw Error(BP_ERR_NOT_FOUND,
                "target.build.c: cannot run the C compiler '" + cc + "'" +
                    (cc == target_cc ? "" : " (the target's cc '" + target_cc + "')") + ": " +
                    std::strerror(r.error) + "; " + CompilerAdvice(target_cc));
  }
  std::string version = r.output.substr(0, r.output.find('\n'));
  versions[cc] = version;
  return version;
}

bool FileExists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    throw Error(BP_ERR_INTERNAL, "target.build.c: cannot write " + path + ": " +
                                     std::strerror(errno) + "; check the cache folder");
  }
}

// A file name unique to this process and call, in the cache folder.
std::string ScratchName(const std::string& dir, const std::string& key, const char* suffix) {
  static std::atomic<uint64_t> counter{0};
  return dir + "/" + key + ".tmp" + std::to_string(getpid()) + "_" +
         std::to_string(counter.fetch_add(1)) + suffix;
}

// The compiler's messages with the generated lines they point at ("x.c:12:5: error: ..."):
// each line number found is followed by that line of the generated source.
std::string ExplainCompileErrors(const std::string& output, const std::string& source,
                                 const std::string& source_path) {
  std::vector<std::string> lines;
  std::stringstream in(source);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::string explained;
  std::stringstream out(output);
  int shown = 0;
  for (std::string l; std::getline(out, l) && shown < 40; ++shown) {
    explained += "  " + l + "\n";
    size_t at = l.find(source_path + ":");
    if (at == std::string::npos || l.find("error") == std::string::npos) continue;
    long line = std::strtol(l.c_str() + at + source_path.size() + 1, nullptr, 10);
    if (line >= 1 && static_cast<size_t>(line) <= lines.size()) {
      explained += "  generated line " + std::to_string(line) + ": " +
                   lines[static_cast<size_t>(line - 1)] + "\n";
    }
  }
  return explained;
}

}  // namespace

std::string CompilerProgram(const std::string& cc) {
  if (SecureProcess()) return SecureCompiler(cc);
  if (cc == "cc") {
    const char* host_cc = secure_getenv("BACKPLANE_CC");
    if (host_cc != nullptr && host_cc[0] != '\0') return host_cc;
  }
  return cc;
}

CompileOptions OptionsFromTarget(const Target& target) {
  CompileOptions o;
  o.cc = target.GetAttr<std::string>("cc").value_or("cc");
  o.triple = target.GetAttr<std::string>("mtriple").value_or(HostTriple());
  // The canonicalizer checked these; the command line is built here, so here they are
  // checked again rather than trusted (compiler_flags.h).
  CheckCompilerName(o.cc);
  CheckTriple(o.triple);
  if (o.cc == "cc" && Arch(o.triple) != Arch(HostTriple())) o.cc = o.triple + "-gcc";
  o.num_threads = static_cast<int>(target.GetAttr<int64_t>("num-cores").value_or(0));
  o.flags.push_back("-O" + std::to_string(target.GetAttr<int64_t>("opt-level").value_or(3)));
  if (auto march = target.GetAttr<std::string>("march")) o.flags.push_back("-march=" + *march);
  if (auto mcpu = target.GetAttr<std::string>("mcpu")) {
    // x86 compilers tune with -mtune; Arm, RISC-V and POWER ones take -mcpu.
    const std::string arch = Arch(o.triple);
    const bool x86 = arch == "x86_64" || arch == "i686" || arch == "i386";
    o.flags.push_back((x86 ? "-mtune=" : "-mcpu=") + *mcpu);
  }
  if (auto mattr = target.GetAttr<std::vector<std::string>>("mattr")) {
    for (const std::string& a : *mattr) {
      if (a.size() > 1 && a[0] == '+') o.flags.push_back("-m" + a.substr(1));
      if (a.size() > 1 && a[0] == '-') o.flags.push_back("-mno-" + a.substr(1));
    }
  }
  auto on = [&](const char* name) { return target.GetAttr<bool>(name).value_or(false); };
  if (on("fast-math")) {
    o.flags.push_back("-ffast-math");
  } else {
    if (on("fast-math-nnan") && on("fast-math-ninf")) o.flags.push_back("-ffinite-math-only");
    if (on("fast-math-nsz") || on("fast-math-reassoc")) o.flags.push_back("-fno-signed-zeros");
    if (on("fast-math-arcp")) o.flags.push_back("-freciprocal-math");
    if (on("fast-math-reassoc")) {
      o.flags.push_back("-fno-trapping-math");
      o.flags.push_back("-fassociative-math");
    }
  }
  // Without contract, a*b+c stays two roundings, as the IR's interpreter computes it.
  o.flags.push_back(on("fast-math") || on("fast-math-contract") ? "-ffp-contract=fast"
                                                                : "-ffp-contract=off");
  if (auto cflags = target.GetAttr<std::vector<std::string>>("cflags")) {
    CheckCFlags(*cflags);
    for (const std::string& f : *cflags) o.flags.push_back(f);
  }
  return o;
}

std::string CacheDir() {
  static const std::string dir = sdk::CacheFolder("c");
  if (dir.empty()) {
    throw Error(BP_ERR_INTERNAL,
                "target.build.c: no cache folder: neither $XDG_CACHE_HOME/backplane/c nor "
                "~/.cache/backplane/c is a private folder this user owns, and mkdtemp in /tmp "
                "failed; set XDG_CACHE_HOME to a folder you own");
  }
  return dir;
}

namespace {

// Whether the compiler crashed rather than refused its input: killed by a signal, gcc's driver
// reporting an internal compiler error (exit status 4, "signal terminated program cc1"), or
// clang's crash report.
bool CompilerCrashed(const RunResult& r) {
  if (WIFSIGNALED(r.status)) return true;
  if (WIFEXITED(r.status) && WEXITSTATUS(r.status) == 4) return true;
  return r.output.find("internal compiler error") != std::string::npos ||
         r.output.find("PLEASE submit a bug report") != std::string::npos;
}

}  // namespace

std::string CompileSharedLibrary(const std::string& source, const CompileOptions& options) {
  const std::string program = CompilerProgram(options.cc);
  const std::string version = CompilerVersion(program, options.cc);
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), options.flags.begin(), options.flags.end());
  // Fixed flags: a position-independent shared library exporting only the entry points,
  // OpenMP for parallel loops, and wrapping signed integers as the IR defines them. The IR has
  // no errno and no floating-point exception flags or traps, so the compiler need not keep
  // them: -fno-trapping-math changes no value, and lets gcc turn a float comparison into a
  // vector select (without it, a loop calling bp_expf, whose clamps are comparisons, does not
  // vectorize).
  for (const char* f : {"-std=gnu99", "-shared", "-fPIC", "-fvisibility=hidden", "-fopenmp",
                        "-fwrapv", "-fno-math-errno", "-fno-trapping-math"}) {
    argv.push_back(f);
  }
  std::string key_material =
      std::string(kCacheFormat) + "\n" + version + "\n" + Quote(argv) + "\n" + source;
  const std::string key = sdk::CacheKey(key_material);
  const std::string dir = CacheDir();
  const std::string lib = dir + "/" + key + ".so";
  if (FileExists(lib)) return lib;

  const std::string src = ScratchName(dir, key, ".c");
  const std::string tmp_lib = ScratchName(dir, key, ".so");
  WriteFile(src, source);
  argv.push_back("-o");
  argv.push_back(tmp_lib);
  argv.push_back(src);
  argv.push_back("-lm");
  RunResult r = Run(argv);
  if (!r.started) {
    unlink(src.c_str());
    throw Error(BP_ERR_NOT_FOUND, "target.build.c: cannot run the C compiler '" + program + "': " +
                                      std::strerror(r.error) + "; " + CompilerAdvice(options.cc));
  }
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0) {
    // Keep the source for people to look at; it is named in the message.
    const std::string kept = dir + "/" + key + ".failed.c";
    rename(src.c_str(), kept.c_str());
    unlink(tmp_lib.c_str());
    if (CompilerCrashed(r)) {
      // Not the caller's mistake: the compiler gave out on valid C (gcc 12's cc1
      // overflows its 8 MiB stack on a sum of 99,000 loads, which the IR accepts), so it is
      // BP_ERR_INTERNAL, and `backplane build` exits 1 ("the compiler failed"), not 2.
      throw Error(BP_ERR_INTERNAL,
                  "target.build.c: the C compiler crashed" +
                      (WIFSIGNALED(r.status) ? std::string(", killed by signal ") +
                                                   std::to_string(WTERMSIG(r.status)) + " (" +
                                                   strsignal(WTERMSIG(r.status)) + ")"
                                             : std::string()) +
                      " (" + Quote(argv) + "):\n" + ExplainCompileErrors(r.output, source, src) +
                      "The generated source is kept in " + kept +
                      ". A C compiler gives out on a very long expression (gcc 12 with its "
                      "default 8 MiB stack crashes on a sum of 99,000 loads, and takes minutes "
                      "on 50,000; docs/ir.md, \"Limits\"): if the kernel has one, split it in "
                      "the IR (accumulate it in a `var` over several statements or a loop). "
                      "Otherwise report it with that file.");
    }
    throw Error(BP_ERR_INVALID_ARGUMENT,
                "target.build.c: the C compiler failed (" + Quote(argv) + "):\n" +
                    ExplainCompileErrors(r.output, source, src) +
                    "The generated source is kept in " + kept +
                    ". Check the target's cflags and the host's compiler (BACKPLANE_CC); if "
                    "they are right, this is a bug in the c code generator: please report it "
                    "with that file.");
  }
  // Publish atomically: a concurrent build of the same kernel renames over the same name.
  const std::string kept_src = dir + "/" + key + ".c";
  rename(src.c_str(), kept_src.c_str());
  if (rename(tmp_lib.c_str(), lib.c_str()) != 0) {
    unlink(tmp_lib.c_str());
    throw Error(BP_ERR_INTERNAL, "target.build.c: cannot move the compiled library into " + lib +
                                     ": " + std::strerror(errno));
  }
  return lib;
}

std::string CacheLibraryBytes(const std::string& library) {
  const std::string dir = CacheDir();
  const std::string key = sdk::CacheKey(library);
  const std::string lib = dir + "/" + key + ".so";
  if (FileExists(lib) && ReadFileBytes(lib) == library) return lib;
  if (!sdk::WriteFileAtomic(lib, library)) {
    throw Error(BP_ERR_INTERNAL, "runtime.module.load_from_bytes.c: cannot write " + lib + ": " +
                                     std::strerror(errno));
  }
  return lib;
}

std::string ReadFileBytes(const std::string& path) {
  std::string bytes;
  if (!sdk::ReadWholeFile(path, &bytes)) {
    throw Error(BP_ERR_NOT_FOUND,
                "cannot read " + path + ": " + std::strerror(errno) + "; check the cache folder");
  }
  return bytes;
}

}  // namespace cpu
}  // namespace backplane
