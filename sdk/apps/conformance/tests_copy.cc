// SPDX-License-Identifier: Apache-2.0
// CopyDataFromTo (BP-PLUGIN-7): host to device, device to host and device to device, with
// byte offsets on both sides and odd sizes, tensors of several dtypes and shapes, and the
// rule that the host buffer may be reused as soon as the call returns.
#include <backplane/backplane.hpp>

#include "conformance.h"
#include "device_util.h"

namespace backplane {
namespace conformance {

namespace {

struct Span {
  size_t device_offset;
  size_t host_offset;
  size_t n;
};

// The odd sizes and offsets every copy test goes through.
const std::vector<Span>& Spans() {
  static const std::vector<Span> spans = {
      {0, 0, 1},    {0, 0, 3},      {3, 0, 4097},  {1, 5, 1},
      {4096, 3, 3}, {64, 64, 4096}, {7, 1, 65536}, {0, 0, (1 << 20) + 5}};
  return spans;
}

std::string SpanText(const Span& s, const char* direction) {
  return "a " + std::to_string(s.n) + "-byte " + direction + " copy at offset " +
         std::to_string(s.device_offset) + " (host offset " + std::to_string(s.host_offset) + ")";
}

// Compares a whole buffer that should hold `want`, where [begin, begin+n) is what a copy
// wrote: a difference inside names the copied byte, one outside says the copy strayed.
void ExpectRegion(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want, size_t begin,
                  size_t n, const std::string& copy, const std::string& where) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] == want[i]) continue;
    if (i >= begin && i < begin + n) {
      Fail("byte " + std::to_string(i - begin) + " of " + copy + " is " + Hex(got[i]) +
           ", expected " + Hex(want[i]) + " (" + where + " byte " + std::to_string(i) + ")");
    }
    Fail(where + " byte " + std::to_string(i) + ", outside the " + std::to_string(n) +
         " bytes of " + copy + ", is " + Hex(got[i]) + ", expected " + Hex(want[i]) +
         " (unchanged): the copy wrote where it should not");
  }
}

void HostToDevice(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  uint64_t seed = 100;
  for (size_t n :
       {size_t{1}, size_t{3}, size_t{4}, size_t{7}, size_t{64}, size_t{4097}, size_t{65539}}) {
    DataSpace d(ctx.dev, n);
    const std::vector<uint8_t> data = RandomBytes(n, ++seed);
    std::vector<uint8_t> back = DifferentBytes(data, ++seed);
    Copy(HostAt(const_cast<uint8_t*>(data.data())), At(d), n, nullptr, "host to device");
    Sync(ctx.dev, nullptr, "host to device");
    Copy(At(d), HostAt(back.data()), n, nullptr, "reading back");
    Sync(ctx.dev, nullptr, "reading back");
    ExpectBytes(back.data(), data.data(), n,
                "a " + std::to_string(n) + "-byte host-to-device copy, read back");
  }
}

void HostToDeviceOffsets(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  uint64_t seed = 200;
  for (const Span& s : Spans()) {
    const size_t size = s.device_offset + s.n + 29;
    DataSpace d(ctx.dev, size);
    const std::vector<uint8_t> before = RandomBytes(size, ++seed);
    Copy(HostAt(const_cast<uint8_t*>(before.data())), At(d), size, nullptr,
         "filling the data space");
    std::vector<uint8_t> host = RandomBytes(s.host_offset + s.n, ++seed);
    for (size_t i = 0; i < s.n; ++i) {
      if (host[s.host_offset + i] == before[s.device_offset + i]) host[s.host_offset + i] ^= 0x5a;
    }
    Copy(HostAt(const_cast<uint8_t*>(host.data()), s.host_offset), At(d, s.device_offset), s.n,
         nullptr, SpanText(s, "host-to-device"));
    Sync(ctx.dev, nullptr, SpanText(s, "host-to-device"));
    std::vector<uint8_t> want = before;
    for (size_t i = 0; i < s.n; ++i) want[s.device_offset + i] = host[s.host_offset + i];
    std::vector<uint8_t> got = DifferentBytes(want, ++seed);
    Copy(At(d), HostAt(got.data()), size, nullptr, "reading the whole data space back");
    Sync(ctx.dev, nullptr, "reading the whole data space back");
    ExpectRegion(got, want, s.device_offset, s.n, SpanText(s, "host-to-device"), "data space");
  }
}

