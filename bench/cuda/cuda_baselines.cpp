// The host side of the hand-written CUDA baselines (see cuda_baselines.h): the kernels' parameter
// structs filled from an instance, and their launch grids.
#include "cuda_baselines.h"

#include <fmt/format.h>

#include <climits>
#include <cstdint>
#include <cstring>

#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"

namespace fieldflow::bench {

namespace {

#define FF_BASELINE_PARAMS_ONLY
#include "baselines.cu"
#undef FF_BASELINE_PARAMS_ONLY

// Levels one thread of an unstructured kernel runs through (its neighbour row and weights are
// loaded once per run): long enough to amortise them, short enough that a 40,000-cell mesh x 80
// levels still gives about ten times more threads than an H100/H200 holds at once.
constexpr int levels_per_thread = 8;

unsigned blocks(std::int64_t n, unsigned per_block) {
  return static_cast<unsigned>((n + per_block - 1) / per_block);
}

int to_int(std::int64_t v, const std::string& program, const std::string& what) {
  if (v < 0 || v > INT_MAX)
    throw ArgumentError(fmt::format("CUDA baseline {}: {} is {}, expected 0..{} (the kernels index with 32 bits)",
                                    program, what, v, INT_MAX));
  return static_cast<int>(v);
}

// A field the kernel reads or writes: its memory at index (0, 0[, 0]) and its strides, checked
// to be in the GPU's layout (unit stride along the first, horizontal, dimension) and small enough
// for 32-bit indexing.
struct FieldAt {
  void* at0 = nullptr;
  int stride[3] = {0, 0, 0};
};

FieldAt field_at(const std::string& program, const examples::ExampleInstance& inst, const CudaBaselineMemory& memory,
                 const std::string& name) {
  auto it = inst.fields.find(name);
  if (it == inst.fields.end())
    throw ArgumentError(fmt::format("CUDA baseline {}: the instance has no field '{}'", program, name));
  const Field& f = it->second;
  if (f.dtype() != DType::float64)
    throw ArgumentError(fmt::format("CUDA baseline {}: field '{}' is {}, expected float64", program, name,
                                    to_string(f.dtype())));
  if (f.strides()[0] != 1)
    throw ArgumentError(fmt::format("CUDA baseline {}: field '{}' has stride {} along {}, expected 1 (the GPU's "
                                    "layout, horizontal_fastest)", program, name, f.strides()[0],
                                    f.dims()[0].name));
  to_int(static_cast<std::int64_t>(f.span_bytes() / sizeof(double)), program, fmt::format("the span of '{}'", name));
  FieldAt r;
  std::int64_t offset = 0;
  for (std::size_t a = 0; a < f.dims().size(); ++a) {
    offset -= f.origin()[a] * f.strides()[a];
    r.stride[a] = to_int(f.strides()[a], program, fmt::format("a stride of '{}'", name));
  }
  r.at0 = static_cast<double*>(memory.field(name)) + offset;
  return r;
}

const std::int32_t* four_wide_table(const std::string& program, const examples::ExampleInstance& inst,
                                     const CudaBaselineMemory& memory, const std::string& name) {
  if (!inst.mesh) throw ArgumentError(fmt::format("CUDA baseline {}: the instance has no mesh", program));
  const NeighborTable& t = inst.mesh->table(name);
  if (t.max_neighbors != 4 || t.source_stride() != 4 || t.neighbor_stride() != 1)
    throw ArgumentError(fmt::format("CUDA baseline {}: table {} has {} neighbours per row, strides ({}, {}); expected "
                                    "4 in C order (4, 1): the kernels read a row as one int4",
                                    program, name, t.max_neighbors, t.source_stride(), t.neighbor_stride()));
  const std::int32_t* entries = memory.table(name);
  if (reinterpret_cast<std::uintptr_t>(entries) % 16 != 0)
    throw ArgumentError(fmt::format("CUDA baseline {}: table {}'s entries at {} are not 16-byte aligned, as the "
                                    "kernels' int4 row loads need", program, name, static_cast<const void*>(entries)));
  return entries;
}

int int_scalar(const std::string& program, const examples::ExampleInstance& inst, const std::string& name) {
  auto it = inst.scalars.find(name);
  if (it == inst.scalars.end())
    throw ArgumentError(fmt::format("CUDA baseline {}: the instance has no scalar '{}'", program, name));
  return to_int(it->second.as_int(), program, name);
}

template <class Params>
CudaBaselineLaunch launch_of(const char* kernel, const Params& p, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                             unsigned by) {
  CudaBaselineLaunch l;
  l.kernel = kernel;
  l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
  l.block[0] = bx, l.block[1] = by, l.block[2] = 1;
  l.params.resize(sizeof(Params));
  std::memcpy(l.params.data(), &p, sizeof(Params));
  return l;
}

CudaBaselineLaunch plan_hdiff(const examples::ExampleInstance& inst, const CudaBaselineMemory& m) {
  const std::string prog = "hdiff";
  const FieldAt in = field_at(prog, inst, m, "in"), coeff = field_at(prog, inst, m, "coeff"),
                out = field_at(prog, inst, m, "out");
  ff_bl_hdiff_params p{};
  p.in = static_cast<const double*>(in.at0);
  p.coeff = static_cast<const double*>(coeff.at0);
  p.out = static_cast<double*>(out.at0);
  p.nx = int_scalar(prog, inst, "nx"), p.ny = int_scalar(prog, inst, "ny"), p.nk = int_scalar(prog, inst, "nk");
  p.in_j = in.stride[1], p.in_k = in.stride[2];
  p.coeff_j = coeff.stride[1], p.coeff_k = coeff.stride[2];
  p.out_j = out.stride[1], p.out_k = out.stride[2];
  return launch_of("ff_bl_hdiff", p, blocks(p.nx, 32), blocks(p.ny, 8), static_cast<unsigned>(p.nk), 32, 8);
}

CudaBaselineLaunch plan_vadv(const examples::ExampleInstance& inst, const CudaBaselineMemory& m) {
  const std::string prog = "vadv";
  const FieldAt us = field_at(prog, inst, m, "u_stage"), w = field_at(prog, inst, m, "wcon"),
                up = field_at(prog, inst, m, "u_pos"), ut = field_at(prog, inst, m, "utens"),
                uts = field_at(prog, inst, m, "utens_stage"), out = field_at(prog, inst, m, "out");
  ff_bl_vadv_params p{};
  p.u_stage = static_cast<const double*>(us.at0);
  p.wcon = static_cast<const double*>(w.at0);
  p.u_pos = static_cast<const double*>(up.at0);
  p.utens = static_cast<const double*>(ut.at0);
  p.utens_stage = static_cast<const double*>(uts.at0);
  p.out = static_cast<double*>(out.at0);
  p.cp = static_cast<double*>(m.scratch);
  p.dtr = inst.scalars.at("dtr_stage").as_double();
  p.nx = int_scalar(prog, inst, "nx"), p.ny = int_scalar(prog, inst, "ny"), p.nk = int_scalar(prog, inst, "nk");
  to_int(static_cast<std::int64_t>(p.nx) * p.ny * p.nk, prog, "nx * ny * nk");
  p.us_j = us.stride[1], p.us_k = us.stride[2], p.w_j = w.stride[1], p.w_k = w.stride[2];
  p.up_j = up.stride[1], p.up_k = up.stride[2], p.ut_j = ut.stride[1], p.ut_k = ut.stride[2];
  p.uts_j = uts.stride[1], p.uts_k = uts.stride[2], p.out_j = out.stride[1], p.out_k = out.stride[2];
  if (!p.cp && p.nx > 0 && p.ny > 0 && p.nk > 0)
    throw ArgumentError("CUDA baseline vadv: no scratch given (cuda_baseline_scratch_bytes says how much)");
  // 64 columns per block: 256 x 256 columns make 1024 blocks, several per SM.
  return launch_of("ff_bl_vadv", p, blocks(p.nx, 64), static_cast<unsigned>(p.ny), 1, 64, 1);
}

CudaBaselineLaunch plan_nabla4(const examples::ExampleInstance& inst, const CudaBaselineMemory& m) {
  const std::string prog = "nabla4";
  const FieldAt u = field_at(prog, inst, m, "u_vert"), v = field_at(prog, inst, m, "v_vert"),
                tu = field_at(prog, inst, m, "tang_weight_u"), tv = field_at(prog, inst, m, "tang_weight_v"),
                nu = field_at(prog, inst, m, "norm_weight_u"), nv = field_at(prog, inst, m, "norm_weight_v"),
                z = field_at(prog, inst, m, "z_nabla2_e"), l1 = field_at(prog, inst, m, "inv_vert_vert_length"),
                l2 = field_at(prog, inst, m, "inv_primal_edge_length"), out = field_at(prog, inst, m, "z_nabla4_e2");
  ff_bl_nabla4_params p{};
  p.u_vert = static_cast<const double*>(u.at0);
  p.v_vert = static_cast<const double*>(v.at0);
  p.tang_u = static_cast<const double*>(tu.at0);
  p.tang_v = static_cast<const double*>(tv.at0);
  p.norm_u = static_cast<const double*>(nu.at0);
  p.norm_v = static_cast<const double*>(nv.at0);
  p.z_nabla2_e = static_cast<const double*>(z.at0);
  p.inv_vert_vert_length = static_cast<const double*>(l1.at0);
  p.inv_primal_edge_length = static_cast<const double*>(l2.at0);
  p.out = static_cast<double*>(out.at0);
  p.e2c2v = four_wide_table(prog, inst, m, "E2C2V");
  p.n_edges = int_scalar(prog, inst, "n_edges"), p.nk = int_scalar(prog, inst, "nk");
  p.levels_per_thread = levels_per_thread;
  p.u_k = u.stride[1], p.v_k = v.stride[1], p.z_k = z.stride[1], p.out_k = out.stride[1];
  p.w_slot_tu = tu.stride[1], p.w_slot_tv = tv.stride[1], p.w_slot_nu = nu.stride[1], p.w_slot_nv = nv.stride[1];
  return launch_of("ff_bl_nabla4", p, blocks(p.n_edges, 128), blocks(p.nk, levels_per_thread), 1, 128, 1);
}

CudaBaselineLaunch plan_c2e2co_sum(const examples::ExampleInstance& inst, const CudaBaselineMemory& m) {
  const std::string prog = "c2e2co_sum";
  const FieldAt in = field_at(prog, inst, m, "in"), w = field_at(prog, inst, m, "weights"),
                out = field_at(prog, inst, m, "out");
  ff_bl_c2e2co_params p{};
  p.in = static_cast<const double*>(in.at0);
  p.weights = static_cast<const double*>(w.at0);
  p.out = static_cast<double*>(out.at0);
  p.c2e2co = four_wide_table(prog, inst, m, "C2E2CO");
  p.n_cells = int_scalar(prog, inst, "n_cells"), p.nk = int_scalar(prog, inst, "nk");
  p.levels_per_thread = levels_per_thread;
  p.in_k = in.stride[1], p.w_slot = w.stride[1], p.out_k = out.stride[1];
  return launch_of("ff_bl_c2e2co_sum", p, blocks(p.n_cells, 128), blocks(p.nk, levels_per_thread), 1, 128, 1);
}

struct Entry {
  const char* name;
  CudaBaselineLaunch (*plan)(const examples::ExampleInstance&, const CudaBaselineMemory&);
};
constexpr Entry entries[] = {
    {"hdiff", plan_hdiff}, {"vadv", plan_vadv}, {"nabla4", plan_nabla4}, {"c2e2co_sum", plan_c2e2co_sum}};

}  // namespace

bool has_cuda_baseline(const std::string& program) {
  for (const auto& e : entries)
    if (program == e.name) return true;
  return false;
}

std::size_t cuda_baseline_scratch_bytes(const std::string& program, const examples::ExampleInstance& inst) {
  if (program != "vadv") return 0;
  const auto n = [&](const char* s) { return static_cast<std::size_t>(int_scalar(program, inst, s)); };
  return n("nx") * n("ny") * n("nk") * sizeof(double);
}

CudaBaselineLaunch plan_cuda_baseline(const std::string& program, const examples::ExampleInstance& inst,
                                      const CudaBaselineMemory& memory) {
  for (const auto& e : entries)
    if (program == e.name) {
      CudaBaselineLaunch l = e.plan(inst, memory);
      if (l.grid[1] > 65535 || l.grid[2] > 65535)
        throw ArgumentError(fmt::format("CUDA baseline {}: grid {} x {} x {} exceeds 65535 blocks along y or z",
                                        program, l.grid[0], l.grid[1], l.grid[2]));
      return l;
    }
  throw ArgumentError(fmt::format("no hand-written CUDA baseline for program '{}': expected hdiff, vadv, nabla4 or "
                                  "c2e2co_sum", program));
}

}  // namespace fieldflow::bench
