// DistributedProgram: a program run over a decomposition, its halos exchanged from its inferred
// reads, its interior overlapped with the messages (see fieldflow/distributed.h).
//
// One compiled module (the program with region-bounded domains, region_program.h) serves several
// instances: the rank's whole part, its interior and its border pieces. Each instance keeps its own
// region sizes, so no call re-plans memory or re-checks tables because another piece ran before.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <optional>

#include "distributed/collective.h"
#include "distributed/halo_exchange.h"
#include "distributed/mesh_reads.h"
#include "distributed/region_program.h"
#include "fieldflow/distributed.h"
#include "fieldflow/errors.h"
#include "ir/call_binding.h"
#include "ir/field_elements.h"
#include "ir/schedule.h"
#include "passes/pipeline.h"

namespace fieldflow::distributed {

namespace {

constexpr std::int64_t unbounded = std::numeric_limits<std::int64_t>::max() / 4;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

using Range = std::pair<std::int64_t, std::int64_t>;
Range intersect(Range a, Range b) { return {std::max(a.first, b.first), std::min(a.second, b.second)}; }

// The pieces a rank's part runs in: all of it, or its interior then its border.
enum Piece { whole, interior, border_first };

std::map<std::string, std::int64_t> int_scalars(const Arguments& args) {
  std::map<std::string, std::int64_t> v;
  for (const auto& e : args.entries())
    if (e.kind == Arguments::Entry::Kind::scalar && is_integral(e.scalar.dtype())) v[e.name] = e.scalar.as_int();
  return v;
}

Field* field_argument(const Arguments& args, const std::string& name, const std::string& program) {
  const Arguments::Entry* e = args.find(name);
  if (!e || e->kind != Arguments::Entry::Kind::field)
    throw ArgumentError(fmt::format("program '{}': missing field argument '{}' (its halo is exchanged)", program, name));
  return e->field;
}

// A fingerprint of a field's layout along the dimensions that are not decomposed: the bytes of one
// point must agree between the ranks that exchange it.
std::uint64_t undecomposed_layout(const Field& f, const std::vector<Dimension>& decomposed) {
  std::uint64_t h = 1469598103934665603ULL ^ static_cast<std::uint64_t>(f.dtype());
  for (std::size_t a = 0; a < f.dims().size(); ++a) {
    if (std::find(decomposed.begin(), decomposed.end(), f.dims()[a]) != decomposed.end()) continue;
    for (std::uint64_t v : {static_cast<std::uint64_t>(a), static_cast<std::uint64_t>(f.shape()[a]),
                            static_cast<std::uint64_t>(f.origin()[a])})
      h = (h ^ v) * 1099511628211ULL;
  }
  return h;
}

}  // namespace

struct DistributedProgram::Impl {
  ir::Program original;
  detail::RegionProgram regional;
  ir::Schedule schedule;  // of the regional program: extents and reads
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  const CartesianDecomposition* cart = nullptr;
  const MeshDecomposition* mesh = nullptr;
  std::vector<Dimension> decomposed;
  CompileOptions options;
  DistributedOptions distributed;
  bool overlap = false;
  std::vector<CompiledProgram> pieces;
  std::unique_ptr<detail::HaloExchange> exchange;
  ExchangeStats stats;

  // Meshes: the exchanged fields and their patterns, known from the decomposition alone.
  struct MeshField {
    std::string param, location;
    std::shared_ptr<const MeshPattern> pattern;
  };
  std::vector<MeshField> mesh_fields;
  std::vector<std::int64_t> interior_end;  // per statement: owned points [0, end) read no halo

  // The current binding: rebuilt when a call's fields or sizes differ from the last call's.
  std::string key;
  std::vector<std::string> exchanged;        // parameter names, in param order
  std::vector<Field*> fields;                // their fields in the current call
  // Cartesian, per param (all params): the halo widths I lo, I hi, J lo, J hi; then how far the
  // reads reach beyond a non-periodic grid's edge, I lo, I hi, J lo, J hi (see plan_cartesian);
  // then how far one point's reads reach, I lo, I hi, J lo, J hi (the interior piece's margin).
  std::vector<std::int64_t> widths;
  static constexpr std::size_t kWidths = 12;
  detail::ExchangePlan plan;
  std::vector<std::vector<std::pair<std::string, std::int64_t>>> piece_bounds;  // per piece: region scalars
  std::vector<bool> piece_active;
  std::map<std::string, std::int64_t> received;
  // Whether a kernel checks reads while running (dynamic offsets), and the outputs saved for it.
  bool checks_while_running = false;
  std::vector<std::pair<Field*, std::size_t>> saved_outputs;  // field, its entry in saved_bytes
  std::vector<std::vector<std::byte>> saved_bytes;

  Impl(const ir::Program& p, MPI_Comm c, CompileOptions o, DistributedOptions d)
      : original(p), comm(c), options(std::move(o)), distributed(std::move(d)) {
    MPI_Comm_rank(comm, &rank);
  }

