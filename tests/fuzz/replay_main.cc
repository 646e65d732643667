// SPDX-License-Identifier: Apache-2.0
// A main() for a libFuzzer target built without libFuzzer. It runs each file named on the
// command line (or each file in a named folder) through LLVMFuzzerTestOneInput once, so any
// compiler, sanitizers included, replays the seed corpus and crash reproducers; and, with
// --generate=N, it runs N inputs made from those files by a fixed-seed mutator.
//
// The mutator is what ctest's fuzz.<name> tests run instead of a libFuzzer campaign: libFuzzer
// keeps an input when it finds new coverage, and coverage depends on where the libraries were
// mapped (ASLR), so the same -seed and -runs executed different inputs run after run (issue
// 38). Here every choice comes from one 64-bit generator (splitmix64) fed the seed, the files
// in sorted order and the dictionary: the same tree and seed always make the same inputs,
// whatever the platform, the addresses or the outcome of earlier inputs. --list writes the
// inputs run (a hash of each), which tests/fuzz/determinism_test.cmake compares across runs.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

[[noreturn]] void Usage(const std::string& why) {
  std::fprintf(stderr,
               "replay: %s\n"
               "usage: <name>_replay [--generate=N] [--seed=S] [--dict=FILE] [--max-len=L]\n"
               "                     [--write=DIR] [--list=FILE] FILE_OR_FOLDER...\n"
               "  Without --generate: runs every file named (a folder: its files, by name).\n"
               "  --generate=N  runs N inputs mutated from those files instead (the files\n"
               "                themselves are not run: fuzz.<name>.corpus runs them)\n"
               "  --seed=S      the mutator's seed (default 1)\n"
               "  --dict=FILE   a libFuzzer dictionary whose tokens the mutator inserts\n"
               "  --max-len=L   generated inputs have at most L bytes, and only files of at\n"
               "                most L bytes are mutated (default 4096)\n"
               "  --write=DIR   writes each generated input to DIR before running it, so a\n"
               "                crash leaves its reproducer\n"
               "  --list=FILE   writes a line per input run: number, FNV-1a 64, size, origin\n",
               why.c_str());
  std::exit(2);
}

Bytes ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Usage("cannot read " + path.string());
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

