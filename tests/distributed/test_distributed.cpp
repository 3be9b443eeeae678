// Distributed calls under mpirun (-np 1, 2, 3, 4): every built-in program on a Cartesian grid
// (periodic or not) and on the torus and bounded meshes, several time steps, compared bit for bit
// with the same program run on one rank over the global fields; halos received are exactly those
// the reads need; bad input is the same typed error on every rank; pack buffers follow the memory
// modes. Halo points start as NaN on every rank, so a point the exchange misses shows up.
#include "fieldflow/distributed.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <set>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"
#include "fieldflow/examples.h"
#include "distributed/distributed_differential.h"
#include "distributed/halo_exchange.h"

namespace fieldflow::distributed {
namespace {

using fuzz::world_rank;
using fuzz::world_size;

constexpr double nan = std::numeric_limits<double>::quiet_NaN();
const std::uint64_t seed = 20261201;

// Bits of every element of `a` and `b` over the box [lo, hi) (per axis, absolute) that differ.
std::int64_t differing(const Field& a, const Field& b, const std::vector<std::int64_t>& lo,
                       const std::vector<std::int64_t>& hi) {
  std::int64_t bad = 0;
  b.for_each_index([&](const std::vector<std::int64_t>& i) {
    for (std::size_t k = 0; k < i.size(); ++k)
      if (i[k] < lo[k] || i[k] >= hi[k]) return;
    const double x = a.get_as_double(a.offset_of(i)), y = b.get_as_double(b.offset_of(i));
    if (std::bit_cast<std::uint64_t>(x) != std::bit_cast<std::uint64_t>(y)) ++bad;
  });
  return bad;
}

bool is_output(const examples::ExampleInstance& inst, const std::string& name) {
  return std::find(inst.outputs.begin(), inst.outputs.end(), name) != inst.outputs.end();
}

// The time loop's update of the inputs between steps, identical in both runs.
double perturbed(double v, int step) { return 0.5 * v + 0.125 * (step + 1); }

// Gathers the rank's outputs and expects them bitwise equal to the single-rank run's, over the
// global fields (Cartesian: their part on the grid [0, nx) x [0, ny), the domain).
template <class Decomposition>
void expect_outputs_equal(const Decomposition& d, const examples::ExampleInstance& global,
                          const std::map<std::string, Field>& local, int step,
                          std::optional<std::array<std::int64_t, 2>> grid) {
  for (const auto& out : global.outputs) {
    const Field& g = global.fields.at(out);
    Field gathered = g.clone();
    gathered.fill(nan);
    gather(d, local.at(out), gathered);
    std::vector<std::int64_t> lo = g.origin(), hi = g.origin();
    for (std::size_t a = 0; a < lo.size(); ++a) hi[a] += g.shape()[a];
    if (grid)
      for (int a = 0; a < 2; ++a) {
        lo[a] = 0;
        hi[a] = (*grid)[a];
      }
    EXPECT_EQ(differing(g, gathered, lo, hi), 0) << out << " at step " << step << " on rank " << d.rank();
  }
}

// One case: an example, its grid (Cartesian: periodic or not; mesh: torus or bounded), overlap.
struct Case {
  std::string example;
  bool mesh;
  bool wraps;  // periodic grid / torus
  bool overlap;
  std::string name() const {
    return example + (wraps ? (mesh ? "_torus" : "_periodic") : "_bounded") + (overlap ? "_overlap" : "");
  }
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name(); }
std::string case_name(const testing::TestParamInfo<Case>& info) { return info.param.name(); }

std::vector<Case> cases(bool mesh) {
  std::vector<Case> all;
  for (const auto& ex : examples::all_examples())
    if (ex.unstructured == mesh)
      for (bool wraps : {false, true})
        for (bool overlap : {false, true}) all.push_back({ex.name, mesh, wraps, overlap});
  return all;
}

// ---------------------------------------------------------------------------------------------
// Cartesian

class DistributedCartesian : public testing::TestWithParam<Case> {};

TEST_P(DistributedCartesian, EqualsSingleRankBitwiseOverSteps) {
  const Case c = GetParam();
  const bool periodic = c.wraps;
  const examples::Example& ex = examples::example(c.example);
  const examples::ExampleSize size{13, 11, 4};
  examples::ExampleInstance global = ex.make_instance(size, Layout::vertical_fastest, seed);
  CompiledProgram single = compile(ex.program);

  CartesianDecomposition d(MPI_COMM_WORLD, {size.nx, size.ny, periodic, periodic});
  DistributedOptions options;
  options.overlap = c.overlap;
  CompileOptions compiled;
  if (c.overlap) compiled.parallel_threshold = 0;  // the OpenMP path of the generated kernels too
  DistributedProgram program(ex.program, d, compiled, options);
  EXPECT_EQ(program.overlaps(), c.overlap);  // no example reads its output at another point

  // Each rank's fields: the global field's box cut to the rank's block plus 3 points; owned
  // points (and, on a bounded grid, the points beyond its edge) copied, the rest NaN.
  const std::int64_t b[2] = {d.begin(0), d.begin(1)}, e[2] = {d.end(0), d.end(1)}, n[2] = {size.nx, size.ny};
  std::map<std::string, Field> local;
  for (auto& [name, g] : global.fields) {
    std::vector<std::int64_t> shape = g.shape(), origin = g.origin();
    for (int a = 0; a < 2; ++a) {
      const std::int64_t lo = std::max(g.origin()[a], b[a] - 3), hi = std::min(g.origin()[a] + g.shape()[a], e[a] + 3);
      origin[a] = lo;
      shape[a] = hi - lo;
    }
    Field f(g.dims(), g.dtype(), shape, origin, g.layout());
    f.for_each_index([&](const std::vector<std::int64_t>& i) {
      bool owned = true, beyond = false;
      for (int a = 0; a < 2; ++a) {
        owned &= i[a] >= b[a] && i[a] < e[a];
        beyond |= i[a] < 0 || i[a] >= n[a];
      }
      f.set_from_double(f.offset_of(i), owned || (beyond && !periodic) ? g.get_as_double(g.offset_of(i)) : nan);
    });
    local.emplace(name, std::move(f));
  }
  Arguments local_args;
  for (auto& [name, f] : local) local_args.field(name, f);
  for (const auto& [name, s] : global.scalars) local_args.scalar(name, s);
  Arguments global_args = global.arguments();

  // On a periodic grid the single-rank run's halo holds the wrapped values (filled here).
  auto wrap_halo = [&](Field& g) {
    g.for_each_index([&](const std::vector<std::int64_t>& i) {
      std::vector<std::int64_t> w = i;
      for (int a = 0; a < 2; ++a) w[a] = (i[a] % n[a] + n[a]) % n[a];
      if (w == i) return;
      for (int a = 0; a < 2; ++a)
        if (w[a] < g.origin()[a] || w[a] >= g.origin()[a] + g.shape()[a]) return;
      g.set_from_double(g.offset_of(i), g.get_as_double(g.offset_of(w)));
    });
  };

  for (int step = 0; step < 3; ++step) {
    if (periodic)
      for (auto& [name, g] : global.fields) wrap_halo(g);
    single(global_args);
    program(local_args);
    expect_outputs_equal(d, global, local, step, std::array<std::int64_t, 2>{size.nx, size.ny});
    // The next step's inputs: owned points here, every point of the grid there.
    for (auto& [name, g] : global.fields) {
      if (is_output(global, name) || g.dtype() != DType::float64) continue;
      Field& f = local.at(name);
      g.for_each_index([&](const std::vector<std::int64_t>& i) {
        if (i[0] < 0 || i[0] >= n[0] || i[1] < 0 || i[1] >= n[1]) return;
        g.set_from_double(g.offset_of(i), perturbed(g.get_as_double(g.offset_of(i)), step));
        if (i[0] >= b[0] && i[0] < e[0] && i[1] >= b[1] && i[1] < e[1])
          f.set_from_double(f.offset_of(i), perturbed(f.get_as_double(f.offset_of(i)), step));
      });
    }
  }
  EXPECT_EQ(program.exchange_stats().calls, 3u);
}

INSTANTIATE_TEST_SUITE_P(Examples, DistributedCartesian, testing::ValuesIn(cases(false)), case_name);

// ---------------------------------------------------------------------------------------------
// Meshes

class DistributedMesh : public testing::TestWithParam<Case> {};

// A local field: the global field's dims with the location axis cut to the rank's points; owned
// points copied through their global ids, halo points NaN.
Field local_field(const MeshDecomposition& d, const Field& g) {
  std::vector<std::int64_t> shape = g.shape();
  int axis = -1;
  for (std::size_t a = 0; a < g.dims().size(); ++a)
    if (g.dims()[a].kind == DimKind::horizontal) axis = static_cast<int>(a);
  const std::string loc = g.dims()[axis].name;
  shape[axis] = d.local(loc);
  Field f(g.dims(), g.dtype(), shape, g.origin(), g.layout());
  const auto& ids = d.global_ids(loc);
  f.for_each_index([&](const std::vector<std::int64_t>& i) {
    std::vector<std::int64_t> gi = i;
    gi[axis] = ids[i[axis]];
    f.set_from_double(f.offset_of(i), i[axis] < d.owned(loc) ? g.get_as_double(g.offset_of(gi)) : nan);
  });
  return f;
}

TEST_P(DistributedMesh, EqualsSingleRankBitwiseOverSteps) {
  const Case c = GetParam();
  const examples::Example& ex = examples::example(c.example);
  examples::ExampleSize size{8, 7, 3};
  size.bounded = !c.wraps;
  examples::ExampleInstance global = ex.make_instance(size, Layout::vertical_fastest, seed);
  CompiledProgram single = compile(ex.program);

  MeshDecomposition d(MPI_COMM_WORLD, *global.mesh, {ex.program});
  DistributedOptions options;
  options.overlap = c.overlap;
  DistributedProgram program(ex.program, d, {}, options);

  std::map<std::string, Field> local;
  for (auto& [name, g] : global.fields) local.emplace(name, local_field(d, g));
  Arguments local_args;
  for (auto& [name, f] : local) local_args.field(name, f);
  for (const auto& [name, s] : global.scalars) local_args.scalar(name, s);
  for (const auto& t : global.connectivities) local_args.connectivity(t, d.local_mesh().table(t));
  Arguments global_args = global.arguments();

  for (int step = 0; step < 3; ++step) {
    single(global_args);
    program(local_args);
    expect_outputs_equal(d, global, local, step, std::nullopt);
    for (auto& [name, g] : global.fields) {
      if (is_output(global, name) || g.dtype() != DType::float64) continue;
      Field& f = local.at(name);
      g.for_each_index([&](const std::vector<std::int64_t>& i) {
        g.set_from_double(g.offset_of(i), perturbed(g.get_as_double(g.offset_of(i)), step));
      });
      const std::string loc = [&] {
        for (const auto& dim : f.dims())
          if (dim.kind == DimKind::horizontal) return dim.name;
        return std::string();
      }();
      const int axis = f.axis_of(horizontal_dim(loc));
      f.for_each_index([&](const std::vector<std::int64_t>& i) {
        if (i[axis] < d.owned(loc)) f.set_from_double(f.offset_of(i), perturbed(f.get_as_double(f.offset_of(i)), step));
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Examples, DistributedMesh, testing::ValuesIn(cases(true)), case_name);

// ---------------------------------------------------------------------------------------------
// Decompositions and the halo a call exchanges

TEST(CartesianDecomposition, BlocksTileTheGridAndNeighboursAgree) {
  CartesianDecomposition d(MPI_COMM_WORLD, {13, 11, true, false});
  std::int64_t mine[4] = {d.begin(0), d.end(0), d.begin(1), d.end(1)};
  std::vector<std::int64_t> all(4 * static_cast<std::size_t>(d.size()));
  MPI_Allgather(mine, 4, MPI_INT64_T, all.data(), 4, MPI_INT64_T, d.comm());
  std::vector<int> covered(13 * 11, 0);
  for (int r = 0; r < d.size(); ++r)
    for (std::int64_t i = all[4 * r]; i < all[4 * r + 1]; ++i)
      for (std::int64_t j = all[4 * r + 2]; j < all[4 * r + 3]; ++j) ++covered[i * 11 + j];
  for (int c : covered) EXPECT_EQ(c, 1);
  // The east neighbour's block starts where this one ends (wrapping); none beyond the J edges.
  const int east = d.neighbor(1, 0);
  EXPECT_EQ(all[4 * east], d.end(0) % 13);
  if (d.coords()[1] == d.process_grid()[1] - 1) {
    EXPECT_EQ(d.neighbor(0, 1), MPI_PROC_NULL);
  }
}

TEST(MeshDecomposition, OwnedPointsPartitionTheMeshAndTablesMapGlobalIds) {
  const Mesh mesh = make_bounded_mesh(9, 8);
  const examples::Example& ex = examples::example("diffusion_chain");
  MeshDecomposition d(MPI_COMM_WORLD, mesh, {ex.program});
  for (const std::string loc : {"Vertex", "Edge", "Cell"}) {
    std::vector<int> count(static_cast<std::size_t>(mesh.size_of(loc)), 0), total(count.size());
    for (std::int64_t p = 0; p < d.owned(loc); ++p) ++count[d.global_ids(loc)[p]];
    MPI_Allreduce(count.data(), total.data(), static_cast<int>(count.size()), MPI_INT, MPI_SUM, d.comm());
    for (int t : total) EXPECT_EQ(t, 1) << loc;
    for (std::int64_t p = d.owned(loc); p < d.local(loc); ++p) EXPECT_NE(d.owners(loc)[p], d.rank());
  }
  // Complete local rows are the global rows, renumbered.
  for (const auto& [name, t] : d.local_mesh().tables) {
    const NeighborTable& g = mesh.table(name);
    const auto& rows = d.complete_rows(name);
    for (std::int64_t i = 0; i < t.n_source; ++i) {
      if (!rows[i]) continue;
      for (int k = 0; k < t.max_neighbors; ++k) {
        const std::int32_t q = t(i, k), gq = g(d.global_ids(t.source)[i], k);
        EXPECT_EQ(q < 0 ? -1 : d.global_ids(t.target)[q], gq) << name;
      }
    }
  }
}

// laplacian reads one point around the block (its bounding box, corners included); vadv reads
// wcon at I + 1 only: one column on the east side.
TEST(DistributedCartesian, ReceivesExactlyTheHaloTheReadsNeed) {
  const examples::ExampleSize size{13, 11, 4};
  CartesianDecomposition d(MPI_COMM_WORLD, {size.nx, size.ny, true, true});
  const std::int64_t bi = d.end(0) - d.begin(0), bj = d.end(1) - d.begin(1);
  for (const std::string name : {"laplacian", "vadv"}) {
    const examples::Example& ex = examples::example(name);
    examples::ExampleInstance global = ex.make_instance(size, Layout::vertical_fastest, seed);
    std::map<std::string, Field> local;
    Arguments args;
    for (auto& [fname, g] : global.fields) {
      std::vector<std::int64_t> shape = g.shape(), origin = g.origin();
      for (int a = 0; a < 2; ++a) {
        origin[a] = d.begin(a) - 2;
        shape[a] = d.end(a) - d.begin(a) + 4;
      }
      local.emplace(fname, Field(g.dims(), g.dtype(), shape, origin, g.layout()));
    }
    for (auto& [fname, f] : local) args.field(fname, f);
    for (const auto& [sname, s] : global.scalars) args.scalar(sname, s);
    DistributedProgram program(ex.program, d);
    program(args);
    const auto& received = program.received_elements();
    if (name == "laplacian") {
      ASSERT_EQ(received.size(), 1u);
      EXPECT_EQ(received.at("in"), ((bi + 2) * (bj + 2) - bi * bj) * size.nk);
    } else {
      ASSERT_EQ(received.size(), 1u);
      EXPECT_EQ(received.at("wcon"), bj * size.nk);
    }
  }
}

// diffusion_chain reads u at the vertices of the edges around each owned vertex, and inv_len at
// those edges: computed here from the global tables by plain loops.
TEST(DistributedMesh, ReceivesExactlyTheHaloTheReadsNeed) {
  const examples::Example& ex = examples::example("diffusion_chain");
  examples::ExampleSize size{9, 8, 3};
  examples::ExampleInstance global = ex.make_instance(size, Layout::vertical_fastest, seed);
  const Mesh& mesh = *global.mesh;
  MeshDecomposition d(MPI_COMM_WORLD, mesh, {ex.program});
  std::set<std::int64_t> owned(d.global_ids("Vertex").begin(), d.global_ids("Vertex").begin() + d.owned("Vertex"));
  std::set<std::int64_t> owned_edges(d.global_ids("Edge").begin(), d.global_ids("Edge").begin() + d.owned("Edge"));
  std::set<std::int64_t> halo, halo_edges;
  for (const auto v : owned)
    for (int k = 0; k < 6; ++k)
      if (const auto edge = mesh.table("V2E")(v, k); edge >= 0) {
        if (!owned_edges.count(edge)) halo_edges.insert(edge);
        for (int s = 0; s < 2; ++s)
          if (!owned.count(mesh.table("E2V")(edge, s))) halo.insert(mesh.table("E2V")(edge, s));
      }
  std::map<std::string, Field> local;
  Arguments args;
  for (auto& [name, g] : global.fields) local.emplace(name, local_field(d, g));
  for (auto& [name, f] : local) args.field(name, f);
  for (const auto& [name, s] : global.scalars) args.scalar(name, s);
  for (const auto& t : global.connectivities) args.connectivity(t, d.local_mesh().table(t));
  DistributedProgram program(ex.program, d);
  program(args);
  const auto& received = program.received_elements();
  auto got = [&](const std::string& f) { return received.count(f) ? received.at(f) : 0; };
  EXPECT_EQ(got("u"), static_cast<std::int64_t>(halo.size()) * size.nk);
  EXPECT_EQ(got("inv_len"), static_cast<std::int64_t>(halo_edges.size()));
  // Nothing else is read outside owned points (sign: at owned vertices only).
  EXPECT_EQ(received.size(), (halo.empty() ? 0u : 1u) + (halo_edges.empty() ? 0u : 1u));
  if (world_size() > 1) {
    EXPECT_FALSE(halo.empty());
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input: the same typed error on every rank

TEST(DistributedErrors, DecompositionsThatDifferBetweenRanks) {
  const std::int64_t nx = world_rank() == world_size() - 1 ? 14 : 13;
  try {
    CartesianDecomposition d(MPI_COMM_WORLD, {nx, 11, false, false});
    if (world_size() > 1) ADD_FAILURE() << "no error on rank " << world_rank();
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("differs between ranks"), std::string::npos) << e.what();
  }
  const Mesh a = make_torus_mesh(6, 6), b = make_torus_mesh(6, 7);
  if (world_size() > 1) {
    EXPECT_THROW(MeshDecomposition(MPI_COMM_WORLD, world_rank() == 0 ? a : b, {}), ArgumentError);
  }
}

TEST(DistributedErrors, FieldWithoutTheHaloTheProgramReads) {
  const examples::Example& ex = examples::example("lap_of_lap");
  const examples::ExampleSize size{13, 11, 4};
  CartesianDecomposition d(MPI_COMM_WORLD, {size.nx, size.ny, true, true});
  DistributedProgram program(ex.program, d);
  // The last rank's input has a halo of 1; lap_of_lap reads 2.
  const std::int64_t halo = d.rank() == d.size() - 1 ? 1 : 2;
  const std::vector<Dimension> ijk{horizontal_dim("I"), horizontal_dim("J"), vertical_dim("K")};
  Field in(ijk, DType::float64, {d.end(0) - d.begin(0) + 2 * halo, d.end(1) - d.begin(1) + 2 * halo, size.nk},
           {d.begin(0) - halo, d.begin(1) - halo, 0});
  Field out(ijk, DType::float64, {d.end(0) - d.begin(0), d.end(1) - d.begin(1), size.nk}, {d.begin(0), d.begin(1), 0});
  Arguments args;
  args.field("in", in).field("out", out).scalar("nx", 13).scalar("ny", 11).scalar("nk", 4);
  try {
    program(args);
    ADD_FAILURE() << "no error on rank " << d.rank();
  } catch (const DomainError& e) {
    EXPECT_NE(std::string(e.what()).find("'in'"), std::string::npos) << e.what();
  }
  // The same instance then runs once every rank gives the halo.
  Field good(ijk, DType::float64, {d.end(0) - d.begin(0) + 4, d.end(1) - d.begin(1) + 4, size.nk},
             {d.begin(0) - 2, d.begin(1) - 2, 0});
  good.fill(1.0);
  Arguments fixed;
  fixed.field("in", good).field("out", out).scalar("nx", 13).scalar("ny", 11).scalar("nk", 4);
  program(fixed);
  EXPECT_EQ(out.at<double>({d.begin(0), d.begin(1), 0}), 0.0);  // the biharmonic of a constant
}

// The last rank's output has one level too few: that rank's own check of its call refuses it. The
// other ranks, whose calls are fine, must not have run theirs by then (every rank checks every
// piece before any runs).
TEST(DistributedErrors, ACallOneRankRefusesRunsOnNoRank) {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder pb("doubled");
  Expr a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("out", {I, J, K}, DType::float64);
  Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("s", 2.0 * a, {o}, {{K, 0, nk}, {I, 0, ni}, {J, 0, nj}});
  const ir::Program program = pb.build();
  CartesianDecomposition d(MPI_COMM_WORLD, {13, 11, false, false});
  DistributedProgram step(program, d);
  const std::int64_t levels = 4, out_levels = d.rank() == d.size() - 1 ? levels - 1 : levels;
  const std::vector<std::int64_t> shape{d.end(0) - d.begin(0), d.end(1) - d.begin(1)}, origin{d.begin(0), d.begin(1), 0};
  Field in({I, J, K}, DType::float64, {shape[0], shape[1], levels}, origin);
  Field out({I, J, K}, DType::float64, {shape[0], shape[1], out_levels}, origin);
  in.fill(1.0);
  out.fill(-7.0);
  Arguments args;
  args.field("a", in).field("out", out).scalar("ni", 13).scalar("nj", 11).scalar("nk", static_cast<std::int32_t>(levels));
  try {
    step(args);
    ADD_FAILURE() << "no error on rank " << d.rank();
  } catch (const DomainError& e) {
    EXPECT_NE(std::string(e.what()).find("'out'"), std::string::npos) << e.what();
  }
  std::int64_t changed = 0;
  out.for_each_index([&](const std::vector<std::int64_t>& i) { changed += out.get_as_double(out.offset_of(i)) != -7.0; });
  EXPECT_EQ(changed, 0) << "rank " << d.rank() << " ran a call another rank refused";
}

// Only rank 0 computes (I = 4, its block is [0, 5)), and it reads its eastern neighbour's points one past the
// grid's northern edge; that neighbour reads nothing, but its message carries those points, so
// its field must hold them: a DomainError on every rank when it does not.
TEST(DistributedErrors, FieldWithoutThePointsPastTheEdgeItSends) {
  if (world_size() == 1) GTEST_SKIP() << "one rank sends nothing";
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder pb("north_east");
  Expr a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
  Expr nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("s", a(I + 1)(J + 1), {o}, {{K, 0, nk}, {I, 4, 5}, {J, 0, nj}});
  const ir::Program program = pb.build();
  const std::int64_t ni = 5 * world_size(), nj_value = 6;
  CartesianDecomposition d(MPI_COMM_WORLD, {ni, nj_value, false, false}, {world_size(), 1});
  DistributedProgram distributed(program, d);
  auto call = [&](std::int64_t past_the_edge) {
    Field fa({I, J, K}, DType::float64, {d.end(0) - d.begin(0) + 2, nj_value + past_the_edge, 2}, {d.begin(0), 0, 0});
    Field fo({I, J, K}, DType::float64, {d.end(0) - d.begin(0), nj_value, 2}, {d.begin(0), 0, 0});
    fa.fill(1.0);
    distributed(Arguments().field("a", fa).field("o", fo).scalar("nj", static_cast<std::int32_t>(nj_value)).scalar("nk", 2));
  };
  try {
    call(d.rank() == 0 ? 1 : 0);  // rank 0 holds what it reads; the others not what they send
    ADD_FAILURE() << "no error on rank " << d.rank();
  } catch (const DomainError& e) {
    EXPECT_NE(std::string(e.what()).find("its halo exchange carries"), std::string::npos) << e.what();
  }
  call(1);  // then every rank holds them
}

TEST(DistributedErrors, MeshFieldWithoutItsHalo) {
  if (world_size() == 1) GTEST_SKIP() << "one rank has no halo";
  const examples::Example& ex = examples::example("c2e2co_sum");
  examples::ExampleSize size{8, 7, 3};
  examples::ExampleInstance global = ex.make_instance(size, Layout::vertical_fastest, seed);
  MeshDecomposition d(MPI_COMM_WORLD, *global.mesh, {ex.program});
  DistributedProgram program(ex.program, d);
  std::map<std::string, Field> local;
  for (auto& [name, g] : global.fields) local.emplace(name, local_field(d, g));
  if (d.rank() == 0) local.insert_or_assign("in", Field(local.at("in").dims(), DType::float64, {d.owned("Cell"), 3}));
  Arguments args;
  for (auto& [name, f] : local) args.field(name, f);
  for (const auto& [name, s] : global.scalars) args.scalar(name, s);
  for (const auto& t : global.connectivities) args.connectivity(t, d.local_mesh().table(t));
  EXPECT_THROW(program(args), DomainError);
}

TEST(DistributedErrors, ProgramsTheDecompositionCannotRun) {
  const examples::ExampleSize size{8, 7, 3};
  examples::ExampleInstance global = examples::example("c2e2co_sum").make_instance(size, Layout::vertical_fastest, seed);
  // A decomposition built for c2e2co_sum lacks the vertex halo diffusion_chain reads.
  MeshDecomposition d(MPI_COMM_WORLD, *global.mesh, {examples::example("c2e2co_sum").program});
  if (world_size() > 1) {
    EXPECT_THROW(DistributedProgram(examples::example("diffusion_chain").program, d), DomainError);
    // Different programs on different ranks.
    CartesianDecomposition cartesian(MPI_COMM_WORLD, {13, 11, false, false});
    EXPECT_THROW(DistributedProgram(examples::example(world_rank() == 0 ? "laplacian" : "lap_of_lap").program,
                                    cartesian),
                 ArgumentError);
  }
  // A call reading an earlier call's output at a neighbour needs an exchange in between.
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder p("two_steps");
  Expr in = p.field("in", {I, J, K}, DType::float64);
  Expr tmp = p.field("tmp", {I, J, K}, DType::float64);
  Expr out = p.field("out", {I, J, K}, DType::float64);
  Expr n = p.scalar("n", DType::int32);
  p.call("first", in * 2.0, {tmp}, {{I, 0, n}, {J, 0, n}, {K, 0, 4}});
  p.call("second", tmp(I + 1) - tmp, {out}, {{I, 0, n}, {J, 0, n}, {K, 0, 4}});
  CartesianDecomposition cd(MPI_COMM_WORLD, {13, 13, true, true});
  EXPECT_THROW(DistributedProgram(p.build(), cd), ProgramError);
}

// ---------------------------------------------------------------------------------------------
// Pack buffers through the memory route

struct LaplacianCall {
  CartesianDecomposition d{MPI_COMM_WORLD, {13, 11, true, true}};
  std::vector<Dimension> ijk{horizontal_dim("I"), horizontal_dim("J"), vertical_dim("K")};
  Field in{ijk, DType::float64, {d.end(0) - d.begin(0) + 2, d.end(1) - d.begin(1) + 2, 4}, {d.begin(0) - 1, d.begin(1) - 1, 0}};
  Field out{ijk, DType::float64, {d.end(0) - d.begin(0), d.end(1) - d.begin(1), 4}, {d.begin(0), d.begin(1), 0}};
  Arguments args;
  LaplacianCall() {
    in.fill(2.0);
    args.field("in", in).field("out", out).scalar("nx", 13).scalar("ny", 11).scalar("nk", 4);
  }
};

TEST(DistributedMemory, PackBuffersComeFromTheHostAllocatorOnce) {
  LaplacianCall c;
  int halo_calls = 0, program_calls = 0;
  std::size_t halo_bytes = 0;
  CompileOptions options;
  options.memory.external_memory_allocator = [&](const AllocationRequest& r) {
    const bool halo = r.program.find("halo exchange") != std::string::npos;
    (halo ? halo_calls : program_calls)++;
    if (halo) halo_bytes = r.bytes;
    void* block = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
    return Workspace{block, r.bytes, r.device, [block] { std::free(block); }};
  };
  DistributedProgram program(examples::example("laplacian").program, c.d, options);
  for (int i = 0; i < 5; ++i) program(c.args);
  EXPECT_EQ(halo_calls, 1);
  EXPECT_EQ(program.halo_memory_stats().allocator_calls, 1u);
  EXPECT_EQ(program.halo_memory_stats().system_allocations, 0u);
  EXPECT_GE(halo_bytes, program.halo_workspace_requirement().bytes);
  EXPECT_GT(program.halo_workspace_requirement().bytes, 0u);
  EXPECT_EQ(c.out.at<double>({c.d.begin(0), c.d.begin(1), 0}), 0.0);
}

TEST(DistributedMemory, PoolAndScopedModesKeepTheirPromises) {
  LaplacianCall c;
  for (const auto mode : {TransientMemoryMode::pool, TransientMemoryMode::scoped, TransientMemoryMode::persistent}) {
    CompileOptions options;
    options.memory.mode = mode;
    DistributedProgram program(examples::example("laplacian").program, c.d, options);
    program(c.args);
    const auto first = program.halo_memory_stats();
    for (int i = 0; i < 4; ++i) program(c.args);
    const auto later = program.halo_memory_stats();
    if (mode == TransientMemoryMode::scoped)
      EXPECT_EQ(later.system_allocations - first.system_allocations, 4u);  // one per call, as scoped promises
    else
      EXPECT_EQ(later.system_allocations, first.system_allocations) << to_string(mode);
  }
}

TEST(DistributedMemory, CallerOwnedHaloWorkspaceIsChecked) {
  LaplacianCall c;
  alignas(256) static std::byte small[256];
  DistributedOptions tiny;
  tiny.halo_workspace = Workspace{small, sizeof small, Device::cpu, {}};
  DistributedProgram program(examples::example("laplacian").program, c.d, {}, tiny);
  EXPECT_THROW(program(c.args), WorkspaceError);  // every rank sends more than 256 bytes
  const std::size_t need = 1 << 20;
  void* big = std::aligned_alloc(256, need);
  DistributedOptions enough;
  enough.halo_workspace = Workspace{big, need, Device::cpu, {}};
  DistributedProgram fits(examples::example("laplacian").program, c.d, {}, enough);
  fits(c.args);
  EXPECT_EQ(fits.halo_memory_stats().workspace_installs, 1u);
  EXPECT_EQ(c.out.at<double>({c.d.begin(0), c.d.begin(1), 0}), 0.0);
  std::free(big);
}


// ---------------------------------------------------------------------------------------------
// What the distributed fuzzer found (fieldflow_fuzz_distributed, docs/reliability.md): its
// minimal programs, through the same harness (distributed_differential.h): every rank's part of
// every field equal to the reference over the global fields, over three steps.

// A case of the harness: the program, its family and the halos of its fields.
fuzz::FuzzCase finding(const ir::Program& program, bool mesh, std::map<std::string, fuzz::FieldExtent> extents = {}) {
  fuzz::FuzzCase c;
  c.seed = 20261206;
  c.program = program;
  c.mesh = mesh;
  c.extents = std::move(extents);
  c.layouts = {Layout::vertical_fastest};
  return c;
}

// Every mode and overlap on and off, ranks along I (Cartesian) or a torus of 8 x 6 (mesh).
std::vector<fuzz::DistributedSettings> every_setting(bool mesh) {
  std::vector<fuzz::DistributedSettings> all;
  for (TransientMemoryMode mode : {TransientMemoryMode::pool, TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                                   TransientMemoryMode::external})
    for (bool overlap : {false, true}) {
      fuzz::DistributedSettings s;
      if (mesh) {
        s.sizes = {0, 0, 3, 8, 6};
      } else {
        s.sizes = {5 * world_size() + 3, 7, 3};
        s.process_grid = {world_size(), 1};
      }
      s.layout = mode == TransientMemoryMode::scoped ? Layout::horizontal_fastest : Layout::vertical_fastest;
      s.mode = mode;
      s.threads = overlap ? 2 : 1;
      s.overlap = overlap;
      all.push_back(s);
    }
  return all;
}

void expect_equal_to_the_reference(const fuzz::FuzzCase& c) {
  for (const fuzz::DistributedSettings& s : every_setting(c.mesh)) {
    const fuzz::DistributedOutcome o = fuzz::check_distributed(c, s);
    EXPECT_EQ(o.kind, fuzz::DistributedOutcome::passed) << o.detail;
  }
}

void expect_refused(const fuzz::FuzzCase& c, const std::string& words) {
  const fuzz::DistributedOutcome o = fuzz::check_distributed(c, every_setting(c.mesh)[0]);
  EXPECT_EQ(o.kind, fuzz::DistributedOutcome::refused) << o.detail;
  EXPECT_NE(o.detail.find(words), std::string::npos) << o.detail;
}

const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge"), Cell = horizontal_dim("Cell");

// Seed 1025 (and 1088, 1154): a statement reading its own output one point east, its domain one
// point past the grid's north edge. The ranks along I compute the points past the edge in their
// own columns; their western neighbour's copies of them were never refreshed.
TEST(DistributedFindings, ExchangeCarriesPointsBeyondTheGridEdge) {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder pb("east_of_itself");
  Expr o = pb.field("o", {I, J, K}, DType::float64);
  Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("s", o(I + 1), {o}, {{K, 0, nk}, {I, 0, ni}, {J, 0, nj + 1}});
  expect_equal_to_the_reference(finding(pb.build(), false, {{"o", {2, 2}}}));
}

// Seed 5: a domain [ni - 2, 4) with hi < lo was accepted distributed (each rank's cut of it is
// empty) and refused on one rank.
TEST(DistributedFindings, InvertedDomainIsTheSingleRankError) {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder pb("inverted");
  Expr a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
  Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("s", a * 2.0, {o}, {{K, 0, nk}, {I, ni - 2, 4}, {J, 0, nj}});
  const fuzz::FuzzCase c = finding(pb.build(), false);
  // The harness: refused alike by the reference and on every rank.
  expect_equal_to_the_reference(c);
  // And the same words as one rank's.
  fuzz::CallData data = fuzz::make_call_data([&] {
    fuzz::FuzzCase sized = c;
    sized.sizes = {every_setting(false)[0].sizes};
    return sized;
  }(), 0, Layout::vertical_fastest);
  std::map<std::string, Field> fields = data.clone_fields();
  CartesianDecomposition d(MPI_COMM_WORLD, {data.size_values.at("ni"), data.size_values.at("nj"), false, false});
  DistributedProgram program(c.program, d);
  try {
    program(data.arguments(fields));
    ADD_FAILURE() << "accepted";
  } catch (const DomainError& e) {
    EXPECT_NE(std::string(e.what()).find("an empty range must have hi >= lo"), std::string::npos) << e.what();
  }
}

// Seed 32: a read at a data-dependent offset along I read the neighbour's points without any
// halo (NaN); seed 21: index(Edge) gave each rank's local numbers.
TEST(DistributedFindings, ReadsNoHaloCanBoundAreRefused) {
  {
    const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
    ProgramBuilder pb("dynamic_east");
    Expr a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
    Expr m = pb.field("m", {I, J, K}, DType::int32);
    Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
    pb.call("s", a(I + minimum(maximum(m, -1), 1)), {o}, {{K, 0, nk}, {I, 0, ni}, {J, 0, nj}});
    expect_refused(finding(pb.build(), false, {{"a", {2, 2}}}), "at a data-dependent offset along I");
  }
  for (bool condition : {false, true}) {
    const Dimension K = vertical_dim("K");
    ProgramBuilder pb("edge_numbers");
    Expr a = pb.field("fe_a", {Edge, K}, DType::float64), o = pb.field("oe_0", {Edge, K}, DType::float64);
    Expr n_e = pb.scalar("n_e", DType::int32), nk = pb.scalar("nk", DType::int32);
    Expr value = condition ? concat_where(Edge < 5, a, 2.0 * a) : a + astype(index(Edge), DType::float64);
    pb.call("s", value, {o}, {{K, 0, nk}, {Edge, 0, n_e}});
    expect_refused(finding(pb.build(), true), condition ? "selects by the index along the mesh location Edge"
                                                        : "uses the index along the mesh location Edge");
  }
}

// Seeds 1096 and 1183: with overlap, each statement had its own interior; an earlier statement's
// border piece then overwrote a later one's output, or a later statement read an output before
// the earlier one had computed it there.
TEST(DistributedFindings, StatementsOverOneLocationShareTheirPieces) {
  const Dimension K = vertical_dim("K");
  const Connectivity E2V = make_connectivity("E2V", Edge, Vertex, 2);
  for (bool rewrite : {true, false}) {
    ProgramBuilder pb(rewrite ? "written_twice" : "read_after_write");
    Expr fv = pb.field("fv_a", {Vertex, K}, DType::float64);
    Expr o0 = pb.field("oe_0", {Edge, K}, DType::float64), o1 = pb.field("oe_1", {Edge, K}, DType::float64);
    Expr n_e = pb.scalar("n_e", DType::int32), nk = pb.scalar("nk", DType::int32);
    pb.call("s0", neighbor_sum(fv(E2V), E2V), {o0}, {{K, 0, nk}, {Edge, 0, n_e}});
    if (rewrite)
      pb.call("s1", broadcast(1.0, {Edge, K}), {o0}, {{K, 0, nk}, {Edge, 0, n_e}});
    else
      pb.call("s1", 2.0 * o0, {o1}, {{K, 0, nk}, {Edge, 0, n_e}});
    expect_equal_to_the_reference(finding(pb.build(), true));
  }
}

// Seeds 30 and 68: a read through C2E2CO of values found through C2E2CO[0] needs the rows of the
// neighbours' neighbours; the decomposition kept only the rows of the points computed, and the
// program it was built for was refused with a DomainError.
TEST(DistributedFindings, ChainsOfTablesKeepTheRowsMidway) {
  const Dimension K = vertical_dim("K");
  const Connectivity C2E2CO = make_connectivity("C2E2CO", Cell, Cell, 4);
  ProgramBuilder pb("neighbours_of_neighbours");
  Expr mask = pb.field("mask_c", {Cell, K}, DType::boolean), o = pb.field("oc_0", {Cell, K}, DType::float64);
  Expr n_c = pb.scalar("n_c", DType::int32), nk = pb.scalar("nk", DType::int32);
  Expr first = where(mask(C2E2CO[0]), broadcast(1.0, {Cell, K}), -3.0);
  pb.call("s", min_over(first(C2E2CO), C2E2CO), {o}, {{K, 0, nk}, {Cell, 0, n_c}});
  expect_equal_to_the_reference(finding(pb.build(), true));
}

// Seed 2452 (and 2492): a vertex's sum over its cells of each cell's count of neighbours reads no
// field, so the decomposition kept none of the cells' C2E2C rows past the rank's own: their
// entries read -1 there, and the counts came out short.
TEST(DistributedFindings, ReductionsOfNoFieldKeepTheRowsTheyCount) {
  const Dimension K = vertical_dim("K");
  const Connectivity C2E2C = make_connectivity("C2E2C", Cell, Cell, 3), V2C = make_connectivity("V2C", Vertex, Cell, 6);
  ProgramBuilder pb("neighbour_counts");
  Expr o = pb.field("ov_1", {Vertex, K}, DType::float64);
  Expr n_v = pb.scalar("n_v", DType::int32), nk = pb.scalar("nk", DType::int32);
  const Expr counts = astype(neighbor_sum(broadcast(Expr::literal(Scalar(std::int64_t{1})), {Cell, C2E2C.local, K}), C2E2C),
                             DType::float64);
  pb.call("s", neighbor_sum(counts(V2C), V2C), {o}, {{K, 0, nk}, {Vertex, 0, n_v}});
  fuzz::FuzzCase c = finding(pb.build(), true);
  expect_equal_to_the_reference(c);
  c.bounded = true;  // rows with skip values of their own
  expect_equal_to_the_reference(c);
}

// The same program on a decomposition built for one that reads nothing through tables: the rows
// it counts are not all held, which is a DomainError on every rank, not a short count.
TEST(DistributedFindings, ReductionsOfNoFieldOnAnotherProgramsDecompositionAreRefused) {
  if (world_size() == 1) GTEST_SKIP() << "one rank holds every row";
  const Dimension K = vertical_dim("K");
  const Connectivity C2E2C = make_connectivity("C2E2C", Cell, Cell, 3), V2C = make_connectivity("V2C", Vertex, Cell, 6);
  ProgramBuilder pb("neighbour_counts");
  Expr o = pb.field("ov_1", {Vertex, K}, DType::float64);
  Expr n_v = pb.scalar("n_v", DType::int32), nk = pb.scalar("nk", DType::int32);
  const Expr counts = astype(neighbor_sum(broadcast(Expr::literal(Scalar(std::int64_t{1})), {Cell, C2E2C.local, K}), C2E2C),
                             DType::float64);
  pb.call("s", neighbor_sum(counts(V2C), V2C), {o}, {{K, 0, nk}, {Vertex, 0, n_v}});
  ProgramBuilder other("in_place");
  Expr a = other.field("a", {Vertex, K}, DType::float64), b = other.field("b", {Vertex, K}, DType::float64);
  other.call("s", 2.0 * a, {b}, {{K, 0, 3}, {Vertex, 0, other.scalar("n_v", DType::int32)}});
  const Mesh global = make_torus_mesh(8, 6);
  MeshDecomposition d(MPI_COMM_WORLD, global, {other.build()});
  try {
    DistributedProgram program(pb.build(), d);
    ADD_FAILURE() << "accepted on rank " << d.rank();
  } catch (const DomainError& e) {
    EXPECT_NE(std::string(e.what()).find("looks up table rows this rank does not hold completely"), std::string::npos)
        << e.what();
  }
}

// Seed 2509: surf(J + 2) over J in [2, 5) on a rank whose block is [0, 6) needs a halo of one
// point, and the interior piece (computed while the halo travels) was the block shrunk by that
// one point: J = 4, which reads J = 6, ran before the halo arrived.
TEST(DistributedFindings, InteriorKeepsClearOfEveryReadLeavingTheBlock) {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J");
  ProgramBuilder pb("short_of_the_edge");
  Expr surf = pb.field("surf", {I, J}, DType::float64), o = pb.field("o_surf", {I, J}, DType::float64);
  Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32);
  (void)nj;
  pb.call("s", surf(J + 2), {o}, {{I, 0, ni}, {J, 2, 5}});
  const fuzz::FuzzCase c = finding(pb.build(), false, {{"surf", {2, 2}}});
  for (fuzz::DistributedSettings s : every_setting(false)) {
    s.sizes = {7, 6 * world_size(), 2};  // blocks of 6 along J: the domain ends one point short of the first
    s.process_grid = {1, world_size()};
    const fuzz::DistributedOutcome o = fuzz::check_distributed(c, s);
    EXPECT_EQ(o.kind, fuzz::DistributedOutcome::passed) << o.detail;
  }
}

// Seed 5331: `o` written from a transient copy of itself read one point west. The overlap check
// saw `o` read only at the point computed (by the copy's producer), so the pieces ran: the border
// piece copied `o` after the interior had overwritten it.
TEST(DistributedFindings, OutputsReadElsewhereThroughATransientRunInOnePiece) {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder pb("west_of_itself");
  Expr o = pb.field("o2", {I, J, K}, DType::float64);
  Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
  pb.call("s", materialize("copy", o)(I - 1), {o}, {{K, 0, nk}, {I, maximum(Expr(2), ni - 5), ni + 1}, {J, 2, nj - 2}});
  expect_equal_to_the_reference(finding(pb.build(), false, {{"o2", {2, 2}}}));
}

// Seed 17982 (and five more of 17000-17982, once the harness compared a rejected call's points
// with their values before it): a dynamic offset read outside a field on one rank was found while
// that rank ran, after the other ranks had written their outputs, and with overlap after the
// rank's own interior piece had written. The call was rejected on every rank ("no argument was
// changed") with outputs half written. Now every rank checks every piece before any runs, and the
// outputs of a program with dynamic offsets are restored on every rank when one fails.
TEST(DistributedFindings, ARejectedCallChangesNoRanksPoints) {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  const Expr minus_one = Expr::literal(Scalar(std::int32_t{-1})), zero = Expr::literal(Scalar(std::int32_t{0}));
  {  // Another rank's statement fails: rank 0 reads level -1, the last rank writes o1.
    ProgramBuilder pb("fails_on_rank_0");
    Expr a = pb.field("a", {I, J, K}, DType::float64);
    Expr o0 = pb.field("o0", {I, J, K}, DType::float64), o1 = pb.field("o1", {I, J, K}, DType::float64);
    Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
    pb.call("s0", a(K + minus_one), {o0}, {{K, 0, nk}, {I, 0, 2}, {J, 0, nj}});
    pb.call("s1", 2.0 * a, {o1}, {{K, 0, nk}, {I, ni - 2, ni}, {J, 0, nj}});
    expect_equal_to_the_reference(finding(pb.build(), false));
  }
  {  // A later piece fails: with overlap, the interior runs first; the last column reads level -1.
    ProgramBuilder pb("fails_in_the_border");
    Expr a = pb.field("a", {I, J, K}, DType::float64), o = pb.field("o", {I, J, K}, DType::float64);
    Expr ni = pb.scalar("ni", DType::int32), nj = pb.scalar("nj", DType::int32), nk = pb.scalar("nk", DType::int32);
    const Expr off = where(index(I) == ni - 1, minus_one, zero);
    pb.call("s", a(I + 1) + a(K + off), {o}, {{K, 0, nk}, {I, 0, ni}, {J, 0, nj}});
    expect_equal_to_the_reference(finding(pb.build(), false, {{"a", {2, 2}}}));
  }
}

// Seed 43 (MPI_ERR_TRUNCATE): each rank keyed its cached exchange patterns by its own halo; a
// halo built beside one halo on the other rank was reused beside another, so one rank's sends
// met the other's receives of a different pattern. Here rank 0 asks for halos S1, S2, S1 and
// rank 1 for T1, T2, T2: the third pair must be built anew, its sends matching the receives.
TEST(DistributedFindings, CachedHaloPatternsPairOnlyWithTheirOwnBuild) {
  if (world_size() != 2) GTEST_SKIP() << "two ranks";
  const examples::Example& ex = examples::example("diffusion_chain");
  examples::ExampleSize size{8, 7, 3};
  examples::ExampleInstance global = ex.make_instance(size, Layout::vertical_fastest, seed);
  MeshDecomposition d(MPI_COMM_WORLD, *global.mesh, {ex.program});
  const std::string loc = "Vertex";
  std::vector<std::int32_t> halo;
  for (std::int64_t p = d.owned(loc); p < d.local(loc); ++p) halo.push_back(static_cast<std::int32_t>(p));
  ASSERT_GE(halo.size(), 2u);
  const std::vector<std::int32_t> one = {halo[0]}, two = {halo[0], halo[1]};
  const std::vector<std::vector<std::int32_t>> asks =
      world_rank() == 0 ? std::vector{one, two, one} : std::vector{one, two, two};
  std::shared_ptr<const MeshPattern> last;
  for (const auto& ask : asks) last = detail::mesh_pattern(d, loc, ask);
  // What this rank sends to the other must be what the other receives from it.
  const int other = 1 - world_rank();
  long sends = 0, receives = 0;
  for (std::size_t k = 0; k < last->peers.size(); ++k)
    if (last->peers[k] == other) {
      sends = static_cast<long>(last->send[k].size());
      receives = static_cast<long>(last->receive[k].size());
    }
  long expected = 0;
  MPI_Sendrecv(&receives, 1, MPI_LONG, other, 7, &expected, 1, MPI_LONG, other, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  EXPECT_EQ(sends, expected) << "rank " << world_rank();
}

}  // namespace
}  // namespace fieldflow::distributed

// Every rank runs every test; the exit code is the same on all ranks (mpirun reports failure if
// any rank failed).
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  int failed = RUN_ALL_TESTS(), any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