  // A field read at a data-dependent offset along a decomposed dimension may reach any point of
  // the global field: no halo bounds it, and the in-kernel check would measure the read against
  // the rank's field instead of the global one. (Transients are computed where they are read.)
  void check_no_data_dependent_reads_across_ranks() const {
    for (const auto& k : schedule.kernels)
      for (const auto& a : k.accesses) {
        if (schedule.transient_index(a.buffer) >= 0) continue;
        for (const auto& d : a.dims)
          if (d.kind == ir::DimAccess::Kind::dynamic &&
              std::find(decomposed.begin(), decomposed.end(), d.dim) != decomposed.end())
            throw ProgramError(fmt::format("program '{}', kernel '{}': reads '{}' at a data-dependent offset along {}, "
                                           "a decomposed dimension; no halo bounds such a read (offsets along the "
                                           "vertical are fine)",
                                           original.name, k.name, a.buffer, d.dim.name));
      }
  }

  // Whether some output is read at another point than the one computed: directly, or by the
  // producer of a transient that is itself read elsewhere (`materialize(o)(I - 1)` writing `o`:
  // found by the distributed fuzzer, seed 5331). Pieces would then change the order of reads and
  // writes.
  bool reads_an_output_elsewhere() const {
    auto away = [](const ir::Access& a) {
      for (const auto& d : a.dims)
        if (d.dim.kind == DimKind::horizontal && (d.kind != ir::DimAccess::Kind::loop || d.min_offset != 0 || d.max_offset != 0))
          return true;
      return false;
    };
    // Transients read elsewhere, directly or through the transients their readers produce.
    std::vector<bool> moved(schedule.transients.size(), false);
    auto produces_moved = [&](const ir::Kernel& k) {
      for (const auto& o : k.outputs)
        if (const int t = schedule.transient_index(o); t >= 0 && moved[t]) return true;
      return false;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (const auto& k : schedule.kernels)
        for (const auto& a : k.accesses)
          if (const int t = schedule.transient_index(a.buffer); t >= 0 && !moved[t] && (away(a) || produces_moved(k)))
            moved[t] = changed = true;
    }
    for (const auto& k : schedule.kernels)
      for (const auto& a : k.accesses) {
        bool written = false;
        for (const auto& st : original.stmts)
          written |= std::find(st.outputs.begin(), st.outputs.end(), a.buffer) != st.outputs.end();
        if (written && (away(a) || produces_moved(k))) return true;
      }
    return false;
  }

  void prepare(std::vector<Dimension> dims) {
    decomposed = std::move(dims);
    detail::require_same_on_all_ranks(comm, ir::print(original), "the program given to DistributedProgram");
    detail::collectively(comm, [&] {
      regional = detail::with_region_bounds(original, decomposed);
      passes::PipelineOptions po;
      po.layout = options.layout.value_or(default_layout(options.backend));
      po.static_scalars = options.static_scalars;
      schedule = passes::lower(regional.program, po);
      if (mesh) detail::check_mesh_reads_supported(schedule);
      check_no_data_dependent_reads_across_ranks();
    });
    // Overlap changes the order in which points are computed: only sound when no output is
    // read at another point than the one computed.
    overlap = distributed.overlap && !reads_an_output_elsewhere();
    // The reference backend checks reads as it evaluates them: all of them are found while running.
    checks_while_running = options.backend == Backend::reference ||
                           std::any_of(schedule.kernels.begin(), schedule.kernels.end(),
                                       [](const ir::Kernel& k) { return k.has_dynamic_shift; });
    // Rank 0 compiles first; the others then load the module from the cache instead of
    // compiling it too.
    const int count = overlap ? (cart ? 6 : 3) : 1;
    detail::collectively(comm, [&] {
      if (rank == 0) pieces.push_back(compile(regional.program, options));
    });
    detail::collectively(comm, [&] {
      while (static_cast<int>(pieces.size()) < count) pieces.push_back(compile(regional.program, options));
    });
    MemoryOptions halo_memory = options.memory;
    if (distributed.halo_workspace) {
      halo_memory = MemoryOptions{};
      halo_memory.mode = TransientMemoryMode::external;
      halo_memory.external_workspace[Device::cpu] = *distributed.halo_workspace;
    }
    detail::collectively(comm, [&] {
      exchange = std::make_unique<detail::HaloExchange>(comm, original.name + " halo exchange", halo_memory);
    });
  }

