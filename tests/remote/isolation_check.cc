// SPDX-License-Identifier: Apache-2.0
// remote_isolation_check: memory a session of `backplane serve` receives holds zeros or its own
// data, never another session's (docs/remote.md, "Isolation between sessions").
//
//   BACKPLANE_REMOTE=host:port remote_isolation_check
//
// On every device of the server (remote:0, remote:1, ...), for data space and workspace of
// 1 byte to 64 MiB: two other client processes (this program again) fill buffers of those sizes
// with a marker; the first frees them and exits, the second is killed with SIGKILL while it holds
// them (its session ends with its connection). Once the server holds nothing, this process
// allocates the same sizes and reads them without writing: every byte must be zero. A second
// round writes one byte in the middle of each new buffer first: the bytes before and after it
// must still be zero (the server zeros the gap a write leaves). Prints a line per case and
// "N passed, N failed"; exits 1 when a case failed, 2 when it cannot run. ctest runs it against
// a server of every device here (remote.isolation); gpu_checks.sh against one serving cuda.
#include <sys/wait.h>
#include <unistd.h>

#include <backplane/backplane.hpp>
#include <backplane/sdk/child_process.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace {

using backplane::Device;
using backplane::DeviceAPI;
using backplane::Function;

constexpr uint64_t kSizes[] = {
    1, 100, 4096, 65536, (uint64_t{1} << 20) + 3, uint64_t{3} << 20, uint64_t{64} << 20};

struct Buffer {
  Device dev;
  void* data = nullptr;
  uint64_t nbytes = 0;
  bool workspace = false;
};

DLTensor View(void* data, DLDevice dev, int64_t* shape, uint64_t offset = 0) {
  DLTensor t{};
  t.data = data;
  t.device = dev;
  t.ndim = 1;
  t.dtype = DLDataType{kDLUInt, 8, 1};
  t.shape = shape;
  t.byte_offset = offset;
  return t;
}

void Write(const Buffer& b, uint64_t offset, const std::vector<uint8_t>& bytes) {
  int64_t shape[1] = {static_cast<int64_t>(bytes.size())};
  DLTensor from = View(const_cast<uint8_t*>(bytes.data()), DLDevice{kDLCPU, 0}, shape);
  DLTensor to = View(b.data, b.dev.dl, shape, offset);
  backplane::CopyDataFromTo(&from, &to);
  DeviceAPI::Get(b.dev).StreamSync();
}

std::vector<uint8_t> Read(const Buffer& b) {
  std::vector<uint8_t> out(b.nbytes, 0xEE);
  int64_t shape[1] = {static_cast<int64_t>(b.nbytes)};
  DLTensor from = View(b.data, b.dev.dl, shape);
  DLTensor to = View(out.data(), DLDevice{kDLCPU, 0}, shape);
  backplane::CopyDataFromTo(&from, &to);
  DeviceAPI::Get(b.dev).StreamSync();
  return out;
}

Buffer Alloc(Device dev, uint64_t nbytes, bool workspace) {
  const DeviceAPI api = DeviceAPI::Get(dev);
  Buffer b{dev, nullptr, nbytes, workspace};
  b.data =
      workspace ? api.AllocWorkspace(nbytes) : api.AllocDataSpace(nbytes, 64, backplane::UInt8());
  return b;
}

void Free(const Buffer& b) {
  const DeviceAPI api = DeviceAPI::Get(b.dev);
  if (b.workspace) {
    api.FreeWorkspace(b.data);
  } else {
    api.FreeDataSpace(b.data);
  }
}

std::vector<Device> RemoteDevices() {
  std::vector<Device> out;
  for (int32_t id = 0; id < 64; ++id) {
    const Device dev("remote", id);
    if (!DeviceAPI::Get(dev).Exists()) break;
    out.push_back(dev);
  }
  return out;
}

std::string Name(const Device& dev) {
  return "remote:" + std::to_string(dev.dl.device_id) + " (" +
         DeviceAPI::Get(dev).GetProperty("remote_device").AsString() + ")";
}

// Every size on every device, data space and workspace, filled with a marker (never zero).
std::vector<Buffer> FillAll(uint8_t marker) {
  std::vector<Buffer> held;
  for (const Device& dev : RemoteDevices()) {
    for (bool workspace : {false, true}) {
      for (uint64_t n : kSizes) {
        held.push_back(Alloc(dev, n, workspace));
        Write(held.back(), 0, std::vector<uint8_t>(n, marker));
      }
    }
  }
  return held;
}

