// The CUDA DeviceRunner; see cuda_runner.h.
#include "runtime/cuda/cuda_runner.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "fieldflow/device_errors.h"
#include "fieldflow/errors.h"
#include "ir/field_elements.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/memory_route.h"

namespace fieldflow::runtime::cuda {

namespace {

// A block of device memory from the route, grown (never shrunk) as calls need. `label()` makes
// the route's name for it only when memory is allocated: a call that fits formats no string, so
// steady-state calls allocate nothing on the host.
struct DeviceBlock {
  void* pointer = nullptr;
  std::size_t bytes = 0;
  template <class Label>
  void ensure(std::size_t need, const Label& label) {
    if (need <= bytes) return;
    const std::string name = label();
    release(name);
    pointer = system_allocate(Device::cuda, need, transient_alignment, name);
    bytes = need;
  }
  void release(const std::string& label) noexcept {
    system_free(Device::cuda, pointer, bytes, label);
    pointer = nullptr;
    bytes = 0;
  }
};

// The value of word w of call `c` (host arrays holding device pointers): what
// codegen::call_word_source reads in generated code, and the emulation's ff_run copies.
ff_word word_of(const codegen::CallWord& w, const ff_call& c) {
  using K = codegen::CallWord::Kind;
  ff_word v{};
  switch (w.kind) {
    case K::domain: v.i = c.domains[w.index]; break;
    case K::buffer_data: v.p = c.buffers[w.index].data; break;
    case K::buffer_offset: v.i = c.buffers[w.index].offset; break;
    case K::buffer_stride: v.i = c.buffers[w.index].strides[w.slot]; break;
    case K::buffer_lo: v.i = c.buffers[w.index].lo[w.slot]; break;
    case K::buffer_hi: v.i = c.buffers[w.index].hi[w.slot]; break;
    case K::table_data: v.p = const_cast<std::int32_t*>(c.tables[w.index].data); break;
    case K::table_source_stride: v.i = c.tables[w.index].source_stride; break;
    case K::table_neighbor_stride: v.i = c.tables[w.index].neighbor_stride; break;
    case K::scalar_i: v.i = c.scalars[w.index].i; break;
    case K::scalar_f: v.f = c.scalars[w.index].f; break;
    case K::error: v.p = c.error; break;
  }
  return v;
}

}  // namespace

const CudaApi& cuda_runtime_api() {
  static const CudaApi api{
      [](cudaLibrary_t* l, const std::string& image) {
        return cudaLibraryLoadData(l, image.data(), nullptr, nullptr, 0, nullptr, nullptr, 0);
      },
      [](cudaLibrary_t l) { return cudaLibraryUnload(l); },
      [](cudaKernel_t* k, cudaLibrary_t l, const char* symbol) { return cudaLibraryGetKernel(k, l, symbol); },
      [](cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); },
      [](cudaStream_t s) { return cudaStreamDestroy(s); },
      [](cudaStream_t s) { return cudaStreamSynchronize(s); },
      [](cudaStream_t s, int* device) { return cudaStreamGetDevice(s, device); },
      [](void* to, const void* from, std::size_t bytes, cudaStream_t s) {
        return cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, s);
      },
      [](cudaKernel_t k, dim3 grid, dim3 block, void** args, cudaStream_t s) {
        return cudaLaunchKernel(reinterpret_cast<const void*>(k), grid, block, args, 0, s);
      },
      [](int* device) { return cudaGetDevice(device); },
      [](cudaPointerAttributes* a, const void* p) { return cudaPointerGetAttributes(a, p); },
      [](cudaFuncAttributes* a, cudaKernel_t k) { return cudaFuncGetAttributes(a, reinterpret_cast<const void*>(k)); },
      [](void* to, std::size_t to_pitch, const void* from, std::size_t from_pitch, std::size_t width, std::size_t height,
         cudaStream_t s) {
        return cudaMemcpy2DAsync(to, to_pitch, from, from_pitch, width, height, cudaMemcpyDefault, s);
      },
  };
  return api;
}

namespace {

class CudaRunner final : public DeviceRunner {
 public:
  explicit CudaRunner(CudaRunnerOptions o) : o_(std::move(o)), api_(o_.api ? *o_.api : cuda_runtime_api()) {
    try {
      set_up();
    } catch (...) {
      // The destructor does not run for a half-built runner: what was created goes here.
      if (owns_stream_) api_.stream_destroy(stream_);
      if (library_) api_.library_unload(library_);
      throw;
    }
  }

