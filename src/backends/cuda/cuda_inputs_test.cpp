// The cuda backend's own kernels (cuda_inputs.cu) against the host generator they replace: inputs
// generated in device memory must be the bytes fill_input makes on the host, for every dtype,
// distribution and layout; changed inputs and outputs must be found. Skips without a device.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backends/cuda/cuda.h"
#include "worker/device_backend.h"
#include "worker/host_data.h"
#include "worker/tensor_set.h"

namespace kforge::worker {
namespace {

constexpr DType kDTypes[] = {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32,
                             DType::i64};
constexpr InputDistribution kDistributions[] = {
    InputDistribution::uniform, InputDistribution::normal, InputDistribution::heavy_tailed,
    InputDistribution::small,   InputDistribution::pareto, InputDistribution::spike};

/// The inputs `set` generated in place (`filled`) equal the host generator's bytes for (seed,
/// distribution), and read back as unchanged.
void expect_device_is_host(TensorSet& set, const FilledInputs& filled, uint64_t seed,
                           InputDistribution distribution) {
  ASSERT_TRUE(filled.host.empty()) << "the cuda backend generates in place";
  const HostTensors host = set.make_inputs(seed, distribution);
  for (size_t i = 0; i < 2; ++i) {
    const HostBuffer device = set.download(i);
    ASSERT_EQ(device.bytes, host[i].bytes);
    EXPECT_EQ(std::memcmp(device.begin(), host[i].begin(), static_cast<size_t>(device.bytes)), 0)
        << "input " << i;
    EXPECT_EQ(set.input_change(i, filled), -1) << "input " << i;
  }
}

class GpuInputs : public ::testing::Test {
 protected:
  void SetUp() override {
    try {
      backend_ = backends::make_cuda_device(0);
    } catch (const Error& e) {
      GTEST_SKIP() << "no usable CUDA device: " << e.what();
    }
  }

  /// Two inputs (the second strided) and one output, all of shape rows x cols.
  static Signature signature(DType dtype) {
    Signature s;
    s.tensors.push_back(TensorSpec{"a", TensorRole::input, dtype, {"rows", "cols"}});
    s.tensors.push_back(TensorSpec{"b", TensorRole::input, dtype, {"rows", "cols"}, true});
    s.tensors.push_back(TensorSpec{"y", TensorRole::output, dtype, {"rows", "cols"}});
    return s;
  }
  static Workload workload(int64_t rows, int64_t cols) {
    Workload w;
    w.name = "w";
    w.dims = {{"rows", rows}, {"cols", cols}};
    return w;
  }

  std::unique_ptr<DeviceBackend> backend_;
};

TEST_F(GpuInputs, DeviceInputsAreTheHostBytes) {
  // 33 x 4097 exercises tails and the padded layout; 700 x 3001 (2.1M elements) the ziggurat's
  // slow path many times over and the host generator's multi-threaded chunks.
  for (const auto [rows, cols] : {std::pair<int64_t, int64_t>{33, 4097}, {700, 3001}, {1, 1}}) {
    for (DType dtype : kDTypes) {
      for (InputDistribution distribution : kDistributions) {
        for (bool padded : {false, true}) {
          SCOPED_TRACE(to_string(dtype) + " " + to_string(distribution) + " " +
                       std::to_string(rows) + "x" + std::to_string(cols) +
                       (padded ? " padded" : ""));
          TensorSet set(*backend_, signature(dtype), workload(rows, cols), padded);
          const FilledInputs filled = set.fill_inputs(77, distribution);
          backend_->synchronize();
          expect_device_is_host(set, filled, 77, distribution);
        }
      }
    }
  }
}

TEST_F(GpuInputs, RemappedDeviceInputsAreTheHostBytes) {
  // The self-test probes (InputRemap) generated in place must be the host's remapped bytes, in
  // both layouts, with an odd row count (half_rows keeps the middle row).
  for (InputRemap remap : {InputRemap::every_16th, InputRemap::half_rows}) {
    for (DType dtype : {DType::f32, DType::f16, DType::i64}) {
      for (InputDistribution distribution :
           {InputDistribution::normal, InputDistribution::pareto, InputDistribution::spike}) {
        for (bool padded : {false, true}) {
          SCOPED_TRACE(to_string(remap) + " " + to_string(dtype) + " " + to_string(distribution) +
                       (padded ? " padded" : ""));
          TensorSet set(*backend_, signature(dtype), workload(33, 4097), padded);
          set.remap_inputs(remap);
          const FilledInputs filled = set.fill_inputs(78, distribution);
          backend_->synchronize();
          expect_device_is_host(set, filled, 78, distribution);
        }
      }
    }
  }
}

TEST_F(GpuInputs, FindsTheFirstChangedInputElement) {
  TensorSet set(*backend_, signature(DType::f32), workload(33, 4097), /*padded=*/true);
  const FilledInputs filled = set.fill_inputs(5, InputDistribution::normal);
  const float value = 12345.0f;
  // Element 1000 of the compact input and a gap (storage element 4097, past row 0's end) of the
  // padded one: a kernel that writes into the padding has modified its input too.
  backend_->copy_to_device(static_cast<std::byte*>(const_cast<void*>(set.data(0))) + 1000 * 4,
                           &value, 4);
  backend_->copy_to_device(static_cast<std::byte*>(const_cast<void*>(set.data(1))) + 4098 * 4,
                           &value, 4);
  backend_->copy_to_device(static_cast<std::byte*>(const_cast<void*>(set.data(1))) + 5000 * 4,
                           &value, 4);
  EXPECT_EQ(set.input_change(0, filled), 1000);
  EXPECT_EQ(set.input_change(1, filled), 4098);
  // Other seeds or distributions are other values.
  EXPECT_EQ(set.input_change(0, FilledInputs{6, InputDistribution::normal, {}}), 0);
}

TEST_F(GpuInputs, ContentHashSeesEveryByte) {
  for (int64_t bytes : {int64_t{1}, int64_t{7}, int64_t{8}, int64_t{4099}, int64_t{1} << 24}) {
    SCOPED_TRACE(bytes);
    DeviceBuffer buffer(*backend_, bytes);
    std::vector<unsigned char> data(static_cast<size_t>(bytes));
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<unsigned char>(i * 7 + 3);
    backend_->copy_to_device(buffer.data(), data.data(), bytes);
    const auto hash = backend_->content_hash(buffer.data(), bytes);
    ASSERT_TRUE(hash.has_value());
    EXPECT_EQ(backend_->content_hash(buffer.data(), bytes), hash) << "deterministic";
    for (int64_t at : {int64_t{0}, bytes / 2, bytes - 1}) {
      const unsigned char flipped = data[static_cast<size_t>(at)] ^ 0x10;
      backend_->copy_to_device(static_cast<std::byte*>(buffer.data()) + at, &flipped, 1);
      EXPECT_NE(backend_->content_hash(buffer.data(), bytes), hash) << "byte " << at;
      backend_->copy_to_device(static_cast<std::byte*>(buffer.data()) + at,
                               &data[static_cast<size_t>(at)], 1);
    }
    if (bytes >= 16) {  // swapped words: the hash depends on positions, not only on contents
      std::vector<unsigned char> swapped = data;
      std::swap_ranges(swapped.begin(), swapped.begin() + 8, swapped.begin() + 8);
      backend_->copy_to_device(buffer.data(), swapped.data(), 16);
      if (std::memcmp(swapped.data(), data.data(), 16) != 0) {
        EXPECT_NE(backend_->content_hash(buffer.data(), bytes), hash);
      }
    }
  }
}

}  // namespace
}  // namespace kforge::worker