  void prepare_mesh() {
    const Mesh& m = mesh->local_mesh();
    std::map<std::string, detail::PointMask> complete;
    for (const auto& [name, t] : m.tables) complete[name] = mesh->complete_rows(name);
    const detail::MeshTables tables{&m, &complete};
    std::map<std::string, std::int64_t> owned;
    for (const auto& l : {"Vertex", "Edge", "Cell"}) owned[l] = mesh->owned(l);
    std::vector<Dimension> locations;
    detail::MeshReads reads;
    std::vector<detail::PointMask> dependent;
    detail::collectively(comm, [&] {
      locations = detail::statement_locations(schedule);
      std::vector<detail::PointMask> seeds;
      for (const auto& l : locations) seeds.emplace_back(static_cast<std::size_t>(owned.at(l.name)), 1);
      reads = detail::mesh_reads(schedule, tables, seeds);
      dependent = detail::halo_dependent_points(schedule, tables, owned);
    });
    // One interior per location, the smallest of its statements': statements over the same points
    // read and write the same fields at the same point (other reads are refused), so each point
    // must see them all in one piece, in program order (found by the distributed fuzzer: a later
    // statement overwritten in the border piece by an earlier one, and one reading an output its
    // predecessor had not yet computed there).
    std::map<std::string, std::int64_t> common_end;
    for (std::size_t st = 0; st < dependent.size(); ++st) {
      const auto& d = dependent[st];
      std::int64_t end = 0;
      while (end < static_cast<std::int64_t>(d.size()) && !d[static_cast<std::size_t>(end)]) ++end;
      const std::string& loc = locations[st].name;
      common_end[loc] = common_end.count(loc) ? std::min(common_end[loc], end) : end;
    }
    for (std::size_t st = 0; st < dependent.size(); ++st) interior_end.push_back(common_end.at(locations[st].name));
    // Every rank walks the parameters in the same order, so the patterns are built collectively.
    for (const auto& prm : original.params) {
      if (prm.kind != ir::ParamKind::field) continue;
      const Dimension* loc = detail::location_dim(prm.type.dims);
      std::vector<std::int32_t> halo;
      if (auto it = reads.field_points.find(prm.name); it != reads.field_points.end() && loc)
        for (std::size_t p = static_cast<std::size_t>(owned.at(loc->name)); p < it->second.size(); ++p)
          if (it->second[p]) halo.push_back(static_cast<std::int32_t>(p));
      long mine = static_cast<long>(halo.size()), most = 0;
      MPI_Allreduce(&mine, &most, 1, MPI_LONG, MPI_MAX, comm);
      if (most == 0) continue;
      mesh_fields.push_back({prm.name, loc->name, detail::mesh_pattern(*mesh, loc->name, halo)});
    }
  }

  // ---- binding ---------------------------------------------------------------------------

  std::string binding_key(const Arguments& args) const {
    std::string k;
    for (const auto& e : args.entries()) {
      k += e.name;
      k += '|';
      if (e.kind == Arguments::Entry::Kind::field) {
        k += fmt::format("{}:", static_cast<const void*>(e.field));
        for (auto v : e.field->shape()) k += fmt::format("{},", v);
        for (auto v : e.field->origin()) k += fmt::format("{},", v);
        for (auto v : e.field->strides()) k += fmt::format("{},", v);
      } else if (e.kind == Arguments::Entry::Kind::scalar && is_integral(e.scalar.dtype())) {
        k += fmt::format("{}", e.scalar.as_int());
      } else if (e.kind == Arguments::Entry::Kind::connectivity) {
        k += fmt::format("{}", static_cast<const void*>(e.table));
      }
      k += ';';
    }
    return k;
  }

  // Cartesian: the part of a statement's range along one axis this rank computes. Ranks at a
  // non-periodic edge also take what lies beyond the grid (staggered fields, boundary points).
  Range owned_range(const detail::RegionBound& b, const std::map<std::string, std::int64_t>& sizes) const {
    const int axis = b.dim == cart->grid().i ? 0 : 1;
    const std::int64_t lo = b.original_lo.evaluate(sizes), hi = b.original_hi.evaluate(sizes);
    ir::check_range_order(original, original.stmts[b.stmt], {b.dim, lo, hi});  // as one rank would
    const bool periodic = axis == 0 ? cart->grid().periodic_i : cart->grid().periodic_j;
    const std::int64_t n = axis == 0 ? cart->grid().nx : cart->grid().ny;
    if (periodic && (lo < 0 || hi > n))
      throw DomainError(fmt::format("program '{}', call '{}': runs over {} [{}, {}), beyond the periodic grid [0, {})",
                                    original.name, original.stmts[b.stmt].op, b.dim.name, lo, hi, n));
    const bool below = axis == 0 ? cart->neighbor(-1, 0) != MPI_PROC_NULL : cart->neighbor(0, -1) != MPI_PROC_NULL;
    const bool above = axis == 0 ? cart->neighbor(1, 0) != MPI_PROC_NULL : cart->neighbor(0, 1) != MPI_PROC_NULL;
    return {below ? std::max(lo, cart->begin(axis)) : lo, above ? std::min(hi, cart->end(axis)) : hi};
  }