  // Every call ends with its stream synchronised, a failed one too (run), so nothing of this
  // runner's is pending here: a stream the host lent (and may have destroyed first) is not touched.
  ~CudaRunner() override {
    if (owns_stream_) api_.stream_synchronize(stream_);
    for (std::size_t i = 0; i < field_copies_.size(); ++i) field_copies_[i].release(label("field", i));
    for (std::size_t i = 0; i < table_copies_.size(); ++i) table_copies_[i].release(label("table", i));
    for (std::size_t i = 0; i < saved_outputs_.size(); ++i) saved_outputs_[i].release(label("saved output", i));
    error_flag_.release(o_.program + " (error flag)");
    if (owns_stream_) api_.stream_destroy(stream_);
    if (library_) api_.library_unload(library_);
  }

  void* stream() const override { return stream_; }

  // The module, the stream and the transient memory belong to the device that was current when
  // the program was created; a call from a thread with another current device would allocate and
  // launch where none of them is valid.
  void check_caller() const override {
    int current = -1;
    check(api_.get_device(&current), "cudaGetDevice", o_.program);
    if (current != device_)
      throw ArgumentError(fmt::format("program '{}' was created on cuda device {}, but the calling thread's current "
                                      "device is {}; call it with device {} current (cudaSetDevice)",
                                      o_.program, device_, current, device_));
  }

  std::string memory_problem(const void* pointer) const override {
    const cudaPointerAttributes a = attributes_of(pointer);
    if (a.type == cudaMemoryTypeManaged || (a.type == cudaMemoryTypeDevice && a.device == device_)) return {};
    const std::string what = a.type == cudaMemoryTypeDevice ? fmt::format("memory of cuda device {}", a.device)
                             : a.type == cudaMemoryTypeHost ? std::string("pinned host memory")
                                                            : std::string("host memory");
    return fmt::format("{}, where the program's kernels run on cuda device {} and need its memory (cudaMalloc, "
                       "cudaMallocManaged)", what, device_);
  }

  std::int32_t run(const ff_call& c, const DeviceCall& call) override {
    cudaStream_t stream = call.stream ? static_cast<cudaStream_t>(call.stream) : stream_;
    try {
      return run_on(stream, c, call);
    } catch (...) {
      // A call that failed after enqueuing work (a copy, a launch of a later piece, device memory
      // running out) waits for that work before its memory is given back or reused: the caller
      // frees scoped transients and hands an external workspace on when this returns. What the
      // work may have left behind is not trusted: the error flag is cleared and the tables are
      // copied again by the next call. Failures of the wait itself are CUDA's sticky errors,
      // which the next call reports.
      api_.stream_synchronize(stream);
      last_error_ = -1;
      std::fill(copied_tables_.begin(), copied_tables_.end(), CopiedTable{});
      throw;
    }
  }