uint64_t Fnv1a(const uint8_t* data, size_t n, uint64_t h = 14695981039346656037ull) {
  for (size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

std::string Hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

// splitmix64: small, fully specified, the same on every platform (std::uniform_*_distribution
// is not: each standard library may draw differently).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // A number in [0, n); n > 0.
  size_t Below(size_t n) { return static_cast<size_t>(Next() % n); }

 private:
  uint64_t state_;
};

// The tokens of a libFuzzer dictionary: each line `name="value"` or `"value"`, with \\, \"
// and \xAB escapes; # starts a comment.
std::vector<Bytes> ReadDictionary(const fs::path& path) {
  std::ifstream in(path);
  if (!in) Usage("cannot read the dictionary " + path.string());
  std::vector<Bytes> tokens;
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const size_t open = line.find('"');
    const size_t close = line.rfind('"');
    if (open == std::string::npos || close == open) {
      Usage(path.string() + ":" + std::to_string(number) + ": not a dictionary entry");
    }
    Bytes token;
    for (size_t i = open + 1; i < close; ++i) {
      if (line[i] != '\\' || i + 1 >= close) {
        token.push_back(static_cast<uint8_t>(line[i]));
      } else if (line[i + 1] == 'x' && i + 3 < close) {
        token.push_back(static_cast<uint8_t>(std::stoul(line.substr(i + 2, 2), nullptr, 16)));
        i += 3;
      } else {
        token.push_back(static_cast<uint8_t>(line[i + 1]));
        ++i;
      }
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

// Values that tend to sit on a boundary somewhere.
const char* const kNumbers[] = {"0",
                                "-1",
                                "1",
                                "-0",
                                "255",
                                "256",
                                "65536",
                                "1e308",
                                "-1e308",
                                "2147483647",
                                "2147483648",
                                "-2147483649",
                                "4294967296",
                                "9223372036854775807",
                                "9223372036854775808",
                                "18446744073709551616",
                                "nan",
                                "inf",
                                "0x7f",
                                "1.5",
                                "1e-320"};
const uint8_t kBytes[] = {0,   1,   0x7f, 0x80, 0xff, '\n', '\\', '"', '{', '}', '(', ')',
                          '[', ']', ',',  ':',  ';',  '=',  '-',  ' ', '0', '9', 'a', 'z'};

class Mutator {
 public:
  Mutator(uint64_t seed, std::vector<Bytes> bases, std::vector<Bytes> dict, size_t max_len)
      : rng_(seed), bases_(std::move(bases)), dict_(std::move(dict)), max_len_(max_len) {}

  // The next input: a base (or nothing, when there are none) with 1 to 4 mutations.
  Bytes Next() {
    Bytes out = bases_.empty() ? Bytes() : bases_[rng_.Below(bases_.size())];
    const size_t steps = 1 + rng_.Below(4);
    for (size_t i = 0; i < steps; ++i) Mutate(out);
    if (out.size() > max_len_) out.resize(max_len_);
    return out;
  }

 private:
  size_t Pos(const Bytes& b) { return rng_.Below(b.size() + 1); }  // an insertion point

  void Insert(Bytes& b, const Bytes& what) {
    b.insert(b.begin() + Pos(b), what.begin(), what.end());
  }

  void Overwrite(Bytes& b, const Bytes& what) {
    if (b.size() < what.size()) return Insert(b, what);
    const size_t at = rng_.Below(b.size() - what.size() + 1);
    std::copy(what.begin(), what.end(), b.begin() + at);
  }

  void Mutate(Bytes& b) {
    switch (rng_.Below(10)) {
      case 0:  // flip a bit
        if (!b.empty()) b[rng_.Below(b.size())] ^= static_cast<uint8_t>(1u << rng_.Below(8));
        return;
      case 1:  // set a byte to a boundary value or any value
        if (!b.empty()) {
          b[rng_.Below(b.size())] = rng_.Below(2) == 0 ? kBytes[rng_.Below(sizeof(kBytes))]
                                                       : static_cast<uint8_t>(rng_.Next());
        }
        return;
      case 2: {  // erase up to 16 bytes
        if (b.empty()) return;
        const size_t at = rng_.Below(b.size());
        const size_t n = 1 + rng_.Below(std::min<size_t>(16, b.size() - at));
        b.erase(b.begin() + at, b.begin() + at + n);
        return;
      }
      case 3: {  // insert 1 to 8 random bytes
        Bytes r(1 + rng_.Below(8));
        for (auto& c : r) c = static_cast<uint8_t>(rng_.Next());
        return Insert(b, r);
      }
      case 4: {  // copy a piece of the input elsewhere in it
        if (b.empty()) return;
        const size_t at = rng_.Below(b.size());
        const size_t n = 1 + rng_.Below(std::min<size_t>(64, b.size() - at));
        return Insert(b, Bytes(b.begin() + at, b.begin() + at + n));
      }
      case 5:  // insert a dictionary token
        if (!dict_.empty()) Insert(b, dict_[rng_.Below(dict_.size())]);
        return;
      case 6:  // overwrite with a dictionary token
        if (!dict_.empty()) Overwrite(b, dict_[rng_.Below(dict_.size())]);
        return;
      case 7: {  // splice: this input's head, another base's tail
        if (bases_.empty()) return;
        const Bytes& other = bases_[rng_.Below(bases_.size())];
        const size_t cut = Pos(b);
        const size_t from = rng_.Below(other.size() + 1);
        b.resize(cut);
        b.insert(b.end(), other.begin() + from, other.end());
        return;
      }
      case 8: {  // a number at a boundary, over a digit if there is one
        const char* n = kNumbers[rng_.Below(sizeof(kNumbers) / sizeof(kNumbers[0]))];
        const Bytes num(n, n + std::strlen(n));
        size_t at = b.size();
        for (size_t i = 0, start = b.empty() ? 0 : rng_.Below(b.size()); i < b.size(); ++i) {
          const size_t j = (start + i) % b.size();
          if (b[j] >= '0' && b[j] <= '9') {
            at = j;
            break;
          }
        }
        if (at == b.size()) return Insert(b, num);
        size_t end = at;
        while (end < b.size() && b[end] >= '0' && b[end] <= '9') ++end;
        b.erase(b.begin() + at, b.begin() + end);
        b.insert(b.begin() + at, num.begin(), num.end());
        return;
      }
      default:  // truncate
        b.resize(rng_.Below(b.size() + 1));
        return;
    }
  }

  Rng rng_;
  std::vector<Bytes> bases_;
  std::vector<Bytes> dict_;
  size_t max_len_;
};

struct Options {
  long generate = -1;
  uint64_t seed = 1;
  std::string dict;
  size_t max_len = 4096;
  std::string write;
  std::string list;
  std::vector<std::string> inputs;
};

bool Flag(const std::string& arg, const char* name, std::string* value) {
  const std::string prefix = std::string(name) + "=";
  if (arg.rfind(prefix, 0) != 0) return false;
  *value = arg.substr(prefix.size());
  return true;
}

uint64_t Number(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-') {
    Usage(flag + " takes a number, not '" + text + "'");
  }
  return v;
}

Options Parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    std::string v;
    if (Flag(a, "--generate", &v)) {
      o.generate = static_cast<long>(Number("--generate", v));
    } else if (Flag(a, "--seed", &v)) {
      o.seed = Number("--seed", v);
    } else if (Flag(a, "--dict", &v)) {
      o.dict = v;
    } else if (Flag(a, "--max-len", &v)) {
      o.max_len = static_cast<size_t>(Number("--max-len", v));
    } else if (Flag(a, "--write", &v)) {
      o.write = v;
    } else if (Flag(a, "--list", &v)) {
      o.list = v;
    } else if (a.rfind("--", 0) == 0) {
      Usage("unknown option " + a);
    } else {
      o.inputs.push_back(a);
    }
  }
  if (o.inputs.empty()) Usage("no input file or folder");
  return o;
}