  void set_pieces(const std::vector<std::vector<Range>>& piece_ranges) {
    // piece_ranges[piece][bound]
    piece_bounds.assign(piece_ranges.size(), {});
    piece_active.assign(piece_ranges.size(), false);
    for (std::size_t p = 0; p < piece_ranges.size(); ++p) {
      // A piece runs when some statement has points in it (every range of that statement).
      std::vector<bool> stmt_empty(original.stmts.size(), false);
      for (std::size_t b = 0; b < regional.bounds.size(); ++b)
        if (piece_ranges[p][b].second <= piece_ranges[p][b].first) stmt_empty[regional.bounds[b].stmt] = true;
      for (std::size_t b = 0; b < regional.bounds.size(); ++b) {
        Range r = piece_ranges[p][b];
        if (stmt_empty[regional.bounds[b].stmt]) r = {0, 0};
        piece_bounds[p].push_back({regional.bounds[b].lo_param, r.first});
        piece_bounds[p].push_back({regional.bounds[b].hi_param, std::max(r.first, r.second)});
      }
      for (std::size_t s = 0; s < original.stmts.size(); ++s) piece_active[p] = piece_active[p] || !stmt_empty[s];
    }
  }

  // Phase 1 of binding a Cartesian call (local checks; may throw): per read field, the halo it
  // needs on each side.
  void check_cartesian(const Arguments& args) {
    const auto sizes_in = int_scalars(args);
    std::vector<Range> owned;
    for (const auto& b : regional.bounds) owned.push_back(owned_range(b, sizes_in));
    auto sizes = sizes_in;
    for (std::size_t b = 0; b < regional.bounds.size(); ++b) {
      sizes[regional.bounds[b].lo_param] = owned[b].first;
      sizes[regional.bounds[b].hi_param] = std::max(owned[b].first, owned[b].second);
    }
    const ir::ConcreteExtents ext = ir::compute_extents(schedule, sizes);
    widths.assign(original.params.size() * kWidths, 0);
    // One point's reach: the reads of every statement run over the whole block. The halo a call
    // needs can be narrower (a domain ending short of the block's edge reads less past it), but
    // the interior piece must keep clear of every point whose reads leave the block (found by
    // the distributed fuzzer: surf(J + 2) over J in [2, 5), a block [0, 6), a halo of 1).
    std::optional<ir::ConcreteExtents> whole_block;
    {
      auto block_sizes = sizes_in;
      for (const auto& b : regional.bounds) {
        const int axis = b.dim == cart->grid().i ? 0 : 1;
        block_sizes[b.lo_param] = cart->begin(axis);
        block_sizes[b.hi_param] = cart->end(axis);
      }
      try {
        whole_block = ir::compute_extents(schedule, block_sizes);
      } catch (const Error&) {
        // no reach known: every side with a halo keeps the interior empty (see plan_cartesian)
      }
    }
    const std::array<int, 2> dims = cart->process_grid();
    const std::array<std::int64_t, 2> n = {cart->grid().nx, cart->grid().ny};
    for (std::size_t i = 0; i < original.params.size(); ++i) {
      const auto& prm = original.params[i];
      auto it = ext.param_reads.find(prm.name);
      if (prm.kind != ir::ParamKind::field || it == ext.param_reads.end() || it->second.count() == 0) continue;
      const ir::Box& read = it->second;
      const Field* f = field_argument(args, prm.name, original.name);
      for (std::size_t a = 0; a < read.dims.size(); ++a) {
        const int fa = f->axis_of(read.dims[a]);
        if (fa < 0) continue;
        const std::int64_t flo = f->origin()[fa], fhi = flo + f->shape()[fa];
        if (read.lo[a] < flo || read.hi[a] > fhi)
          throw DomainError(fmt::format("program '{}': field '{}' on rank {} covers {} [{}, {}), the call reads [{}, {}) "
                                        "there (the rank's own points and the halo the program reads)",
                                        original.name, prm.name, rank, read.dims[a].name, flo, fhi, read.lo[a],
                                        read.hi[a]));
      }
      for (int axis = 0; axis < 2; ++axis) {
        const int a = read.axis(axis == 0 ? cart->grid().i : cart->grid().j);
        if (a < 0) continue;
        const bool below = cart->neighbor(axis == 0 ? -1 : 0, axis == 1 ? -1 : 0) != MPI_PROC_NULL;
        const bool above = cart->neighbor(axis == 0 ? 1 : 0, axis == 1 ? 1 : 0) != MPI_PROC_NULL;
        const std::int64_t lo = below ? std::max<std::int64_t>(0, cart->begin(axis) - read.lo[a]) : 0;
        const std::int64_t hi = above ? std::max<std::int64_t>(0, read.hi[a] - cart->end(axis)) : 0;
        const std::int64_t smallest = n[axis] / dims[axis];
        if (lo > smallest || hi > smallest)
          throw DomainError(fmt::format("program '{}': field '{}' is read {} points beyond a rank's block along {}, "
                                        "wider than the smallest block ({} points): use fewer ranks along {}",
                                        original.name, prm.name, std::max(lo, hi), read.dims[a].name, smallest,
                                        read.dims[a].name));
        widths[i * kWidths + axis * 2] = lo;
        widths[i * kWidths + axis * 2 + 1] = hi;
        if (!below) widths[i * kWidths + 4 + axis * 2] = std::max<std::int64_t>(0, -read.lo[a]);
        if (!above) widths[i * kWidths + 5 + axis * 2] = std::max<std::int64_t>(0, read.hi[a] - n[axis]);
        std::int64_t reach_lo = unbounded, reach_hi = unbounded;
        if (whole_block) {
          reach_lo = reach_hi = 0;
          if (auto wb = whole_block->param_reads.find(prm.name); wb != whole_block->param_reads.end() && wb->second.count() > 0)
            if (const int wa = wb->second.axis(axis == 0 ? cart->grid().i : cart->grid().j); wa >= 0) {
              reach_lo = std::max<std::int64_t>(0, cart->begin(axis) - wb->second.lo[wa]);
              reach_hi = std::max<std::int64_t>(0, wb->second.hi[wa] - cart->end(axis));
            }
        }
        widths[i * kWidths + 8 + axis * 2] = reach_lo;
        widths[i * kWidths + 9 + axis * 2] = reach_hi;
        if ((lo > 0 || hi > 0)) {
          const int fa = f->axis_of(read.dims[a]);
          if (f->origin()[fa] > cart->begin(axis) || f->origin()[fa] + f->shape()[fa] < cart->end(axis))
            throw DomainError(fmt::format("program '{}': field '{}' on rank {} does not cover the rank's block {} [{}, {})",
                                          original.name, prm.name, rank, read.dims[a].name, cart->begin(axis),
                                          cart->end(axis)));
        }
      }
    }
  }

