// SPDX-License-Identifier: Apache-2.0
// DLPack exchange (ABI 1.6): a producer's DLManagedTensorVersioned (and 0.x DLManagedTensor)
// becomes a tensor without a copy and its deleter runs exactly once, when the last reference
// goes; an exported tensor keeps its memory alive until the consumer's deleter call; the
// read-only flag travels and is refused where the tensor would be written; a bad producer
// tensor is an error that leaves it with the caller. On cpu and on the simulated accelerator.
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "sdk/apps/examples/simaccel/simaccel_util.h"
#include "test_util.h"

namespace {

using backplane::Tensor;

// A producer's tensor over `n` floats of its own: counts its deleter calls.
struct Producer {
  std::vector<float> values;
  std::vector<int64_t> shape;
  std::atomic<int> deleted{0};
  DLManagedTensorVersioned managed{};
  DLManagedTensor legacy{};

  explicit Producer(size_t n, uint32_t seed, uint64_t flags = 0)
      : values(bptest::RandomFloats(n, seed)), shape{static_cast<int64_t>(n)} {
    managed.version = DLPackVersion{1, 0};
    managed.manager_ctx = this;
    managed.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleted;
    };
    managed.flags = flags;
    managed.dl_tensor = View();
    legacy.dl_tensor = View();
    legacy.manager_ctx = this;
    legacy.deleter = [](DLManagedTensor* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleted;
    };
  }
  DLTensor View() {
    DLTensor t{};
    t.data = values.data();
    t.device = DLDevice{kDLCPU, 0};
    t.ndim = 1;
    t.dtype = backplane::Float32();
    t.shape = shape.data();
    return t;
  }
};

TEST(DLPack, AVersionedTensorIsTakenOverWithoutACopyAndDeletedOnce) {
  Producer p(1000, 1);
  {
    Tensor t = Tensor::FromDLPack(&p.managed);
    EXPECT_EQ(t.dl()->data, p.values.data()) << "the import copied";
    EXPECT_EQ(t.shape(), std::vector<int64_t>{1000});
    p.shape[0] = 7;  // the producer's shape array is not the tensor's
    EXPECT_EQ(t.shape(), std::vector<int64_t>{1000});
    EXPECT_EQ(t.ToVector<float>(), p.values);
    Tensor other = t;  // a second reference
    EXPECT_EQ(p.deleted.load(), 0);
    t = Tensor();
    EXPECT_EQ(p.deleted.load(), 0) << "deleted while a reference remained";
  }
  EXPECT_EQ(p.deleted.load(), 1);
}

TEST(DLPack, ALegacyTensorIsTakenOverToo) {
  Producer p(33, 2);
  {
    Tensor t = Tensor::FromDLPack(&p.legacy);
    EXPECT_EQ(t.dl()->data, p.values.data());
    EXPECT_EQ(t.ToVector<float>(), p.values);
    EXPECT_EQ(t.Flags(), 0u);
  }
  EXPECT_EQ(p.deleted.load(), 1);
}

TEST(DLPack, ARefusedTensorStaysWithTheCaller) {
  Producer p(8, 3);
  p.managed.version = DLPackVersion{2, 0};
  bp_object_t* out = nullptr;
  bptest::Status s = bptest::Capture(bp_tensor_from_dlpack_versioned(&p.managed, &out));
  EXPECT_EQ(s.kind, BP_ERR_UNSUPPORTED) << s;
  EXPECT_NE(s.message.find("DLPack 2.0"), std::string::npos) << s;
  p.managed.version = DLPackVersion{1, 1};  // 1.1: the same layout, accepted
  p.managed.dl_tensor.data = nullptr;
  s = bptest::Capture(bp_tensor_from_dlpack_versioned(&p.managed, &out));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("the data is null for a tensor of 32 bytes"), std::string::npos) << s;
  p.managed.dl_tensor = p.View();
  p.shape[0] = -4;
  s = bptest::Capture(bp_tensor_from_dlpack_versioned(&p.managed, &out));
  EXPECT_NE(s.message.find("negative"), std::string::npos) << s;
  p.shape[0] = 8;
  p.managed.dl_tensor.ndim = 65;
  s = bptest::Capture(bp_tensor_from_dlpack_versioned(&p.managed, &out));
  EXPECT_NE(s.message.find("ndim is 65"), std::string::npos) << s;
  p.legacy.dl_tensor.dtype.bits = 0;
  s = bptest::Capture(bp_tensor_from_dlpack(&p.legacy, &out));
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_EQ(bptest::Capture(bp_tensor_from_dlpack_versioned(nullptr, &out)).kind,
            BP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(out, nullptr);
  EXPECT_EQ(p.deleted.load(), 0) << "a refused import ran the producer's deleter";
  // Empty tensors may have no data.
  p.managed.dl_tensor = p.View();
  p.managed.dl_tensor.data = nullptr;
  p.shape[0] = 0;
  {
    Tensor t = Tensor::FromDLPack(&p.managed);
    EXPECT_EQ(t.NumBytes(), 0u);
  }
  EXPECT_EQ(p.deleted.load(), 1);
}