// The files named, a folder's in order of name (directory_iterator's order is unspecified).
std::vector<fs::path> Files(const std::vector<std::string>& inputs) {
  std::vector<fs::path> files;
  for (const auto& in : inputs) {
    const fs::path p = in;
    if (!fs::is_directory(p)) {
      files.push_back(p);
      continue;
    }
    std::vector<fs::path> here;
    for (const auto& e : fs::directory_iterator(p)) {
      if (e.is_regular_file()) here.push_back(e.path());
    }
    std::sort(here.begin(), here.end());
    files.insert(files.end(), here.begin(), here.end());
  }
  return files;
}

class Runner {
 public:
  explicit Runner(const std::string& list_path) {
    if (!list_path.empty()) {
      list_ = std::fopen(list_path.c_str(), "w");
      if (list_ == nullptr) Usage("cannot write " + list_path);
    }
  }
  ~Runner() {
    if (list_ != nullptr) std::fclose(list_);
  }

  void Run(const Bytes& input, const std::string& origin) {
    const uint64_t h = Fnv1a(input.data(), input.size());
    const std::string line =
        std::to_string(count_) + " " + Hex(h) + " " + std::to_string(input.size()) + " " + origin;
    digest_ = Fnv1a(reinterpret_cast<const uint8_t*>(line.data()), line.size(), digest_);
    if (list_ != nullptr) {
      std::fprintf(list_, "%s\n", line.c_str());
      std::fflush(list_);  // a crash in the input leaves the line that names it
    }
    ++count_;
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }

  long count() const { return count_; }
  uint64_t digest() const { return digest_; }

 private:
  std::FILE* list_ = nullptr;
  long count_ = 0;
  uint64_t digest_ = 14695981039346656037ull;
};

}  // namespace

int main(int argc, char** argv) {
  const Options o = Parse(argc, argv);
  LLVMFuzzerInitialize(&argc, &argv);
  const std::vector<fs::path> files = Files(o.inputs);
  Runner runner(o.list);
  if (o.generate < 0) {
    for (const auto& f : files) runner.Run(ReadFile(f), f.filename().string());
    std::printf("replayed %ld inputs, digest %s\n", runner.count(), Hex(runner.digest()).c_str());
    return runner.count() > 0 ? 0 : 1;
  }
  std::vector<Bytes> bases;
  for (const auto& f : files) {
    Bytes b = ReadFile(f);
    if (b.size() <= o.max_len) bases.push_back(std::move(b));
  }
  Mutator mutator(o.seed, bases, o.dict.empty() ? std::vector<Bytes>() : ReadDictionary(o.dict),
                  o.max_len);
  if (!o.write.empty()) fs::create_directories(o.write);
  for (long i = 0; i < o.generate; ++i) {
    const Bytes input = mutator.Next();
    char name[32];
    std::snprintf(name, sizeof(name), "gen-%06ld", i);
    if (!o.write.empty()) {
      const fs::path out = fs::path(o.write) / name;
      std::ofstream f(out, std::ios::binary | std::ios::trunc);
      f.write(reinterpret_cast<const char*>(input.data()),
              static_cast<std::streamsize>(input.size()));
      if (!f.flush()) Usage("cannot write " + out.string());
    }
    runner.Run(input, name);
  }
  std::printf("ran %ld generated inputs (seed %llu, from %zu of %zu files), digest %s\n",
              runner.count(), static_cast<unsigned long long>(o.seed), bases.size(), files.size(),
              Hex(runner.digest()).c_str());
  return 0;
}
