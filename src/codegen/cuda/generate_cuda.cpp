// CUDA code generation: each kernel becomes one __global__ function whose threads each evaluate
// one point (pointwise) or sweep one column (scans), around the per-point code the CPU generator
// shares (codegen/common). No host code is generated: the runtime launches the kernels.
#include "codegen/cuda/generate_cuda.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <fmt/format.h>

#include "codegen/common/loop_invariants.h"
#include "codegen/common/point_emitter.h"
#include "fieldflow/abi.h"
#include "fieldflow/errors.h"

namespace fieldflow::codegen {

namespace {

using ir::Expr;

class CudaKernelEmitter : public PointEmitter {
 public:
  CudaKernelEmitter(const ir::Schedule& s, int kidx, Decls& decls, const std::string& prefix, const Dialect& dialect)
      : PointEmitter(s, kidx, decls, dialect), prefix_(prefix) {}

  // The kernel function and how to launch it.
  std::pair<std::string, CudaLaunch> emit() {
    const bool scan = k_.kind == ir::KernelKind::scan;
    // The grid's dimensions: the loop order without the scan's own dimension; x is the fastest.
    std::vector<Dimension> grid;
    for (const auto& d : loop_order())
      if (!scan || !(d == k_.value->dim)) grid.push_back(d);
    CudaLaunch launch;
    launch.symbol = fmt::format("{}kernel_{}", prefix_, kidx_);
    launch.kernel = kidx_;
    launch.loop_dims = static_cast<int>(loop_dims_.size());
    // Scans keep a carry and a sequential loop per thread: smaller blocks give more blocks per SM.
    launch.block_x = scan ? 64 : 128;
    auto axis_of = [&](const Dimension& d) {
      return static_cast<int>(std::find(loop_dims_.begin(), loop_dims_.end(), d) - loop_dims_.begin());
    };
    if (!grid.empty()) launch.x_axis = axis_of(grid.back());
    if (grid.size() > 1) launch.y_axis = axis_of(grid[grid.size() - 2]);
    for (std::size_t a = 0; a + 2 < grid.size(); ++a) launch.z_axes.push_back(axis_of(grid[a]));
    // A mesh kernel with the levels along y: each thread computes a run of levels, and what does
    // not change with the level (the neighbour-table row, the element's weights, the masks of
    // missing neighbours) once per run, as a hand-written kernel does.
    if (!scan && !k_.connectivities.empty() && grid.size() > 1 && grid[grid.size() - 2].kind == DimKind::vertical)
      launch.rows_per_thread = cuda_levels_per_thread;

    memo_.assign(1, {});
    const Point p = loop_point();
    const int ind = 3;
    std::string inner;
    // The pointwise kernel fused into this scan's level loop (fuse_scan_consumers), if any.
    std::optional<CudaKernelEmitter> consumer;
    if (kidx_ + 1 < static_cast<int>(s_.kernels.size()) && s_.kernels[kidx_ + 1].fused_into == kidx_)
      consumer.emplace(s_, kidx_ + 1, d_, prefix_, dialect_);
    if (scan) {
      const Expr& e = *k_.value;
      std::string body = scan_level(p, ind + 1);
      if (consumer) {
        std::map<std::string, std::string> carries;
        for (std::size_t c = 0; c < k_.outputs.size(); ++c) carries[k_.outputs[c]] = carry(static_cast<int>(c));
        body += consumer->fused_level(carries, ind + 1);
      }
      for (std::size_t c = 0; c < e.init.size(); ++c)
        inner += fmt::format("{}{} c{} = {};\n", pad(ind), ctype(e.init[c].dtype()), c, literal(e.init[c], dialect_));
      inner += fmt::format("{}for (ff_index st = 0; st < {} - {}; ++st) {{\n{}{}", pad(ind), hi(e.dim), lo(e.dim),
                           pad(ind + 1), level(e)) + body + pad(ind) + "}\n";
    } else {
      store_value(p, inner, ind);
    }
    // The run of levels: the statements that do not depend on the level first, then the loop.
    if (launch.rows_per_thread > 1) {
      const std::string& level = var(grid[grid.size() - 2]);
      const HoistedLoopBody split = hoist_loop_invariants(inner, level);
      inner = split.invariant +
              fmt::format("{0}#pragma unroll\n{0}for (ff_index {1} = ff_run; {1} < ff_run + {2} && {1} < {3}; ++{1}) {{\n",
                          pad(ind), level, launch.rows_per_thread, hi(grid[grid.size() - 2])) +
              split.body + pad(ind) + "}\n";
    }

    // The body, whose signature follows once it is known which words of ff_call it reads.
    std::string code = bounds();
    if (consumer) code += consumer->bounds();
    const bool raises_errors = uses_error_ || (consumer && consumer->uses_error());
    code += d_.text;
    code += raises_errors ? "  std::int32_t err = 0;\n" : "";
    // A thread's point: x from its block and thread, the row along y and z from its block plus
    // the first row of the launch's piece (ff_y0, ff_z0: cuda_grid). No loop: a grid-stride loop
    // ran once per thread, yet its strength-reduced increments and NVRTC's unrolled trip count
    // (a 64-bit division) were set up in every thread and doubled the registers (docs/cuda.md).
    std::string in_grid;
    if (grid.empty()) {
      in_grid = "blockIdx.x == 0 && threadIdx.x == 0";
    } else {
      const Dimension& x = grid.back();
      // A coordinate in ff_index: its box fits it, and a thread's point passes the box's end by
      // less than a block.
      code += fmt::format("  const ff_index {} = {} + static_cast<ff_index>(blockIdx.x) * static_cast<ff_index>(blockDim.x) + "
                          "static_cast<ff_index>(threadIdx.x);\n", var(x), lo(x));
      in_grid = fmt::format("{} < {}", var(x), hi(x));
      const auto row = [&](const char* type, const std::string& v, const std::string& from, const std::string& to,
                           const char* first, char axis) {
        code += fmt::format("  const {0} {1} = static_cast<{0}>({2} + {3} + blockIdx.{4});\n", type, v, from, first, axis);
        in_grid += fmt::format(" && {} < {}", v, to);
      };
      if (grid.size() > 1) {
        const Dimension& y = grid[grid.size() - 2];
        if (launch.rows_per_thread == 1) {
          row("ff_index", var(y), lo(y), hi(y), "ff_y0", 'y');
        } else {  // the first level of the thread's run
          code += fmt::format("  const ff_index ff_run = static_cast<ff_index>({} + (ff_y0 + blockIdx.y) * {});\n", lo(y),
                              launch.rows_per_thread);
          in_grid += fmt::format(" && ff_run < {}", hi(y));
        }
      }
      // The dimensions beyond x and y (K of a 3-D kernel) go along z. More than one (a kernel over
      // four or more dimensions) are flattened, slowest first, and split once per thread (their
      // product may pass 32 bits where each coordinate does not).
      if (grid.size() == 3) row("ff_index", var(grid[0]), lo(grid[0]), hi(grid[0]), "ff_z0", 'z');
      if (grid.size() > 3) {
        std::string rest = "std::int64_t(1)";
        for (std::size_t a = 0; a + 2 < grid.size(); ++a) rest += fmt::format(" * ({} - {})", hi(grid[a]), lo(grid[a]));
        row("std::int64_t", "rz", "0", rest, "ff_z0", 'z');
      }
    }
    code += fmt::format("  if ({}) {{\n", in_grid);
    if (grid.size() > 3) {
      code += "    std::int64_t q = rz;\n";
      for (std::size_t a = grid.size() - 2; a-- > 0;) {
        const Dimension& d = grid[a];
        if (a == 0) {
          code += fmt::format("    const ff_index {} = static_cast<ff_index>({} + q);\n", var(d), lo(d));
        } else {
          code += fmt::format("    const ff_index {0} = static_cast<ff_index>({1} + q % ({2} - {1}));\n    q /= {2} - {1};\n",
                              var(d), lo(d), hi(d));
        }
      }
    }
    // The point's code in its own block, inside the test of the grid.
    code += "    {\n" + inner + "    }\n  }\n";
    if (raises_errors)
      code += fmt::format("  if (err) atomicOr(reinterpret_cast<unsigned int*>({}), static_cast<unsigned int>(err));\n",
                          word({CallWord::Kind::error}));
    launch.raises_errors = raises_errors;
    launch.max_shift = std::max(max_shift_, consumer ? consumer->max_shift() : 0);
    launch.params = d_.words;
    // The words the kernel reads, by value: each thread reads them from the constant bank, where
    // through a pointer to a descriptor in device memory every thread loaded them, two loads
    // deep (the buffers' array, then a buffer's stride), before its first field load.
    const std::size_t bytes = sizeof(ff_word) * launch.params.size() + 2 * sizeof(std::int64_t);
    if (bytes > cuda_max_parameter_bytes)
      throw CompileError(fmt::format("program '{}': kernel {} '{}' reads {} values of its call ({} bytes of kernel "
                                     "parameters), more than CUDA passes to a kernel ({} bytes); split the "
                                     "computation into smaller statements",
                                     s_.program.name, kidx_, k_.name, launch.params.size(), bytes,
                                     cuda_max_parameter_bytes));
    const std::string params = launch.symbol + "_params";
    // The body is a template over the index types (Dialect::index_type): each kernel has a 64-bit
    // and a 32-bit entry point, and the runtime launches the 32-bit one when the call fits.
    launch.narrow_symbol = launch.symbol + "_i32";
    const auto entry = [&](const std::string& symbol, const char* index, const char* offset) {
      return fmt::format("extern \"C\" __global__ void __launch_bounds__({0}) {1}(const {2} ff_p, std::int64_t ff_y0, "
                         "std::int64_t ff_z0) {{\n  {3}_body<{4}, {5}>(ff_p, ff_y0, ff_z0);\n}}\n",
                         launch.block_x, symbol, params, launch.symbol, index, offset);
    };
    code = fmt::format("// kernel {}: '{}' ({}{})\nstruct {} {{\n  ff_word w[{}];\n}};\n"
                       "template <class ff_index, class ff_offset>\n"
                       "__device__ __forceinline__ void {}_body(const {}& ff_p, std::int64_t ff_y0, std::int64_t ff_z0) {{\n",
                       kidx_, k_.name, scan ? "scan" : "pointwise",
                       consumer ? fmt::format(", with kernel {} '{}' in its level loop", kidx_ + 1, s_.kernels[kidx_ + 1].name)
                                : "",
                       params, std::max<std::size_t>(launch.params.size(), 1), launch.symbol, params) +
           code + "}\n" + entry(launch.symbol, "std::int64_t", "std::int64_t") +
           entry(launch.narrow_symbol, "std::int32_t", "std::int32_t");
    return {code + "\n", launch};
  }