void DeviceToHostOffsets(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  uint64_t seed = 300;
  for (const Span& s : Spans()) {
    const size_t size = s.device_offset + s.n + 29;
    DataSpace d(ctx.dev, size);
    const std::vector<uint8_t> dev_bytes = RandomBytes(size, ++seed);
    Copy(HostAt(const_cast<uint8_t*>(dev_bytes.data())), At(d), size, nullptr,
         "filling the data space");
    Sync(ctx.dev, nullptr, "filling the data space");
    const size_t host_size = s.host_offset + s.n + 31;
    std::vector<uint8_t> want = RandomBytes(host_size, ++seed);
    for (size_t i = 0; i < s.n; ++i) {
      if (want[s.host_offset + i] == dev_bytes[s.device_offset + i])
        want[s.host_offset + i] ^= 0x5a;
    }
    std::vector<uint8_t> got = want;  // the canary: bytes outside the copy must stay
    for (size_t i = 0; i < s.n; ++i) want[s.host_offset + i] = dev_bytes[s.device_offset + i];
    Copy(At(d, s.device_offset), HostAt(got.data(), s.host_offset), s.n, nullptr,
         SpanText(s, "device-to-host"));
    Sync(ctx.dev, nullptr, SpanText(s, "device-to-host"));
    ExpectRegion(got, want, s.host_offset, s.n, SpanText(s, "device-to-host"), "host buffer");
  }
}

void DeviceToDevice(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  std::vector<DLDevice> targets = {ctx.dev};
  if (ctx.device_count > 1) {
    targets.push_back(DLDevice{ctx.dev.device_type, (ctx.dev.device_id + 1) % ctx.device_count});
    ctx.Detail("also copies from " + DeviceString(ctx.dev) + " to " + DeviceString(targets.back()));
  }
  uint64_t seed = 400;
  for (const DLDevice to_dev : targets) {
    for (const Span& s : Spans()) {
      // host_offset serves as the source offset here.
      const size_t src_size = s.host_offset + s.n + 13;
      const size_t dst_size = s.device_offset + s.n + 29;
      DataSpace src(ctx.dev, src_size);
      DataSpace dst(to_dev, dst_size);
      const std::vector<uint8_t> a = RandomBytes(src_size, ++seed);
      std::vector<uint8_t> b = RandomBytes(dst_size, ++seed);
      for (size_t i = 0; i < s.n; ++i) {
        if (b[s.device_offset + i] == a[s.host_offset + i]) b[s.device_offset + i] ^= 0x5a;
      }
      Copy(HostAt(const_cast<uint8_t*>(a.data())), At(src), src_size, nullptr,
           "filling the source");
      Copy(HostAt(const_cast<uint8_t*>(b.data())), At(dst), dst_size, nullptr,
           "filling the destination");
      Sync(ctx.dev, nullptr, "filling the source");
      Sync(to_dev, nullptr, "filling the destination");
      const std::string what =
          "a " + std::to_string(s.n) + "-byte device-to-device copy from offset " +
          std::to_string(s.host_offset) + " of " + DeviceString(ctx.dev) + " to offset " +
          std::to_string(s.device_offset) + " of " + DeviceString(to_dev);
      Copy(At(src, s.host_offset), At(dst, s.device_offset), s.n, nullptr, what);
      Sync(to_dev, nullptr, what);
      Sync(ctx.dev, nullptr, what);
      std::vector<uint8_t> want = b;
      for (size_t i = 0; i < s.n; ++i) want[s.device_offset + i] = a[s.host_offset + i];
      std::vector<uint8_t> got = DifferentBytes(want, ++seed);
      Copy(At(dst), HostAt(got.data()), dst_size, nullptr, "reading the destination back");
      Sync(to_dev, nullptr, "reading the destination back");
      ExpectRegion(got, want, s.device_offset, s.n, what, "destination");
    }
  }
}

void DtypesShapes(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  struct Shape {
    DLDataType dtype;
    std::vector<int64_t> shape;
    const char* text;
  };
  const std::vector<Shape> shapes = {{{kDLFloat, 32, 1}, {3, 5}, "float32[3, 5]"},
                                     {{kDLInt, 16, 1}, {7}, "int16[7]"},
                                     {{kDLFloat, 64, 1}, {2, 3, 4}, "float64[2, 3, 4]"},
                                     {{kDLFloat, 32, 4}, {3}, "float32x4[3]"},
                                     {{kDLInt, 8, 1}, {1, 1, 9, 1}, "int8[1, 1, 9, 1]"},
                                     {{kDLUInt, 8, 1}, {}, "uint8 scalar (ndim 0)"}};
  uint64_t seed = 500;
  for (const Shape& sh : shapes) {
    size_t n = (sh.dtype.bits * sh.dtype.lanes + 7) / 8;
    for (int64_t e : sh.shape) n *= static_cast<size_t>(e);
    DataSpace d(ctx.dev, n + 16);
    const std::vector<uint8_t> data = RandomBytes(n, ++seed);
    std::vector<uint8_t> back = DifferentBytes(data, ++seed);
    std::vector<int64_t> shape_a = sh.shape, shape_b = sh.shape;
    DLTensor host{};
    host.data = const_cast<uint8_t*>(data.data());
    host.device = kHost;
    host.ndim = static_cast<int32_t>(sh.shape.size());
    host.dtype = sh.dtype;
    host.shape = shape_a.data();
    DLTensor dev = host;
    dev.data = d.handle();
    dev.device = ctx.dev;
    dev.shape = shape_b.data();
    dev.byte_offset = 16;
    const std::string what =
        "a " + std::string(sh.text) + " tensor (" + std::to_string(n) + " bytes) at byte_offset 16";
    CheckCall(bp_device_copy_data_from_to(&host, &dev, nullptr),
              "copying " + what + " to the device");
    Sync(ctx.dev, nullptr, what);
    host.data = back.data();
    CheckCall(bp_device_copy_data_from_to(&dev, &host, nullptr), "copying " + what + " back");
    Sync(ctx.dev, nullptr, what);
    ExpectBytes(back.data(), data.data(), n, what + ", copied to the device and back");
  }
}