// The buffers the server's sessions hold, from remote.status.
int64_t ServerBuffers(const std::string& address) {
  const std::string json = Function::Get("remote.status")(address).AsString();
  return nlohmann::json::parse(json).at("buffers").get<int64_t>();
}

// Runs a writer child (this program again, its stdout and stderr on a pipe): "--fill" frees
// and exits; "--fill-and-hold" is killed while it holds.
bool RunWriter(const std::string& mode, std::string* why) {
  backplane::sdk::ChildOptions o;
  o.argv = {backplane::sdk::SelfPath(), mode};
  o.null_stdin = false;
  o.own_group = false;
  backplane::sdk::ChildProcess child(o);
  if (!child.started()) {
    *why = "cannot start " + mode + ": " + child.start_error();
    return false;
  }
  // At most ctest's limit on the whole check (remote.isolation, 600 s).
  const bool filled = child.WaitForOutput("filled\n", 600);
  if (mode == "--fill-and-hold" && filled) child.Kill();
  child.Wait();
  const int status = child.status();
  const bool ok =
      filled && (mode == "--fill-and-hold" ? WIFSIGNALED(status)
                                           : WIFEXITED(status) && WEXITSTATUS(status) == 0);
  if (!ok) {
    *why = mode + " did not fill its buffers" + (filled ? "" : std::string(" within 600 s")) +
           ": " + child.output();
  }
  return ok;
}

int Child(const std::string& mode) {
  try {
    std::vector<Buffer> held = FillAll(mode == "--fill" ? 0xA5 : 0x5A);
    if (mode == "--fill") {
      for (const Buffer& b : held) Free(b);
    }
    std::cout << "filled" << std::endl;
    if (mode == "--fill-and-hold") pause();  // killed here
    return 0;
  } catch (const std::exception& e) {
    std::cout << e.what() << std::endl;
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1) return Child(argv[1]);
  const char* address = std::getenv("BACKPLANE_REMOTE");
  if (address == nullptr || std::strchr(address, ',') != nullptr) {
    std::cerr << "remote_isolation_check: set BACKPLANE_REMOTE to one server's host:port\n";
    return 2;
  }
  int passed = 0, failed = 0;
  try {
    const std::vector<Device> devices = RemoteDevices();
    if (devices.empty()) {
      std::cerr << "remote_isolation_check: the server at " << address << " lists no device\n";
      return 2;
    }
    for (int round = 0; round < 2; ++round) {
      std::string why;
      if (!RunWriter("--fill", &why) || !RunWriter("--fill-and-hold", &why)) {
        std::cerr << "remote_isolation_check: " << why << "\n";
        return 2;
      }
      // The killed client's session ends when the server sees its connection close.
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (ServerBuffers(address) != 0) {
        if (std::chrono::steady_clock::now() > end) {
          std::cerr << "remote_isolation_check: the server still holds the killed client's "
                       "buffers after 60 s\n";
          return 2;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      std::vector<Buffer> mine;
      for (const Device& dev : devices) {
        for (bool workspace : {false, true}) {
          for (uint64_t n : kSizes) {
            const Buffer b = Alloc(dev, n, workspace);
            mine.push_back(b);
            // Round 1 reads what it never wrote; round 2 writes one byte in the middle first.
            const uint64_t mid = n / 2;
            if (round == 1) Write(b, mid, {0x7F});
            const std::vector<uint8_t> got = Read(b);
            uint64_t foreign = 0;
            for (uint64_t i = 0; i < n; ++i) {
              const uint8_t want = round == 1 && i == mid ? 0x7F : 0;
              foreign += got[i] != want ? 1 : 0;
            }
            const std::string what =
                Name(dev) + " " + (workspace ? "workspace" : "data space") + " of " +
                std::to_string(n) + " bytes" +
                (round == 1 ? ", one byte written at " + std::to_string(mid) : ", never written");
            if (foreign == 0) {
              ++passed;
              std::cout << "ok      " << what << "\n";
            } else {
              ++failed;
              std::cout << "FAILED  " << what << ": " << foreign
                        << " bytes are neither zero nor this session's\n";
            }
          }
        }
      }
      for (const Buffer& b : mine) Free(b);
    }
  } catch (const std::exception& e) {
    std::cerr << "remote_isolation_check: " << e.what() << "\n";
    return 2;
  }
  std::cout << passed << " passed, " << failed << " failed" << std::endl;
  return failed == 0 ? 0 : 1;
}