 private:
  std::int32_t run_on(cudaStream_t stream, const ff_call& c, const DeviceCall& call) {
    const std::string& p = o_.program;
    const std::vector<ArgumentSpan>& fields = *call.fields;
    const std::vector<ArgumentSpan>& tables = *call.tables;
    if (call.stream && call.stream != checked_call_stream_) {
      check_stream(stream, "the call's stream (CallOptions::cuda_stream)");
      checked_call_stream_ = call.stream;
    }
    check_field_memory(fields, *call.names);
    field_copies_.resize(fields.size());
    saved_outputs_.resize(fields.size());
    table_copies_.resize(tables.size());
    // Parameters first, then the transients (their data already in device memory). A field in
    // device memory keeps its own pointer; a host field is replaced by its device copy (outputs
    // too: points outside the domains stay as they were).
    std::vector<ff_buffer>& buffers = staged_buffers_;
    buffers.assign(c.buffers, c.buffers + o_.buffers);
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const ArgumentSpan& f = fields[i];
      if (!f.data || f.bytes == 0) continue;
      if (f.on_device) {
        if (f.save_before) {
          saved_outputs_[i].ensure(f.bytes, [&] { return label("saved output", i); });
          copy(saved_outputs_[i].pointer, f.data, f.bytes, stream);
        }
        continue;
      }
      field_copies_[i].ensure(f.bytes, [&] { return label("field", i); });
      copy(field_copies_[i].pointer, f.data, f.bytes, stream);
      buffers[i].data = field_copies_[i].pointer;
    }
    std::vector<ff_table>& staged_tables = staged_tables_;
    staged_tables.assign(c.tables, c.tables + tables.size());
    copied_tables_.resize(tables.size());
    for (std::size_t i = 0; i < tables.size(); ++i) {
      if (!tables[i].data || tables[i].bytes == 0) continue;
      const CopiedTable table{tables[i].data, tables[i].bytes, tables[i].identity};
      if (copied_tables_[i] != table) {
        copied_tables_[i] = {};  // until the copy below succeeded
        table_copies_[i].ensure(tables[i].bytes, [&] { return label("table", i); });
        copy(table_copies_[i].pointer, tables[i].data, tables[i].bytes, stream);
        copied_tables_[i] = table;
      }
      staged_tables[i].data = static_cast<const std::int32_t*>(table_copies_[i].pointer);
    }
    // The error flag, which kernels that check reads OR their failures into: zero before the
    // launches (set when allocated, and again after a call that raised).
    if (can_fail_ && (!error_flag_.pointer || last_error_)) {
      error_flag_.ensure(sizeof(std::int32_t), [&] { return p + " (error flag)"; });
      copy(error_flag_.pointer, &no_error_, sizeof no_error_, stream);
    }
    // Each launch's parameter words, from the call as the device sees it (its fields' device
    // memory, the tables' copies): passed by value, so nothing is uploaded for them.
    ff_call device_view = c;
    device_view.buffers = buffers.data();
    device_view.tables = staged_tables.data();
    device_view.error = static_cast<std::int32_t*>(error_flag_.pointer);
    for (std::size_t i = 0; i < o_.launches.size(); ++i)
      for (std::size_t w = 0; w < o_.launches[i].params.size(); ++w) words_[i][w] = word_of(o_.launches[i].params[w], device_view);
    // 32-bit indexing when every box and buffer of the call allows it (fieldflow/abi.h): fewer
    // instructions and registers per thread (docs/cuda.md); decided from the host's ff_call.
    const bool narrow =
        fieldflow::abi::ff_fits_32bit_indexing(&c, static_cast<int>(o_.buffers), static_cast<int>(o_.kernels), max_shift_);
    const std::vector<cudaKernel_t>& kernels = narrow ? narrow_kernels_ : kernels_;
    for (std::size_t i = 0; i < o_.launches.size(); ++i) {
      const codegen::CudaLaunch& l = o_.launches[i];
      const codegen::CudaGrid g = codegen::cuda_grid(l, c.domains + l.kernel * 2 * FF_MAX_DIMS);
      codegen::for_each_cuda_piece(g, codegen::cuda_max_grid_yz, [&](std::int64_t x, std::int64_t y, std::int64_t z,
                                                                     std::int64_t y0, std::int64_t z0) {
        void* args[] = {words_[i].data(), &y0, &z0};
        const cudaError_t launched =
            api_.launch(kernels[i], dim3(static_cast<unsigned>(x), static_cast<unsigned>(y), static_cast<unsigned>(z)),
                        dim3(static_cast<unsigned>(l.block_x)), args, stream);
        // The message is formatted only on failure: a call in steady state allocates nothing.
        if (launched != cudaSuccess)
          check(launched, "cudaLaunchKernel", fmt::format("{}' kernel '{}", p, narrow ? l.narrow_symbol : l.symbol));
      });
    }
    // The error flag is read only when a kernel can raise one; without it, and without host
    // outputs to copy back, the call synchronises once, like hand-written code.
    std::int32_t error = 0;
    if (can_fail_) {
      copy(&error, error_flag_.pointer, sizeof error, stream);
      check(api_.stream_synchronize(stream), "cudaStreamSynchronize", p);
    }
    last_error_ = error;
    bool copied = false, staged = false;
    host_staging_.resize(fields.size());
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const ArgumentSpan& f = fields[i];
      if (!f.output || !f.data || f.bytes == 0) continue;
      if (error && f.on_device && f.save_before) {
        restore(f, saved_outputs_[i].pointer, stream);  // the call is undone
        copied = true;
      } else if (!error && !f.on_device && f.scattered) {
        // Grows to the largest span seen, then stays: a steady-state call allocates nothing.
        if (host_staging_[i].size() < f.bytes) host_staging_[i].resize(f.bytes);
        copy(host_staging_[i].data(), field_copies_[i].pointer, f.bytes, stream);
        copied = staged = true;
      } else if (!error && !f.on_device) {
        copy(const_cast<void*>(f.data), field_copies_[i].pointer, f.bytes, stream);
        copied = true;
      }
    }
    if (copied || !can_fail_) check(api_.stream_synchronize(stream), "cudaStreamSynchronize", p);
    for (std::size_t i = 0; staged && i < fields.size(); ++i)
      if (const ArgumentSpan& f = fields[i]; !f.on_device && f.scattered && f.data && f.bytes > 0)  // staged above
        ir::copy_elements(*f.scattered, host_staging_[i].data(), static_cast<std::byte*>(const_cast<void*>(f.data)));
    return error;
  }

  // Loads the image, finds every kernel and makes the image resident now (cudaFuncGetAttributes:
  // an image for another architecture fails here with CUDA's reason), checks each launch's block
  // against what the compiled kernel allows, and takes or creates the stream.
  void set_up() {
    const std::string& p = o_.program;
    // The call holds every kernel's box, fused ones included (their launch is their scan's).
    for (const auto& l : o_.launches)
      FIELDFLOW_ASSERT(l.kernel >= 0 && static_cast<std::size_t>(l.kernel) < o_.kernels,
                       fmt::format("program '{}': launch '{}' runs kernel {} of the {} the options count", p, l.symbol,
                                   l.kernel, o_.kernels));
    check(api_.get_device(&device_), "cudaGetDevice", p);
    check(api_.library_load(&library_, o_.cubin), "cudaLibraryLoadData", p);
    const auto kernel = [&](const std::string& symbol, int block_x) {
      cudaKernel_t k = nullptr;
      check(api_.get_kernel(&k, library_, symbol.c_str()), "cudaLibraryGetKernel", fmt::format("{}' kernel '{}", p, symbol));
      cudaFuncAttributes a{};
      check(api_.kernel_attributes(&a, k), "cudaFuncGetAttributes", fmt::format("{}' kernel '{}", p, symbol));
      if (block_x > a.maxThreadsPerBlock)
        throw CudaError(fmt::format("program '{}': kernel '{}' runs at most {} threads per block on cuda device {}, "
                                    "its launch has {}", p, symbol, a.maxThreadsPerBlock, device_, block_x));
      return k;
    };
    for (const auto& l : o_.launches) {
      can_fail_ = can_fail_ || l.raises_errors;
      max_shift_ = std::max(max_shift_, l.max_shift);
      kernels_.push_back(kernel(l.symbol, l.block_x));
      narrow_kernels_.push_back(kernel(l.narrow_symbol, l.block_x));
      words_.emplace_back(std::max<std::size_t>(l.params.size(), 1));  // a kernel's struct has a word at least
    }
    if (o_.stream) {
      stream_ = static_cast<cudaStream_t>(o_.stream);
      check_stream(stream_, "the instance's stream (CompileOptions::cuda_stream)");
    } else {
      // Not the legacy default stream (which would order the call after every thread's work), but
      // a blocking one, ordered after what was issued on the legacy default stream: what
      // cudaMemcpy, the default streams of CuPy and PyTorch and DLPack's stream=None (Python's
      // device arrays) order their work by. A host whose calls should overlap with other work
      // passes its own stream (non-blocking, say).
      check(api_.stream_create(&stream_), "cudaStreamCreateWithFlags", p);
      owns_stream_ = true;
    }
  }

  // A stream of another device than the program's would fail at the first copy or launch with
  // CUDA's words only (an invalid handle): refused before anything runs, naming both devices.
  void check_stream(cudaStream_t stream, const char* what) const {
    int device = -1;
    check(api_.stream_device(stream, &device), "cudaStreamGetDevice", o_.program);
    if (device != device_)
      throw ArgumentError(fmt::format("program '{}' runs on cuda device {}, but {} belongs to device {}", o_.program,
                                      device_, what, device));
  }

  cudaPointerAttributes attributes_of(const void* pointer) const {
    cudaPointerAttributes a{};
    check(api_.pointer_attributes(&a, pointer), "cudaPointerGetAttributes", o_.program);
    return a;
  }

  std::string label(const char* what, std::size_t i) const { return fmt::format("{} ({} {} device copy)", o_.program, what, i); }

  // cudaMemcpyDefault: the direction follows from the pointers (unified addressing), so a host
  // field in pinned or managed memory copies as well as one in pageable memory.
  void copy(void* to, const void* from, std::size_t bytes, cudaStream_t stream) {
    check(api_.memcpy_async(to, from, bytes, stream), "cudaMemcpyAsync", o_.program);
  }

  // Puts a device output's saved span back: in one copy where its elements fill the span, else
  // run by run (a strided copy each), so the bytes between its elements, which may be another
  // field's that another stream writes meanwhile, are not written. Only a failed call pays for it.
  void restore(const ArgumentSpan& f, const void* saved, cudaStream_t stream) {
    if (!f.scattered) {
      copy(const_cast<void*>(f.data), saved, f.bytes, stream);
      return;
    }
    auto* to = static_cast<std::byte*>(const_cast<void*>(f.data));
    const auto* from = static_cast<const std::byte*>(saved);
    const std::size_t esize = size_of(f.scattered->dtype());
    ir::for_each_element_run(*f.scattered, [&](std::int64_t offset, std::int64_t count, std::int64_t step) {
      const auto rows = static_cast<std::size_t>(count), pitch = static_cast<std::size_t>(step);
      if (count == 1 || pitch == esize)
        copy(to + offset, from + offset, rows * esize, stream);
      else
        check(api_.memcpy_2d_async(to + offset, pitch, from + offset, pitch, esize, rows, stream), "cudaMemcpy2DAsync",
              o_.program);
    });
  }

  // Each field's memory is where the field says: device (or managed) memory of this runner's
  // device for a Device::cuda view, not device memory for a host field. Checked before anything
  // runs, for the fields whose address (or kind) differs from the last call's: a time loop that
  // swaps one view's memory pays one cudaPointerGetAttributes (about a microsecond), not one per
  // field.
  void check_field_memory(const std::vector<ArgumentSpan>& fields, const std::vector<std::string>& names) {
    checked_fields_.resize(fields.size());
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const ArgumentSpan& f = fields[i];
      if (!f.data || f.bytes == 0) continue;
      const std::pair<const void*, bool> field{f.data, f.on_device};
      if (checked_fields_[i] == field) continue;
      checked_fields_[i] = {};
      const cudaPointerAttributes a = attributes_of(f.data);
      const bool device = a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
      if (f.on_device && !device)
        throw ArgumentError(fmt::format("program '{}': field '{}' is a view over cuda memory (Device::cuda), but its "
                                        "data {} is {} memory; pass device memory, or a host field (Device::cpu), "
                                        "which the call copies", o_.program, names[i], f.data,
                                        a.type == cudaMemoryTypeHost ? "pinned host" : "host"));
      if (f.on_device && a.type == cudaMemoryTypeDevice && a.device != device_)
        throw ArgumentError(fmt::format("program '{}': field '{}' is memory of cuda device {}, but the program runs on "
                                        "device {}", o_.program, names[i], a.device, device_));
      if (!f.on_device && a.type == cudaMemoryTypeDevice)
        throw ArgumentError(fmt::format("program '{}': field '{}' is a host field (Device::cpu), but its data {} is "
                                        "cuda device memory; create the view with Device::cuda", o_.program,
                                        names[i], f.data));
      checked_fields_[i] = field;
    }
  }

  CudaRunnerOptions o_;
  const CudaApi& api_;
  int device_ = -1;                  // current when the program was created: its module, stream, memory
  cudaLibrary_t library_ = nullptr;
  std::vector<cudaKernel_t> kernels_;         // per launch: 64-bit indexing
  std::vector<cudaKernel_t> narrow_kernels_;  // and 32-bit (CudaLaunch::narrow_symbol)
  cudaStream_t stream_ = nullptr;
  bool owns_stream_ = false;
  void* checked_call_stream_ = nullptr;  // the last per-call stream found to be of this device
  std::vector<DeviceBlock> field_copies_, saved_outputs_, table_copies_;
  std::vector<std::vector<std::byte>> host_staging_;  // per field: a scattered host output's span, from the device
  DeviceBlock error_flag_;            // kernels that check reads: where they report (ff_error)
  static constexpr std::int32_t no_error_ = 0;
  std::vector<ff_buffer> staged_buffers_;
  std::vector<ff_table> staged_tables_;
  std::vector<std::vector<ff_word>> words_;  // per launch: its parameter words (CudaLaunch::params)
  std::vector<std::pair<const void*, bool>> checked_fields_;          // address, on_device: memory checked
  // What each device table copy holds: the table object (identity) and its entries' span.
  struct CopiedTable {
    const void* data = nullptr;
    std::size_t bytes = 0;
    std::uint64_t identity = 0;
    bool operator==(const CopiedTable&) const = default;
  };
  std::vector<CopiedTable> copied_tables_;
  std::int32_t last_error_ = 0;      // the flags the last call's kernels raised (-1: it failed, unknown)
  bool can_fail_ = false;            // a kernel checks reads while running
  std::int64_t max_shift_ = 0;       // the largest constant offset of the kernels' accesses
};

}  // namespace

std::shared_ptr<DeviceRunner> make_cuda_runner(CudaRunnerOptions options) {
  return std::make_shared<CudaRunner>(std::move(options));
}

}  // namespace fieldflow::runtime::cuda