void HostReuse(Context& ctx) {
  ctx.Load();
  ctx.SetUpDevice();
  StreamHandle created(ctx.dev);
  std::vector<std::pair<bp_stream_t, std::string>> streams = {{nullptr, "the null stream"}};
  if (created.get() != nullptr) streams.push_back({created.get(), "a created stream"});
  constexpr size_t kBig = size_t{4} << 20;
  constexpr size_t kN = size_t{64} << 10;
  constexpr int kCopies = 6;
  uint64_t seed = 600;
  for (const auto& [stream, name] : streams) {
    // Queue long work first, so a plugin that reads the host buffer late reads it late.
    DataSpace big(ctx.dev, kBig);
    const std::vector<uint8_t> big_data = RandomBytes(kBig, ++seed);
    Copy(HostAt(const_cast<uint8_t*>(big_data.data())), At(big), kBig, stream,
         "a long copy on " + name);
    std::vector<DataSpace> spaces;
    std::vector<std::vector<uint8_t>> sent;
    std::vector<uint8_t> host(kN);
    for (int i = 0; i < kCopies; ++i) {
      sent.push_back(RandomBytes(kN, ++seed));
      host = sent.back();
      spaces.emplace_back(ctx.dev, kN);
      Copy(HostAt(host.data()), At(spaces.back()), kN, stream,
           "copy " + std::to_string(i) + " on " + name);
      // The call has returned: the buffer is the caller's again.
      std::fill(host.begin(), host.end(), static_cast<uint8_t>(0xE0 + i));
    }
    Sync(ctx.dev, stream, name);
    for (int i = 0; i < kCopies; ++i) {
      std::vector<uint8_t> got = DifferentBytes(sent[static_cast<size_t>(i)], ++seed);
      Copy(At(spaces[static_cast<size_t>(i)]), HostAt(got.data()), kN, stream, "reading back");
      Sync(ctx.dev, stream, "reading back");
      const std::vector<uint8_t> reused(kN, static_cast<uint8_t>(0xE0 + i));
      try {
        ExpectBytes(got.data(), sent[static_cast<size_t>(i)].data(), kN,
                    "host-to-device copy " + std::to_string(i) + " on " + name, reused.data(),
                    "the value the host buffer got after the call returned");
      } catch (const TestFailure& e) {
        Fail(std::string(e.what()) +
             ": the copy read the host buffer after copy_data_from_to "
             "returned, when the caller may already reuse it (BP-PLUGIN-7)");
      }
    }
  }
}

}  // namespace

void AddCopyTests(std::vector<TestCase>* out) {
  out->push_back({"device.copy.host_to_device",
                  "CopyDataFromTo copies host memory to the device; sizes 1, 3, 4, 7, 64, 4097 "
                  "and 65539 bytes of random data read back the same",
                  "BP-PLUGIN-7", kNeedsDevice, HostToDevice});
  out->push_back({"device.copy.host_to_device_offsets",
                  "host-to-device copies honour byte_offset on both sides and write exactly their "
                  "bytes",
                  "BP-PLUGIN-7", kNeedsDevice, HostToDeviceOffsets});
  out->push_back({"device.copy.device_to_host_offsets",
                  "device-to-host copies honour byte_offset on both sides and write exactly their "
                  "bytes of the host buffer",
                  "BP-PLUGIN-7", kNeedsDevice, DeviceToHostOffsets});
  out->push_back({"device.copy.device_to_device",
                  "copies from one buffer to another on the device (and between two devices of "
                  "the type) honour byte_offset and write exactly their bytes",
                  "BP-PLUGIN-7", kNeedsDevice, DeviceToDevice});
  out->push_back({"device.copy.dtypes_shapes",
                  "copies of tensors of several dtypes, lanes and shapes move shape x dtype bytes",
                  "BP-PLUGIN-7", kNeedsDevice, DtypesShapes});
  out->push_back({"device.copy.host_reuse",
                  "implementations should not assume that CPU buffers remain valid after "
                  "CopyDataFromTo returns: the host buffer is overwritten at once and the device "
                  "still gets the old contents",
                  "BP-PLUGIN-7", kNeedsDevice, HostReuse});
}

}  // namespace conformance
}  // namespace backplane