  // A message travelling along one axis carries the rank's block along the other, and, at a
  // non-periodic edge of the grid, the points beyond it that the reads reach: the ranks at that
  // edge compute them (a domain past the grid) or hold the host's boundary values there, and a
  // neighbour's copy would be left from the last call otherwise (found by the distributed
  // fuzzer: `o = o(I + 1)` over J in [0, nj + 1)). Sender and receiver share the edge, so agree.
  Range along_block(int axis, const std::int64_t* w) const {
    const bool below = cart->neighbor(axis == 0 ? -1 : 0, axis == 1 ? -1 : 0) != MPI_PROC_NULL;
    const bool above = cart->neighbor(axis == 0 ? 1 : 0, axis == 1 ? 1 : 0) != MPI_PROC_NULL;
    return {cart->begin(axis) - (below ? 0 : w[4 + axis * 2]), cart->end(axis) + (above ? 0 : w[5 + axis * 2])};
  }

  // Phase 2 check (collective): a field exchanged along one axis covers what along_block adds
  // along the other.
  void check_beyond_edges_covered(const Arguments& args) const {
    for (std::size_t i = 0; i < original.params.size(); ++i) {
      const std::int64_t* w = &widths[i * kWidths];
      for (int axis = 0; axis < 2; ++axis) {
        const int other = 1 - axis;
        if (!(w[other * 2] || w[other * 2 + 1])) continue;  // no message travels along the other axis
        if (cart->neighbor(other == 0 ? -1 : 0, other == 1 ? -1 : 0) == MPI_PROC_NULL &&
            cart->neighbor(other == 0 ? 1 : 0, other == 1 ? 1 : 0) == MPI_PROC_NULL)
          continue;  // none to or from this rank
        const Field* f = field_argument(args, original.params[i].name, original.name);
        const Dimension& dim = axis == 0 ? cart->grid().i : cart->grid().j;
        const int fa = f->axis_of(dim);
        if (fa < 0) continue;
        const Range r = along_block(axis, w);
        const std::int64_t flo = f->origin()[fa], fhi = flo + f->shape()[fa];
        if (r.first < flo || r.second > fhi)
          throw DomainError(fmt::format("program '{}': field '{}' on rank {} covers {} [{}, {}); its halo exchange "
                                        "carries [{}, {}) there (the rank's block and the points beyond the grid's "
                                        "edge that the reads reach)",
                                        original.name, original.params[i].name, rank, dim.name, flo, fhi, r.first,
                                        r.second));
      }
    }
  }

