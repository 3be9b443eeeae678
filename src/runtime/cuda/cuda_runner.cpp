// The CUDA DeviceRunner; see cuda_runner.h.
#include "runtime/cuda/cuda_runner.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstring>

#include "fieldflow/device_errors.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/memory_route.h"

namespace fieldflow::runtime::cuda {

namespace {

// A block of device memory from the route, grown (never shrunk) as calls need.
struct DeviceBlock {
  void* pointer = nullptr;
  std::size_t bytes = 0;
  void ensure(std::size_t need, const std::string& label) {
    if (need <= bytes) return;
    release(label);
    pointer = system_allocate(Device::cuda, need, transient_alignment, label);
    bytes = need;
  }
  void release(const std::string& label) noexcept {
    system_free(Device::cuda, pointer, bytes, label);
    pointer = nullptr;
    bytes = 0;
  }
};

std::size_t align_up(std::size_t n) { return (n + 255) / 256 * 256; }

class CudaRunner final : public DeviceRunner {
 public:
  explicit CudaRunner(CudaRunnerOptions o) : o_(std::move(o)) {
    const std::string& p = o_.program;
    check(cudaLibraryLoadData(&library_, o_.cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
          "cudaLibraryLoadData", p);
    for (const auto& l : o_.launches) {
      cudaKernel_t k = nullptr;
      check(cudaLibraryGetKernel(&k, library_, l.symbol.c_str()), "cudaLibraryGetKernel", p);
      kernels_.push_back(k);
    }
    if (o_.stream) {
      stream_ = static_cast<cudaStream_t>(o_.stream);
    } else {
      // Non-blocking: never synchronises with the legacy default stream.
      check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags", p);
      owns_stream_ = true;
    }
  }

  ~CudaRunner() override {
    if (stream_) cudaStreamSynchronize(stream_);
    for (std::size_t i = 0; i < field_copies_.size(); ++i) field_copies_[i].release(label("field", i));
    for (std::size_t i = 0; i < table_copies_.size(); ++i) table_copies_[i].release(label("table", i));
    descriptor_.release(o_.program + " (call descriptor)");
    if (owns_stream_) cudaStreamDestroy(stream_);
    if (library_) cudaLibraryUnload(library_);
  }

  void* stream() const override { return stream_; }

  std::int32_t run(const ff_call& c, const std::vector<HostSpan>& fields, const std::vector<HostSpan>& tables) override {
    const std::string& p = o_.program;
    field_copies_.resize(fields.size());
    table_copies_.resize(tables.size());
    // Device copies of every field (outputs too: points outside the domains stay as they were) and
    // table; the descriptor's buffers point at them, transients already point into device memory.
    std::vector<ff_buffer>& buffers = staged_buffers_;
    // Parameters first, then the transients (their data already in device memory).
    buffers.assign(c.buffers, c.buffers + o_.buffers);
    for (std::size_t i = 0; i < fields.size(); ++i) {
      if (!fields[i].data || fields[i].bytes == 0) continue;
      field_copies_[i].ensure(fields[i].bytes, label("field", i));
      copy_in(field_copies_[i].pointer, fields[i].data, fields[i].bytes);
      buffers[i].data = field_copies_[i].pointer;
    }
    std::vector<ff_table>& staged_tables = staged_tables_;
    staged_tables.assign(c.tables, c.tables + tables.size());
    for (std::size_t i = 0; i < tables.size(); ++i) {
      if (!tables[i].data || tables[i].bytes == 0) continue;
      table_copies_[i].ensure(tables[i].bytes, label("table", i));
      copy_in(table_copies_[i].pointer, tables[i].data, tables[i].bytes);
      staged_tables[i].data = static_cast<const std::int32_t*>(table_copies_[i].pointer);
    }
    const std::size_t n_scalars = fields.size(), n_domains = o_.launches.size() * 2 * FF_MAX_DIMS;
    // One descriptor block: ff_call | buffers | tables | scalars | domains | error flag.
    const std::size_t at_buffers = align_up(sizeof(ff_call));
    const std::size_t at_tables = at_buffers + align_up(buffers.size() * sizeof(ff_buffer));
    const std::size_t at_scalars = at_tables + align_up(staged_tables.size() * sizeof(ff_table));
    const std::size_t at_domains = at_scalars + align_up(n_scalars * sizeof(ff_scalar));
    const std::size_t at_error = at_domains + align_up(n_domains * sizeof(std::int64_t));
    const std::size_t total = at_error + sizeof(std::int32_t);
    descriptor_.ensure(total, p + " (call descriptor)");
    auto* dev = static_cast<std::byte*>(descriptor_.pointer);
    staged_.assign(total, std::byte{0});
    ff_call dc = c;
    dc.buffers = reinterpret_cast<const ff_buffer*>(dev + at_buffers);
    dc.tables = reinterpret_cast<const ff_table*>(dev + at_tables);
    dc.scalars = reinterpret_cast<const ff_scalar*>(dev + at_scalars);
    dc.domains = reinterpret_cast<const std::int64_t*>(dev + at_domains);
    dc.error = reinterpret_cast<std::int32_t*>(dev + at_error);
    std::memcpy(staged_.data(), &dc, sizeof dc);
    std::memcpy(staged_.data() + at_buffers, buffers.data(), buffers.size() * sizeof(ff_buffer));
    std::memcpy(staged_.data() + at_tables, staged_tables.data(), staged_tables.size() * sizeof(ff_table));
    std::memcpy(staged_.data() + at_scalars, c.scalars, n_scalars * sizeof(ff_scalar));
    std::memcpy(staged_.data() + at_domains, c.domains, n_domains * sizeof(std::int64_t));
    copy_in(dev, staged_.data(), total);

    const ff_call* device_call = reinterpret_cast<const ff_call*>(dev);
    for (std::size_t i = 0; i < o_.launches.size(); ++i) {
      const codegen::CudaLaunch& l = o_.launches[i];
      const codegen::CudaGrid g = codegen::cuda_grid(l, c.domains + l.kernel * 2 * FF_MAX_DIMS);
      if (g.x == 0) continue;
      void* args[] = {&device_call};
      check(cudaLaunchKernel(reinterpret_cast<const void*>(kernels_[i]), dim3(static_cast<unsigned>(g.x),
                             static_cast<unsigned>(g.y)), dim3(static_cast<unsigned>(l.block_x)), args, 0, stream_),
            "cudaLaunchKernel", fmt::format("{}' kernel '{}", p, l.symbol));
    }
    std::int32_t error = 0;
    check(cudaMemcpyAsync(&error, dev + at_error, sizeof error, cudaMemcpyDeviceToHost, stream_), "cudaMemcpyAsync", p);
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", p);
    if (error) return error;
    for (std::size_t i = 0; i < fields.size(); ++i)
      if (fields[i].output && fields[i].data)
        check(cudaMemcpyAsync(const_cast<void*>(fields[i].data), field_copies_[i].pointer, fields[i].bytes,
                              cudaMemcpyDeviceToHost, stream_),
              "cudaMemcpyAsync", p);
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", p);
    return 0;
  }

 private:
  std::string label(const char* what, std::size_t i) const { return fmt::format("{} ({} {} device copy)", o_.program, what, i); }

  void copy_in(void* device, const void* host, std::size_t bytes) {
    check(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_), "cudaMemcpyAsync", o_.program);
  }

  CudaRunnerOptions o_;
  cudaLibrary_t library_ = nullptr;
  std::vector<cudaKernel_t> kernels_;
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  std::vector<DeviceBlock> field_copies_, table_copies_;
  DeviceBlock descriptor_;
  std::vector<ff_buffer> staged_buffers_;
  std::vector<ff_table> staged_tables_;
  std::vector<std::byte> staged_;
};

}  // namespace

std::shared_ptr<DeviceRunner> make_cuda_runner(CudaRunnerOptions options) {
  return std::make_shared<CudaRunner>(std::move(options));
}

}  // namespace fieldflow::runtime::cuda