TEST(DLPack, AnExportedTensorLivesUntilTheConsumerDeletesIt) {
  const std::vector<float> ref = bptest::RandomFloats(4096, 4);
  DLManagedTensorVersioned* out = nullptr;
  DLManagedTensor* legacy = nullptr;
  {
    Tensor t = Tensor::Empty({64, 64}, backplane::Float32(), backplane::Device());
    t.CopyFrom(ref);
    out = t.ToDLPackVersioned();
    legacy = t.ToDLPack();
    EXPECT_EQ(out->version.major, 1u);
    EXPECT_EQ(out->version.minor, 0u);
    EXPECT_EQ(out->flags, 0u);
    EXPECT_EQ(out->dl_tensor.data, t.dl()->data) << "the export copied";
    EXPECT_EQ(legacy->dl_tensor.data, t.dl()->data);
  }
  // The Tensor is gone; the consumers' references keep the memory.
  ASSERT_EQ(out->dl_tensor.ndim, 2);
  EXPECT_EQ(out->dl_tensor.shape[0], 64);
  EXPECT_EQ(std::memcmp(out->dl_tensor.data, ref.data(), ref.size() * sizeof(float)), 0);
  out->deleter(out);
  EXPECT_EQ(std::memcmp(legacy->dl_tensor.data, ref.data(), ref.size() * sizeof(float)), 0);
  legacy->deleter(legacy);  // the last reference: the data space is freed (ASan checks)
}

TEST(DLPack, ARoundTripKeepsTheMemoryAndTheFlags) {
  Producer p(100, 5, DLPACK_FLAG_BITMASK_READ_ONLY);
  DLManagedTensorVersioned* again = nullptr;
  {
    Tensor t = Tensor::FromDLPack(&p.managed);
    again = t.ToDLPackVersioned();
  }
  EXPECT_EQ(p.deleted.load(), 0) << "the export's reference must keep the import";
  EXPECT_EQ(again->flags & DLPACK_FLAG_BITMASK_READ_ONLY, DLPACK_FLAG_BITMASK_READ_ONLY);
  {
    Tensor back = Tensor::FromDLPack(again);  // takes over our own export
    EXPECT_EQ(back.dl()->data, p.values.data());
    EXPECT_TRUE(back.IsReadOnly());
  }
  EXPECT_EQ(p.deleted.load(), 1);
}

TEST(DLPack, AReadOnlyTensorIsNotWritten) {
  Producer p(16, 6, DLPACK_FLAG_BITMASK_READ_ONLY);
  const std::vector<float> before = p.values;
  Tensor ro = Tensor::FromDLPack(&p.managed);
  EXPECT_TRUE(ro.IsReadOnly());
  bptest::Status s = bptest::CaptureError([&] { ro.CopyFrom(bptest::RandomFloats(16, 7)); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("read-only"), std::string::npos) << s;
  s = bptest::CaptureError([&] { ro.ToDLPack(); });
  EXPECT_NE(s.message.find("cannot say so"), std::string::npos) << s;
  // A kernel may read it but not write it (passed as the tensor object, which carries the
  // flag; a borrowed DLTensor* carries none).
  const std::string ir =
      "func add(n: int32, a: buffer<float32>[n], b: buffer<float32>[n], c: buffer<float32>[n]) "
      "{\n  for i in serial(0, n) {\n    c[i] = a[i] + b[i]\n  }\n}\n";
  backplane::Module m = backplane::Build(ir, backplane::Target::Parse("c"));
  backplane::Function add = m.GetFunction("add");
  Tensor out = Tensor::Empty({16}, backplane::Float32(), backplane::Device());
  add(16, ro.object(), ro.object(), out.object());
  const std::vector<float> sum = out.ToVector<float>();
  for (size_t i = 0; i < 16; ++i) EXPECT_EQ(sum[i], before[i] + before[i]) << i;
  s = bptest::CaptureError([&] { add(16, out.object(), out.object(), ro.object()); });
  EXPECT_EQ(s.kind, BP_ERR_INVALID_ARGUMENT) << s;
  EXPECT_NE(s.message.find("argument 3 'c' is a read-only tensor"), std::string::npos) << s;
  EXPECT_EQ(p.values, before) << "a read-only tensor was written";
}

// A device tensor from a producer on the simulated accelerator (opaque handles, asynchronous
// copies): imported, read through the core, and its deleter frees the device memory.
class DLPackSimAccelTest : public bptest::SimAccelTest {};

TEST_F(DLPackSimAccelTest, ADeviceTensorIsImportedAndItsDeleterFreesIt) {
  const std::vector<float> ref = bptest::RandomFloats(500, 8);
  struct Owner {
    DLDevice dev;
    void* handle;
    std::atomic<int> deleted{0};
  };
  auto owner = std::make_unique<Owner>();
  owner->dev = Dev(1);
  owner->handle = Alloc(1, ref.size() * sizeof(float) + 16);
  ToDevice(ref.data(), 1, owner->handle, ref.size() * sizeof(float), 16);
  Sync(1);
  int64_t shape = 500;
  DLManagedTensorVersioned managed{};
  managed.version = DLPackVersion{1, 0};
  managed.manager_ctx = owner.get();
  managed.deleter = [](DLManagedTensorVersioned* self) {
    auto* o = static_cast<Owner*>(self->manager_ctx);
    backplane::Check(bp_device_free_data_space(o->dev, o->handle));
    ++o->deleted;
  };
  managed.dl_tensor.data = owner->handle;
  managed.dl_tensor.device = Dev(1);
  managed.dl_tensor.ndim = 1;
  managed.dl_tensor.dtype = backplane::Float32();
  managed.dl_tensor.shape = &shape;
  managed.dl_tensor.byte_offset = 16;
  EXPECT_EQ(Live(1), 1);
  {
    Tensor t = Tensor::FromDLPack(&managed);
    EXPECT_EQ(t.device(), Device(1));
    EXPECT_EQ(t.ToVector<float>(), ref);
    EXPECT_EQ(t.CopyTo(Device(0)).ToVector<float>(), ref);
  }
  EXPECT_EQ(owner->deleted.load(), 1);
  EXPECT_EQ(Live(1), 0) << "the producer's deleter did not free its memory";
}

}  // namespace