  // This kernel's code at one level of the scan it is fused into, where the scan's thread is:
  // at the points of its own box, which the scan's covers (compute_extents checks). The scan's
  // results at the point are its carries.
  std::string fused_level(const std::map<std::string, std::string>& carries, int ind) {
    registers_ = carries;
    memo_.assign(1, {});
    const Point p = loop_point();
    std::string inner, in_box;
    for (const auto& d : loop_dims_)
      in_box += fmt::format("{}{} <= {} && {} < {}", in_box.empty() ? "" : " && ", lo(d), var(d), var(d), hi(d));
    store_value(p, inner, ind + 1);
    return fmt::format("{}if ({}) {{  // kernel {} '{}'\n{}{}}}\n", pad(ind), in_box, kidx_, k_.name, inner, pad(ind));
  }

 private:
  std::string prefix_;
};

}  // namespace

std::string cuda_preamble() {
  // The values of std::numeric_limits, bit for bit (the reference and the CPU use those).
  return R"(#include <fieldflow/abi.h>

template <class T> struct ff_limits;
template <> struct ff_limits<bool> {
  static __device__ bool lowest() { return false; }
  static __device__ bool max() { return true; }
};
template <> struct ff_limits<std::int32_t> {
  static __device__ std::int32_t lowest() { return -2147483647 - 1; }
  static __device__ std::int32_t max() { return 2147483647; }
};
template <> struct ff_limits<std::int64_t> {
  static __device__ std::int64_t lowest() { return -9223372036854775807LL - 1; }
  static __device__ std::int64_t max() { return 9223372036854775807LL; }
};
template <> struct ff_limits<float> {
  static __device__ float lowest() { return -0x1.fffffep+127f; }
  static __device__ float max() { return 0x1.fffffep+127f; }
  static __device__ float infinity() { return __int_as_float(0x7f800000); }
  static __device__ float quiet_NaN() { return __int_as_float(0x7fc00000); }
};
template <> struct ff_limits<double> {
  static __device__ double lowest() { return -0x1.fffffffffffffp+1023; }
  static __device__ double max() { return 0x1.fffffffffffffp+1023; }
  static __device__ double infinity() { return __longlong_as_double(0x7ff0000000000000LL); }
  static __device__ double quiet_NaN() { return __longlong_as_double(0x7ff8000000000000LL); }
};

)";
}

