#pragma once
// The CUDA backend's checks without a device (test_cuda_codegen, test_reference_cuda): generated
// kernels executed under host emulation (driver::compile_cuda_emulated) against the reference,
// and generated CUDA compiled with NVRTC. Sources to compile are collected during the run and
// compiled as one translation unit at its end (one NVRTC start-up for all programs).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <list>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include <sys/mman.h>

#include "driver/cuda_build.h"
#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/reference.h"
#include "support/backend_harness.h"
#include "support/nvrtc_bodies.h"
#ifdef FIELDFLOW_WITH_CUDA
#include "runtime/cuda/cuda_device.h"
#include "support/cuda_emulator.h"
#endif

namespace fieldflow::testing_support {

// A program whose kernel reads at a dynamic offset along I (gather_i: o = a(I + off) - a), so
// it checks reads while running: the in-kernel failure path.
inline ir::Program gather_program() {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder pb("gather_i");
  Expr a = pb.field("a", {I, K}, DType::float64), off = pb.field("off", {I, K}, DType::int32);
  Expr o = pb.field("o", {I, K}, DType::float64);
  Expr ni = pb.scalar("ni", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("gather", a(I + off) - a, {o}, {{I, 0, ni}, {K, 0, nk}});
  return pb.build();
}

// A box with more rows than CUDA allows blocks along y (70,000 rows of J), or along z (65,600
// levels): each point reads its neighbour in the next row, across the launches' pieces too. The
// fields are horizontal_fastest, 3 points along I.
struct TallBox {
  ir::Program program;
  std::list<Field> fields;
  Arguments args;
};
inline TallBox tall_box(bool along_z) {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder pb(along_z ? "tall_k" : "tall_j");
  Expr a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
  Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("next_row", (along_z ? a(K + 1) : a(J + 1)) * 0.5 - a, {o}, {{I, 0, ni}, {J, 0, nj}, {K, 0, nk}});
  TallBox box{pb.build(), {}, {}};
  const std::int64_t rows = along_z ? 65600 : 70000, n_i = 3, n_j = along_z ? 1 : rows, n_k = along_z ? rows : 1;
  Field& fa = box.fields.emplace_back(std::vector<Dimension>{I, J, K}, DType::float64,
                                      std::vector<std::int64_t>{n_i, n_j + !along_z, n_k + along_z},
                                      std::vector<std::int64_t>{}, Layout::horizontal_fastest);
  Field& fo = box.fields.emplace_back(std::vector<Dimension>{I, J, K}, DType::float64,
                                      std::vector<std::int64_t>{n_i, n_j, n_k}, std::vector<std::int64_t>{},
                                      Layout::horizontal_fastest);
  for (std::int64_t i = 0; i < n_i; ++i)
    for (std::int64_t j = 0; j < n_j + !along_z; ++j)
      for (std::int64_t k = 0; k < n_k + along_z; ++k)
        fa.at<double>({i, j, k}) = static_cast<double>((i * 7 + j * 3 + k * 5) % 101) + 0.25;
  box.args.field("a", fa).field("o", fo).scalar("ni", n_i).scalar("nj", n_j).scalar("nk", n_k);
  return box;
}

// Address space without memory: an anonymous mapping reserved with MAP_NORESERVE, of which only
// the pages a program touches become memory. A test can then give a field whose element offsets
// pass 2^31 (levels 2^29 elements apart) on a machine with a few gigabytes.
class SparseMapping {
 public:
  explicit SparseMapping(std::size_t bytes) : bytes_(bytes) {
    data_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data_ == MAP_FAILED) throw std::runtime_error("mmap of " + std::to_string(bytes) + " bytes of address space failed");
  }
  SparseMapping(const SparseMapping&) = delete;
  SparseMapping& operator=(const SparseMapping&) = delete;
  ~SparseMapping() { munmap(data_, bytes_); }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// A float32 field a(I, K) of 5 points by 5 levels (K from -1) whose levels lie `stride` elements
// apart in a SparseMapping, and a program reading it a level up and a level down: o = a(K + 1) -
// a(K - 1) over I in [0, 5), K in [0, 3). At a stride of 2^29 its offsets pass 2^31 (32-bit
// indexing would read elsewhere); ff_fits_32bit_indexing accepts strides up to 306,783,377
// (7 stride + 7 < 2^31: a's offset of K = 0, then per dimension (reach + 2 max_shift) stride).
struct FarApartLevels {
  ir::Program program;
  SparseMapping memory;
  Field a, o;  // a over the mapping, o a plain field, both host views (Device::cpu)
  Arguments args;
};
inline std::unique_ptr<FarApartLevels> far_apart_levels(std::int64_t stride) {
  const Dimension I = horizontal_dim("I"), K = vertical_dim("K");
  ProgramBuilder pb("far_apart_levels");
  Expr a = pb.field("a", {I, K}, DType::float32), o = pb.field("o", {I, K}, DType::float32);
  pb.call("across_levels", a(K + 1) - a(K - 1), {o}, {{I, 0, 5}, {K, 0, 3}});
  const std::vector<Dimension> dims{I, K};
  const std::size_t bytes = static_cast<std::size_t>(4 * stride + 5) * sizeof(float);
  auto out = std::unique_ptr<FarApartLevels>(new FarApartLevels{
      pb.build(), SparseMapping(bytes), Field({I, K}, DType::float32, {5, 3}, {}, Layout::horizontal_fastest),
      Field({I, K}, DType::float32, {5, 3}, {}, Layout::horizontal_fastest), {}});
  out->a = Field::view(out->memory.data(), dims, DType::float32, {5, 5}, {1, stride}, {0, -1});
  for (std::int64_t i = 0; i < 5; ++i)
    for (std::int64_t k = -1; k < 4; ++k) out->a.at<float>({i, k}) = static_cast<float>(i * 10 + k * k) + 0.5f;
  out->args.field("a", out->a).field("o", out->o);
  return out;
}

// Whether a CUDA device can run Backend::cuda here (asked once).
inline bool device_present() {
#ifdef FIELDFLOW_WITH_CUDA
  static const bool present = runtime::cuda::device_count() > 0;
  return present;
#else
  return false;
#endif
}

// CUDA's math library is not the host's libm: exp, sin, pow, tgamma ... may differ from the
// reference in the last bits (CUDA documents 1-2 ulps for most double functions, up to 10 for
// tgamma; glibc's own error adds to the distance between the two). Outputs of such programs that
// a GPU computed are compared within this many ulps; every other result bit for bit.
inline constexpr std::int64_t device_math_ulps = 32;

// Whether `p` calls a function of the math library that a GPU computes its own way: generated
// code wraps each such call's argument in ff_libm_arg (pow: ff_pow); sqrt, floor, abs, fmod ...
// are exact on both and not wrapped.
inline bool uses_device_math_library(const ir::Program& p, const CompileOptions& options) {
  const std::string body = driver::build_cuda_source(p, options, "m_").source.body;
  return body.find("ff_libm_arg(") != std::string::npos || body.find("ff_pow(") != std::string::npos;
}

// Distance in ulps between two floating-point values of the same type (0 when equal, both NaN
// or both zero of either sign): their bits mapped to integers that order like the values.
template <class T>
std::int64_t ulp_distance(T a, T b) {
  if (a == b || (a != a && b != b)) return 0;
  if (a != a || b != b) return std::numeric_limits<std::int64_t>::max();
  using Bits = std::conditional_t<sizeof(T) == 8, std::int64_t, std::int32_t>;
  const auto ordered = [](T v) {
    Bits bits;
    std::memcpy(&bits, &v, sizeof v);
    return bits < 0 ? static_cast<std::int64_t>(std::numeric_limits<Bits>::min()) - bits : static_cast<std::int64_t>(bits);
  };
  const std::int64_t x = ordered(a), y = ordered(b);
  return x > y ? x - y : y - x;
}

// Fields equal bit for bit (ulps 0), or, for floating-point fields, element by element within
// `ulps` (every byte of the span: padding is copied alike). Names the first element beyond.
inline ::testing::AssertionResult same_within_ulps(const Field& reference, const Field& mine, std::int64_t ulps) {
  if (reference.bytes() != mine.bytes() || reference.dtype() != mine.dtype())
    return ::testing::AssertionFailure() << "sizes or dtypes differ";
  if (std::memcmp(reference.data(), mine.data(), reference.bytes()) == 0) return ::testing::AssertionSuccess();
  if (ulps == 0) return ::testing::AssertionFailure() << "bytes differ";
  const auto compare = [&](auto zero) -> ::testing::AssertionResult {
    using T = decltype(zero);
    const std::size_t n = reference.bytes() / sizeof(T);
    for (std::size_t i = 0; i < n; ++i) {
      T r, m;
      std::memcpy(&r, static_cast<const char*>(reference.data()) + i * sizeof(T), sizeof(T));
      std::memcpy(&m, static_cast<const char*>(mine.data()) + i * sizeof(T), sizeof(T));
      if (const std::int64_t d = ulp_distance(r, m); d > ulps)
        return ::testing::AssertionFailure() << "element " << i << ": reference " << r << ", computed " << m << ", "
                                             << d << " ulps apart (at most " << ulps << ")";
    }
    return ::testing::AssertionSuccess();
  };
  if (reference.dtype() == DType::float64) return compare(0.0);
  if (reference.dtype() == DType::float32) return compare(0.0f);
  return ::testing::AssertionFailure() << "bytes differ (not a floating-point field)";
}

// Programs whose outputs a GPU computed with its math library, compared within device_math_ulps.
inline std::atomic<int> device_math_programs{0};

// Kernel bodies waiting for the batch compile, each with its own symbol prefix.
class NvrtcBatch {
 public:
  static NvrtcBatch& instance() {
    static NvrtcBatch b;
    return b;
  }
  void add(const ir::Program& p, const CompileOptions& options) {
    std::lock_guard lock(mutex_);
    const std::string prefix = "p" + std::to_string(bodies_.size()) + "_";
    bodies_.push_back("// program '" + p.name + "'\n" + driver::build_cuda_source(p, options, prefix).source.body);
    names_.push_back(p.name);
  }
  std::size_t size() const { return bodies_.size(); }
  // Compiles everything added; returns "" or NVRTC's error. `summary` gets ptxas's report: the
  // kernels' count, their most registers and those that spill registers to local memory.
  std::string compile_all(const std::string& arch = "sm_90", std::string* summary = nullptr) {
    const NvrtcBodiesResult built = compile_cuda_bodies(bodies_, arch);
    if (!built.error.empty()) return built.error;
    std::string spills;
    int spilling = 0;
    for (const auto& k : built.kernels) {
      if (!k.spills()) continue;
      ++spilling;
      const std::size_t program = std::strtoul(k.symbol.c_str() + 1, nullptr, 10);  // p<N>_...
      spills += "\n  " + k.symbol + " (program '" + (program < names_.size() ? names_[program] : "?") + "'): " +
                std::to_string(k.spill_store_bytes) + " bytes spill stores, " + std::to_string(k.spill_load_bytes) +
                " bytes spill loads, " + std::to_string(k.registers) + " registers";
    }
    if (summary)
      *summary = std::to_string(built.kernels.size()) + " kernels, at most " + std::to_string(built.most_registers()) +
                 " registers per thread at " + arch + ", " + std::to_string(spilling) + " spilling" + spills;
    return "";
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> bodies_, names_;
};

// Registered once per test binary: the batch compile when every test has run.
class NvrtcBatchEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    NvrtcBatch& b = NvrtcBatch::instance();
    if (!driver::cuda_built()) {
      std::printf("[ SKIPPED  ] NVRTC batch of %zu programs: fieldflow was built without the CUDA toolkit\n", b.size());
      return;
    }
    std::string summary;
    const std::string error = b.compile_all("sm_90", &summary);
    EXPECT_EQ(error, "") << "the generated CUDA of the run's programs does not compile";
    std::printf("[ NVRTC    ] %zu programs' CUDA compiled in one translation unit: %s\n", b.size(),
                error.empty() ? ("ok; " + summary).c_str() : "FAILED");
    if (device_math_programs > 0)
      std::printf("[ DEVICE   ] %d programs call CUDA's math library (exp, sin, pow, ...): their floating-point "
                  "outputs were compared with the reference within %lld ulps, every other result bit for bit\n",
                  device_math_programs.load(), static_cast<long long>(device_math_ulps));
  }
};

inline void register_nvrtc_batch() {
  static const bool once = [] {
    ::testing::AddGlobalTestEnvironment(new NvrtcBatchEnvironment);
    return true;
  }();
  (void)once;
}

// The reference on copies of the fields; then the generated CUDA kernels: on a device when there
// is one (Backend::cuda, on further copies), and under host emulation on `args` itself (the test
// then checks the values in its own fields). Same bits in every field, or the same kind of error.
// Compiled for the layout the fields use; fields of mixed layouts are refused (LayoutError), and
// then only the reference runs. FIELDFLOW_TEST_NO_EMULATION=1 (scripts/gpu-check.sh) leaves the
// emulation out, and the device run is then the one on `args`.
inline void compare_cuda_emulation_with_reference(const ir::Program& p, const Arguments& args) {
  register_nvrtc_batch();
  const ReferenceOutcome ref = run_reference_on_copies(p, args);
  const FieldPairs& pairs = ref.pairs;
  const std::type_info* ref_error = ref.error;
  const std::exception_ptr ref_exception = ref.exception;
  const std::optional<Layout> layout = common_layout(args);
  if (!layout) {
    run_reference(p, args);
    return;
  }
  CompileOptions options;
  options.layout = *layout;
  NvrtcBatch::instance().add(p, options);
  // One compiled run compared with the reference; on `run_args`, whose fields pair with `ref`'s.
  // Results of a GPU's math library may differ from libm's in the last bits (device_math_ulps).
  const std::int64_t device_ulps = device_present() && uses_device_math_library(p, options) ? device_math_ulps : 0;
  auto check = [&](const char* what, const std::function<void()>& run,
                   const FieldPairs& mine, bool rethrow, std::int64_t ulps = 0) {
    try {
      run();
    } catch (const Error& e) {
      EXPECT_TRUE(ref_error && *ref_error == typeid(e))
          << what << " raised " << typeid(e).name() << " (" << e.what() << ") but the reference "
          << (ref_error ? std::string("raised ") + ref_error->name() : std::string("succeeded"));
      if (!rethrow) return;
      if (ref_exception) std::rethrow_exception(ref_exception);
      throw;
    }
    EXPECT_EQ(ref_error, nullptr) << "the reference raised " << (ref_error ? ref_error->name() : "") << " but "
                                  << what << " succeeded";
    for (std::size_t f = 0; f < mine.size() && !ref_error; ++f)
      EXPECT_TRUE(same_within_ulps(*pairs[f].second, *mine[f].second, ulps))
          << what << " differs from the reference in field " << pairs[f].first->describe();
  };
  FieldPairs originals;
  for (const auto& [original, copy] : pairs) originals.push_back({original, original});
  const bool emulate = std::getenv("FIELDFLOW_TEST_NO_EMULATION") == nullptr;
  if (device_present()) {
    CompileOptions on_device = options;
    on_device.backend = Backend::cuda;
    if (device_ulps > 0) ++device_math_programs;
    if (emulate) {
      std::list<Field> mine;
      FieldPairs my_pairs;
      Arguments my_args = copy_arguments(args, mine, my_pairs);
      check("the CUDA device", [&] { compile(p, on_device)(my_args); }, my_pairs, false, device_ulps);
    } else {
      check("the CUDA device", [&] { compile(p, on_device)(args); }, originals, true, device_ulps);
    }
  }
#ifdef FIELDFLOW_WITH_CUDA
  if (emulate && !device_present()) {
    // The runner and its binding too (host fields: copied in and back), on the emulated runtime,
    // on copies of the arguments.
    Emulator emulator;
    EmulatedDeviceMemory memory(emulator);
    std::list<Field> mine;
    FieldPairs my_pairs;
    Arguments my_args = copy_arguments(args, mine, my_pairs);
    EmulatedProgram program = compile_with_emulated_runtime(emulator, p, options);
    check("the CUDA runner on an emulated runtime", [&] { (*program.program)(my_args); }, my_pairs, false);
  }
#endif
  if (emulate) check("emulated CUDA", [&] { driver::compile_cuda_emulated(p, options)(args); }, originals, true);
  if (!emulate && !device_present()) run_reference(p, args);
}

}  // namespace fieldflow::testing_support