  // Phase 2 (after the widths agree on every rank; cannot fail on one rank only).
  void plan_cartesian(const Arguments& args) {
    const auto sizes = int_scalars(args);
    exchanged.clear();
    fields.clear();
    plan = {};
    received.clear();
    std::array<std::int64_t, 4> deepest{0, 0, 0, 0};  // I lo, I hi, J lo, J hi over exchanged fields
    const std::array<std::int64_t, 2> b = {cart->begin(0), cart->begin(1)}, e = {cart->end(0), cart->end(1)};
    for (std::size_t i = 0; i < original.params.size(); ++i) {
      const std::int64_t* w = &widths[i * kWidths];
      if (!(w[0] || w[1] || w[2] || w[3])) continue;
      const auto& prm = original.params[i];
      Field* f = field_argument(args, prm.name, original.name);
      const int fi = static_cast<int>(fields.size());
      exchanged.push_back(prm.name);
      fields.push_back(f);
      const int ai = f->axis_of(cart->grid().i), aj = f->axis_of(cart->grid().j);
      for (int d = 0; d < 4; ++d) {
        const bool exists = cart->neighbor(d < 2 ? (d == 0 ? -1 : 1) : 0, d >= 2 ? (d == 2 ? -1 : 1) : 0) != MPI_PROC_NULL;
        if (exists && w[d] > 0) deepest[d] = std::max({deepest[d], w[d], w[8 + d]});
      }
      for (int di = -1; di <= 1; ++di)
        for (int dj = -1; dj <= 1; ++dj) {
          if ((di == 0 && dj == 0) || (di != 0 && ai < 0) || (dj != 0 && aj < 0)) continue;
          // Along one axis: the halo on side d of a receiver, and what a sender sends to side d.
          auto receive_range = [&](int axis, int d) -> Range {
            if (d < 0) return {b[axis] - w[axis * 2], b[axis]};
            if (d > 0) return {e[axis], e[axis] + w[axis * 2 + 1]};
            return along_block(axis, w);
          };
          auto send_range = [&](int axis, int d) -> Range {
            if (d > 0) return {e[axis] - w[axis * 2], e[axis]};
            if (d < 0) return {b[axis], b[axis] + w[axis * 2 + 1]};
            return along_block(axis, w);
          };
          auto segment = [&](Range ri, Range rj) {
            detail::Segment s;
            s.field = fi;
            for (std::size_t a = 0; a < f->dims().size(); ++a) {
              s.lo.push_back(f->origin()[a]);
              s.hi.push_back(f->origin()[a] + f->shape()[a]);
            }
            if (ai >= 0) std::tie(s.lo[ai], s.hi[ai]) = ri;
            if (aj >= 0) std::tie(s.lo[aj], s.hi[aj]) = rj;
            s.bytes = detail::segment_bytes(*f, s);
            return s;
          };
          const int travel = (di + 1) * 3 + (dj + 1);    // tag of a message sent towards (di, dj)
          const int arriving = (1 - di) * 3 + (1 - dj);  // tag of one coming from (di, dj)
          detail::Segment out = segment(send_range(0, di), send_range(1, dj));
          detail::Segment in = segment(receive_range(0, di), receive_range(1, dj));
          received[prm.name] += static_cast<std::int64_t>(in.bytes / size_of(f->dtype()));
          plan.add(true, cart->neighbor(di, dj), travel, std::move(out));
          plan.add(false, cart->neighbor(di, dj), arriving, std::move(in));
        }
    }
    plan.finish();
    for (auto it = received.begin(); it != received.end();) it = it->second == 0 ? received.erase(it) : std::next(it);

    // Pieces: whole, interior, then the border: west and east strips (all J), south and north.
    std::vector<Range> owned;
    for (const auto& bd : regional.bounds) owned.push_back(owned_range(bd, sizes));
    const std::int64_t mid_i_lo = b[0] + deepest[0], mid_i_hi = std::max(mid_i_lo, e[0] - deepest[1]);
    const std::int64_t mid_j_lo = b[1] + deepest[2], mid_j_hi = std::max(mid_j_lo, e[1] - deepest[3]);
    const Range all{-unbounded, unbounded};
    const std::vector<std::array<Range, 2>> boxes = {
        {all, all},
        {Range{mid_i_lo, mid_i_hi}, Range{mid_j_lo, mid_j_hi}},
        {Range{-unbounded, mid_i_lo}, all},
        {Range{mid_i_hi, unbounded}, all},
        {Range{mid_i_lo, mid_i_hi}, Range{-unbounded, mid_j_lo}},
        {Range{mid_i_lo, mid_i_hi}, Range{mid_j_hi, unbounded}},
    };
    std::vector<std::vector<Range>> ranges;
    for (const auto& box : boxes) {
      std::vector<Range> r;
      for (std::size_t k = 0; k < regional.bounds.size(); ++k)
        r.push_back(intersect(owned[k], box[regional.bounds[k].dim == cart->grid().i ? 0 : 1]));
      ranges.push_back(std::move(r));
    }
    set_pieces(ranges);
  }

  void check_mesh(const Arguments& args) {
    const auto sizes = int_scalars(args);
    for (const auto& b : regional.bounds) {
      const std::int64_t lo = b.original_lo.evaluate(sizes), hi = b.original_hi.evaluate(sizes);
      ir::check_range_order(original, original.stmts[b.stmt], {b.dim, lo, hi});
      const std::int64_t n = mesh->global_size(b.dim.name);
      if (lo != 0 || hi != n)
        throw DomainError(fmt::format("program '{}', call '{}': a distributed mesh call runs over all of {} [0, {}), "
                                      "this one over [{}, {})",
                                      original.name, original.stmts[b.stmt].op, b.dim.name, n, lo, hi));
    }
    for (const auto& mf : mesh_fields) {
      const Field* f = field_argument(args, mf.param, original.name);
      const int a = f->axis_of(horizontal_dim(mf.location));
      std::int32_t last = -1;
      for (const auto& list : mf.pattern->receive)
        for (const auto p : list) last = std::max(last, p);
      if (a < 0 || f->origin()[a] > 0 || f->origin()[a] + f->shape()[a] <= last)
        throw DomainError(fmt::format("program '{}': field '{}' on rank {} must cover the rank's {} points [0, {}) "
                                      "(owned and halo); given {}",
                                      original.name, mf.param, rank, mf.location, mesh->local(mf.location),
                                      f->describe()));
    }
  }