CudaSource generate_cuda_source(const ir::Schedule& s, const CudaCodegenOptions& options) {
  const std::string& prefix = options.symbol_prefix;
  const bool identifier = !prefix.empty() && !std::isdigit(static_cast<unsigned char>(prefix[0])) &&
                          sanitize(prefix) == prefix;
  FIELDFLOW_ASSERT(identifier, "symbol prefix '" + prefix + "' does not start a C identifier");
  CudaSource out;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    // Column groups (fuse_columns) are a CPU schedule: the pipeline does not form them for CUDA.
    FIELDFLOW_ASSERT(s.kernels[k].column_group < 0, "a column group in a schedule lowered for CUDA");
    if (s.kernels[k].fused_into >= 0) continue;  // generated inside its scan's kernel
    Decls d;
    const Dialect& dialect = options.race_check ? cuda_race_check_dialect() : cuda_dialect();
    auto [code, launch] = CudaKernelEmitter(s, static_cast<int>(k), d, prefix, dialect).emit();
    out.body += code;
    out.launches.push_back(std::move(launch));
  }
  out.source = fmt::format("// Generated by fieldflow from program '{}' (layout {}, cuda). Do not edit.\n", s.program.name,
                           to_string(s.layout)) +
               cuda_preamble() + out.body;
  return out;
}

CudaGrid cuda_grid(const CudaLaunch& launch, const std::int64_t* dom) {
  auto extent = [&](int axis) { return dom[2 * axis + 1] - dom[2 * axis]; };
  // Like the CPU kernel's early return: an empty box along any loop dimension is no work.
  for (int a = 0; a < launch.loop_dims; ++a)
    if (extent(a) <= 0) return {};
  std::int64_t z = 1;
  for (int a : launch.z_axes) z *= extent(a);
  const std::int64_t x = launch.x_axis < 0 ? 1 : extent(launch.x_axis);
  const std::int64_t y = launch.y_axis < 0 ? 1 : extent(launch.y_axis);
  return {(x + launch.block_x - 1) / launch.block_x, (y + launch.rows_per_thread - 1) / launch.rows_per_thread, z};
}

}  // namespace fieldflow::codegen