  void plan_mesh(const Arguments& args) {
    exchanged.clear();
    fields.clear();
    plan = {};
    received.clear();
    for (const auto& mf : mesh_fields) {
      Field* f = field_argument(args, mf.param, original.name);
      const int fi = static_cast<int>(fields.size());
      exchanged.push_back(mf.param);
      fields.push_back(f);
      const int axis = f->axis_of(horizontal_dim(mf.location));
      for (std::size_t k = 0; k < mf.pattern->peers.size(); ++k)
        for (const bool send : {true, false}) {
          detail::Segment s;
          s.field = fi;
          s.points = send ? &mf.pattern->send[k] : &mf.pattern->receive[k];
          s.point_axis = axis;
          s.bytes = detail::segment_bytes(*f, s);
          if (!send) received[mf.param] += static_cast<std::int64_t>(s.bytes / size_of(f->dtype()));
          plan.add(send, mf.pattern->peers[k], 0, std::move(s));
        }
    }
    plan.finish();
    std::vector<std::vector<Range>> ranges(3);
    for (const auto& b : regional.bounds) {
      const std::int64_t owned = mesh->owned(b.dim.name), inner = interior_end.at(static_cast<std::size_t>(b.stmt));
      ranges[whole].push_back({0, owned});
      ranges[interior].push_back({0, inner});
      ranges[border_first].push_back({inner, owned});
    }
    set_pieces(ranges);
  }

  // Binds a call and obtains its pack buffers. In steady state (every rank calls with the
  // arguments of its last call) one Allreduce settles it: each rank takes its buffers first, then
  // all learn whether any rank's arguments changed or its buffers failed; only then comes the
  // full, checked binding (one synchronisation per call matters at a thousand ranks).
  void bind_and_acquire(const Arguments& args) {
    std::string k = binding_key(args);
    int mine[2] = {k != key ? 1 : 0, 0}, all[2] = {0, 0};
    if (!mine[0]) {
      try {
        exchange->acquire(plan);
      } catch (...) {
        mine[1] = 1;  // reported below by every rank, through the checked path
      }
    }
    MPI_Allreduce(mine, all, 2, MPI_INT, MPI_MAX, comm);
    if (!all[0] && !all[1]) return;
    exchange->release();
    if (all[0]) bind(args, std::move(k));
    detail::collectively(comm, [&] { exchange->acquire(plan); });
  }

  void bind(const Arguments& args, std::string k) {
    key.clear();  // until the new binding is complete
    detail::collectively(comm, [&] {
      if (cart) check_cartesian(args); else check_mesh(args);
    });
    if (cart) {
      std::vector<std::int64_t> agreed(widths.size());
      MPI_Allreduce(widths.data(), agreed.data(), static_cast<int>(widths.size()), MPI_INT64_T, MPI_MAX, comm);
      widths = agreed;
      detail::collectively(comm, [&] { check_beyond_edges_covered(args); });
    }
    // The bytes of one point of every exchanged field must agree on the ranks exchanging it.
    std::vector<std::string> names;
    if (cart) {
      for (std::size_t i = 0; i < original.params.size(); ++i)
        if (widths[i * kWidths] || widths[i * kWidths + 1] || widths[i * kWidths + 2] || widths[i * kWidths + 3])
          names.push_back(original.params[i].name);
    } else {
      for (const auto& mf : mesh_fields) names.push_back(mf.param);
    }
    std::vector<std::uint64_t> layout, lowest(names.size()), highest(names.size());
    for (const auto& name : names) layout.push_back(undecomposed_layout(*field_argument(args, name, original.name), decomposed));
    MPI_Allreduce(layout.data(), lowest.data(), static_cast<int>(layout.size()), MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(layout.data(), highest.data(), static_cast<int>(layout.size()), MPI_UINT64_T, MPI_MAX, comm);
    for (std::size_t i = 0; i < names.size(); ++i)
      if (lowest[i] != highest[i])
        throw ArgumentError(fmt::format("program '{}': field '{}' has a different dtype, shape or origin along its "
                                        "undecomposed dimensions on different ranks (they exchange its halo point by point)",
                                        original.name, names[i]));
    if (cart) plan_cartesian(args); else plan_mesh(args);
    key = std::move(k);
  }

  Arguments piece_arguments(const Arguments& args, int piece) const {
    Arguments a;
    for (const auto& e : args.entries()) {
      switch (e.kind) {
        case Arguments::Entry::Kind::field: a.field(e.name, *e.field); break;
        case Arguments::Entry::Kind::scalar: a.scalar(e.name, e.scalar); break;
        case Arguments::Entry::Kind::connectivity: a.connectivity(e.name, *e.table); break;
      }
    }
    for (const auto& [name, v] : piece_bounds[static_cast<std::size_t>(piece)])
      a.scalar(name, Scalar(static_cast<std::int32_t>(v)));
    return a;
  }

  void exchange_only(const Arguments& args) {
    bind_and_acquire(args);
    exchange->start(plan, fields, stats);
    exchange->finish(plan, fields, stats);
    ++stats.calls;
  }

  // The pieces a call runs, in order, and the compiled instance of each.
  std::vector<int> running_pieces() const {
    std::vector<int> out;
    if (!overlap) out.push_back(whole);
    else
      for (int p = interior; p < static_cast<int>(piece_bounds.size()); ++p) out.push_back(p);
    return out;
  }
  CompiledProgram& instance_of(int piece) { return pieces[static_cast<std::size_t>(overlap ? piece : 0)]; }

  // The rank's outputs, saved before a call whose kernels check reads while running (dynamic
  // offsets): a read that fails on one rank, or in a later piece, is found only after other
  // ranks and pieces have written. Host fields only, as the exchange (the buffers are kept).
  // Element by element: the bytes between a view's elements may be another thread's.
  void save_outputs(const Arguments& args) {
    saved_outputs.clear();
    for (const auto& st : original.stmts)
      for (const auto& name : st.outputs) {
        Field* f = field_argument(args, name, original.name);
        if (f->device() != Device::cpu || std::any_of(saved_outputs.begin(), saved_outputs.end(),
                                                      [&](const auto& s) { return s.first == f; }))
          continue;
        const std::size_t i = saved_outputs.size();
        if (saved_bytes.size() <= i) saved_bytes.emplace_back();
        saved_bytes[i].resize(f->bytes());
        ir::pack_elements(*f, saved_bytes[i].data());
        saved_outputs.emplace_back(f, i);
      }
  }
  void restore_outputs() {
    for (const auto& [f, i] : saved_outputs) ir::unpack_elements(*f, saved_bytes[i].data());
  }

  void call(const Arguments& args) {
    bind_and_acquire(args);
    // Every rank checks every piece's call before any rank runs one: a call that one rank's
    // part rejects (a field too short there, a table entry out of range) changes nothing on any.
    detail::collectively(comm, [&] {
      for (int piece : running_pieces())
        if (piece_active[static_cast<std::size_t>(piece)]) instance_of(piece).check(piece_arguments(args, piece));
    });
    if (checks_while_running) save_outputs(args);
    std::exception_ptr error;
    auto run = [&](int piece) {
      if (error || !piece_active[static_cast<std::size_t>(piece)]) return;
      try {
        const double t0 = now();
        instance_of(piece)(piece_arguments(args, piece));
        stats.compute_seconds += now() - t0;
      } catch (...) {
        error = std::current_exception();
      }
    };
    exchange->start(plan, fields, stats);
    if (overlap) {
      run(interior);
      exchange->finish(plan, fields, stats);
      for (int p = border_first; p < static_cast<int>(piece_bounds.size()); ++p) run(p);
    } else {
      exchange->finish(plan, fields, stats);
      run(whole);
    }
    ++stats.calls;
    try {
      detail::collectively(comm, [&] {
        if (error) std::rethrow_exception(error);
      });
    } catch (...) {
      if (checks_while_running) restore_outputs();
      throw;
    }
  }
};

DistributedProgram::DistributedProgram(const ir::Program& program, const CartesianDecomposition& d,
                                       CompileOptions options, DistributedOptions distributed)
    : impl_(std::make_unique<Impl>(program, d.comm(), std::move(options), std::move(distributed))) {
  impl_->cart = &d;
  impl_->prepare({d.grid().i, d.grid().j});
}

DistributedProgram::DistributedProgram(const ir::Program& program, const MeshDecomposition& d, CompileOptions options,
                                       DistributedOptions distributed)
    : impl_(std::make_unique<Impl>(program, d.comm(), std::move(options), std::move(distributed))) {
  impl_->mesh = &d;
  std::vector<Dimension> locations;
  for (const auto& l : {"Vertex", "Edge", "Cell"}) locations.push_back(horizontal_dim(l));
  impl_->prepare(locations);
  impl_->prepare_mesh();
}

DistributedProgram::DistributedProgram(DistributedProgram&&) noexcept = default;
DistributedProgram& DistributedProgram::operator=(DistributedProgram&&) noexcept = default;
DistributedProgram::~DistributedProgram() = default;

void DistributedProgram::operator()(const Arguments& local_args) { impl_->call(local_args); }
void DistributedProgram::exchange(const Arguments& local_args) { impl_->exchange_only(local_args); }
const std::map<std::string, std::int64_t>& DistributedProgram::received_elements() const { return impl_->received; }
WorkspaceRequirement DistributedProgram::halo_workspace_requirement() const {
  return {Device::cpu, impl_->exchange->last_bytes(), transient_alignment};
}
ExchangeStats DistributedProgram::exchange_stats() const { return impl_->stats; }
MemoryStats DistributedProgram::halo_memory_stats() const { return impl_->exchange->memory().stats(); }
bool DistributedProgram::overlaps() const { return impl_->overlap; }
const ir::Program& DistributedProgram::program() const { return impl_->original; }

}  // namespace fieldflow::distributed
