// The distributed differential harness (see distributed_differential.h).
#include "distributed/distributed_differential.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mpi.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <set>

#include "fieldflow/distributed.h"
#include "fieldflow/errors.h"
#include "fieldflow/reference.h"
#include "fuzz/differential.h"

namespace fieldflow::fuzz {

namespace {

const Dimension I = horizontal_dim("I"), J = horizontal_dim("J");
constexpr std::int64_t kMargin = 6;  // local Cartesian fields reach this far past the rank's block (reads reach 4)

// A value no computation of the fuzzer's programs produces from its inputs by chance.
void poison(Field& f, std::int64_t offset) {
  switch (f.dtype()) {
    case DType::boolean: f.set_from_double(offset, 1); break;
    case DType::int32: case DType::int64: f.set_from_double(offset, 1588444911); break;
    default: f.set_from_double(offset, std::numeric_limits<double>::quiet_NaN());
  }
}

// The next step's value of an input element: floats halved and moved, integers and bools with
// their lowest bit flipped (no arithmetic that could overflow near the limits the generator uses).
void perturb(Field& f, std::int64_t offset, int step) {
  if (is_floating(f.dtype())) {
    f.set_from_double(offset, 0.5 * f.get_as_double(offset) + 0.125 * (step + 1));
    return;
  }
  auto* p = static_cast<unsigned char*>(f.data()) + offset * static_cast<std::int64_t>(size_of(f.dtype()));
  *p ^= 1;  // little-endian: the lowest byte holds the lowest bit
}

// Which points of a global field a rank holds as its own: `mine` decides per global index (the
// rank computes it, or receives it from the host as on one rank); only those are copied into the
// rank's field at the start, perturbed alike between steps, and compared after each step.
struct Part {
  std::function<bool(const std::vector<std::int64_t>&)> mine;       // by the local field's index
  std::function<std::vector<std::int64_t>(const std::vector<std::int64_t>&)> global;  // local index -> global
  std::function<bool(const std::vector<std::int64_t>&)> compared;   // by the local field's index
};

using Outcome = DistributedOutcome;

class CaseRunner {
 public:
  CaseRunner(const FuzzCase& c, const DistributedSettings& settings) : c_(c), settings_(settings) {}

  Outcome run() {
    Outcome o = run_case();
    if (o.kind == Outcome::failed) o.detail = label_ + ": " + o.detail;
    return o;
  }

 private:
  Outcome run_case() {
    const DistributedSettings& s = settings_;
    FuzzCase c = c_;
    c.sizes = {s.sizes};
    label_ = s.describe(c.mesh);
    CallData data = make_call_data(c, 0, s.layout);

    CompileOptions options;
    options.layout = s.layout;
    options.num_threads = s.threads;
    options.parallel_threshold = 0;  // the OpenMP path of every piece
    options.memory.mode = s.mode;
    if (s.mode == TransientMemoryMode::external)
      options.memory.external_memory_allocator = [](const AllocationRequest& r) {
        void* block = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
        return Workspace{block, r.bytes, r.device, [block] { std::free(block); }};
      };
    distributed::DistributedOptions spread;
    spread.overlap = s.overlap;
    try {
      if (c.mesh) {
        distributed::MeshDecomposition d(MPI_COMM_WORLD, *data.mesh, {c.program});
        distributed::DistributedProgram p(c.program, d, options, spread);
        return run_steps(data, p, mesh_part(d), nullptr, &d);
      }
      distributed::CartesianDecomposition d(MPI_COMM_WORLD, {s.sizes.ni, s.sizes.nj, s.periodic[0], s.periodic[1]},
                                            s.process_grid);
      distributed::DistributedProgram p(c.program, d, options, spread);
      return run_steps(data, p, cartesian_part(d), &d, nullptr);
    } catch (const ProgramError& e) {
      return {Outcome::refused, e.what()};
    }
  }

  // Cartesian: global indices kept; the rank holds its block along I and J, and at a
  // non-periodic grid edge what lies beyond it (the host's boundary values, and the points it
  // computes there). Past a periodic edge lies halo like any other, which the exchange fills.
  std::function<Part(const Field&)> cartesian_part(const distributed::CartesianDecomposition& d) {
    return [&d](const Field& g) {
      const int axes[2] = {g.axis_of(I), g.axis_of(J)};
      const std::int64_t n[2] = {d.grid().nx, d.grid().ny};
      const bool wraps[2] = {d.grid().periodic_i, d.grid().periodic_j};
      auto along = [&d, n, wraps](int a, std::int64_t i) {
        return (i >= d.begin(a) && i < d.end(a)) ||
               (!wraps[a] && ((i < 0 && d.begin(a) == 0) || (i >= n[a] && d.end(a) == n[a])));
      };
      Part p;
      p.mine = [axes, n, wraps, along](const std::vector<std::int64_t>& i) {
        bool all = true, beyond = false;
        for (int a = 0; a < 2; ++a)
          if (axes[a] >= 0) {
            all = all && along(a, i[axes[a]]);
            beyond = beyond || (!wraps[a] && (i[axes[a]] < 0 || i[axes[a]] >= n[a]));
          }
        return all || beyond;  // beyond a non-periodic edge: the host's boundary values, given to every rank
      };
      p.global = [](const std::vector<std::int64_t>& i) { return i; };
      p.compared = [axes, along](const std::vector<std::int64_t>& i) {
        for (int a = 0; a < 2; ++a)
          if (axes[a] >= 0 && !along(a, i[axes[a]])) return false;
        return true;
      };
      return p;
    };
  }

  // Meshes: local numbers; the rank holds its owned points [0, owned) of each location.
  std::function<Part(const Field&)> mesh_part(const distributed::MeshDecomposition& d) {
    return [&d](const Field& g) {
      int axis = -1;
      for (std::size_t a = 0; a < g.dims().size(); ++a)
        if (g.dims()[a].kind == DimKind::horizontal) axis = static_cast<int>(a);
      Part p;
      if (axis < 0) {  // a column: every rank holds all of it
        p.mine = p.compared = [](const std::vector<std::int64_t>&) { return true; };
        p.global = [](const std::vector<std::int64_t>& i) { return i; };
        return p;
      }
      const std::string loc = g.dims()[axis].name;
      const std::int64_t owned = d.owned(loc);
      const std::vector<std::int64_t>* ids = &d.global_ids(loc);
      p.mine = p.compared = [axis, owned](const std::vector<std::int64_t>& i) { return i[axis] >= 0 && i[axis] < owned; };
      p.global = [axis, ids](std::vector<std::int64_t> i) {
        i[axis] = (*ids)[static_cast<std::size_t>(i[axis])];
        return i;
      };
      return p;
    };
  }

  // The rank's field of a global one: Cartesian, the global box cut to the block plus kMargin;
  // meshes, the location axis with the rank's local points (and the global field's halo widths).
  static Field local_field(const Field& g, const distributed::CartesianDecomposition* cart,
                           const distributed::MeshDecomposition* mesh) {
    std::vector<std::int64_t> shape = g.shape(), origin = g.origin();
    for (std::size_t a = 0; a < g.dims().size(); ++a) {
      const Dimension& dim = g.dims()[a];
      if (dim.kind != DimKind::horizontal) continue;
      if (cart) {
        const int axis = dim == I ? 0 : 1;
        const std::int64_t lo = std::max(g.origin()[a], cart->begin(axis) - kMargin);
        const std::int64_t hi = std::min(g.origin()[a] + g.shape()[a], cart->end(axis) + kMargin);
        origin[a] = lo;
        shape[a] = hi - lo;
      } else {
        shape[a] += mesh->local(dim.name) - mesh->global_size(dim.name);
      }
    }
    return Field(g.dims(), g.dtype(), shape, origin, g.layout());
  }

  Outcome run_steps(const CallData& data, distributed::DistributedProgram& program, const std::function<Part(const Field&)>& part_of,
                    const distributed::CartesianDecomposition* cart, const distributed::MeshDecomposition* mesh) {
    std::set<std::string> written;
    for (const ir::Stmt& st : c_.program.stmts) written.insert(st.outputs.begin(), st.outputs.end());

    std::map<std::string, Field> global = data.clone_fields(), local;
    std::map<std::string, Part> parts;
    for (const auto& [name, g] : global) {
      Part p = part_of(g);
      Field f = local_field(g, cart, mesh);
      f.for_each_index([&](const std::vector<std::int64_t>& i) {
        const std::int64_t o = f.offset_of(i);
        if (!p.mine(i)) return poison(f, o);
        const std::int64_t go = g.offset_of(p.global(i));
        std::memcpy(static_cast<char*>(f.data()) + o * size_of(f.dtype()),
                    static_cast<const char*>(g.data()) + go * size_of(g.dtype()), size_of(g.dtype()));
      });
      parts.emplace(name, std::move(p));
      local.emplace(name, std::move(f));
    }
    Arguments global_args = data.arguments(global), local_args;
    for (auto& [name, f] : local) local_args.field(name, f);
    for (const auto& [name, v] : data.scalars) local_args.scalar(name, v);
    for (const std::string& t : data.tables) local_args.connectivity(t, mesh ? mesh->local_mesh().table(t) : data.mesh->table(t));

    for (int step = 0; step < settings_.steps; ++step) {
      if (cart)
        for (auto& [name, g] : global) wrap_past_periodic_edges(g, *cart);
      // A rank's finding ends the case on every rank: the others must not wait in the next call.
      bool stop = false;
      Outcome o = check_step(step, global_args, local_args, global, local, parts, written, program, stop);
      int mine = stop || o.kind != Outcome::passed, any = 0;
      MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
      if (any) return o;
      for (auto& [name, g] : global) {  // the next step's inputs
        if (written.count(name)) continue;
        Field& f = local.at(name);
        const Part& p = parts.at(name);
        g.for_each_index([&](const std::vector<std::int64_t>& i) { perturb(g, g.offset_of(i), step); });
        f.for_each_index([&](const std::vector<std::int64_t>& i) {
          if (p.mine(i)) perturb(f, f.offset_of(i), step);
        });
      }
    }
    return {};
  }

  // What a host does before each call on one rank of a periodic grid: every point past a
  // periodic edge (that the field has) takes the value of the point it wraps to.
  static void wrap_past_periodic_edges(Field& g, const distributed::CartesianDecomposition& d) {
    const int axes[2] = {g.axis_of(I), g.axis_of(J)};
    const std::int64_t n[2] = {d.grid().nx, d.grid().ny};
    const bool wraps[2] = {d.grid().periodic_i, d.grid().periodic_j};
    g.for_each_index([&](const std::vector<std::int64_t>& i) {
      std::vector<std::int64_t> w = i;
      for (int a = 0; a < 2; ++a)
        if (axes[a] >= 0 && wraps[a]) {
          const int fa = axes[a];
          w[fa] = (i[fa] % n[a] + n[a]) % n[a];
          if (w[fa] < g.origin()[fa] || w[fa] >= g.origin()[fa] + g.shape()[fa]) return;
        }
      if (w == i) return;
      const std::size_t bytes = size_of(g.dtype());
      std::memcpy(static_cast<char*>(g.data()) + g.offset_of(i) * bytes,
                  static_cast<const char*>(g.data()) + g.offset_of(w) * bytes, bytes);
    });
  }

  // One step: the reference over the global fields, the distributed call over the rank's, then
  // the rank's part of every field compared. `stop`: the case ends here without a finding.
  Outcome check_step(int step, const Arguments& global_args, const Arguments& local_args,
                     const std::map<std::string, Field>& global, const std::map<std::string, Field>& local,
                     const std::map<std::string, Part>& parts, const std::set<std::string>& written,
                     distributed::DistributedProgram& program, bool& stop) {
    std::string want_error, want_message, got_error, got_message;
    try {
      run_reference(c_.program, global_args);
    } catch (const Error& e) {
      want_error = error_kind(e);
      want_message = e.what();
    }
    // A rejected call must leave the rank's points as they were (the halo may have been filled).
    std::map<std::string, Field> before;
    for (const auto& [name, f] : local) before.emplace(name, f.clone());
    try {
      program(local_args);
    } catch (const Error& e) {
      got_error = error_kind(e);
      got_message = e.what();
    }
    if (want_error.empty() && got_error == "DomainError" && got_message.find("fewer ranks") != std::string::npos)
      return {Outcome::refused, got_message};  // a halo wider than a block: the decomposition's limit
    if (want_error.empty() && got_error == "DomainError" && got_message.find("beyond the periodic grid") != std::string::npos)
      return {Outcome::refused, got_message};  // a periodic grid has no points past its edge to compute
    if (want_error != got_error)
      return {Outcome::failed, fmt::format("step {}: the reference {}, the distributed call {}{}", step,
                                           want_error.empty() ? "accepted" : fmt::format("threw {} ({})", want_error, want_message),
                                           got_error.empty() ? "accepted" : "threw " + got_error,
                                           got_message.empty() ? "" : ": " + got_message),
              "error mismatch"};
    if (!want_error.empty()) {  // rejected alike: the rank's points must be unchanged
      stop = true;
      for (const auto& [name, f] : local) {
        const Field& b = before.at(name);
        std::int64_t changed = 0;
        std::string first;
        f.for_each_index([&](const std::vector<std::int64_t>& i) {
          if (!parts.at(name).compared(i) || same_element(b, b.offset_of(i), f, f.offset_of(i))) return;
          if (changed++ == 0) first = fmt::format("first at local {}: was {}, now {}", fmt::join(i, ","),
                                                  b.get_as_double(b.offset_of(i)), f.get_as_double(f.offset_of(i)));
        });
        if (changed > 0)
          return {Outcome::failed, fmt::format("step {}: the call was rejected ({}) but changed {} of field '{}''s "
                                               "elements on this rank; {}", step, got_message, changed, name, first),
                  "rejected call wrote"};
      }
      return {};
    }
    for (auto& [name, f] : local) {
      const Field& g = global.at(name);
      const Part& p = parts.at(name);
      std::int64_t count = 0;
      std::string first;
      f.for_each_index([&](const std::vector<std::int64_t>& i) {
        if (!p.compared(i)) return;
        const std::vector<std::int64_t> gi = p.global(i);
        if (same_element(g, g.offset_of(gi), f, f.offset_of(i))) return;
        if (count++ == 0)
          first = fmt::format("first at local {} (global {}): expected {}, got {}", fmt::join(i, ","), fmt::join(gi, ","),
                              g.get_as_double(g.offset_of(gi)), f.get_as_double(f.offset_of(i)));
      });
      if (count > 0)
        return {Outcome::failed, fmt::format("step {}: field '{}'{}: {} of the rank's elements differ; {}", step, name,
                                             written.count(name) ? " (written)" : "", count, first),
                "values differ"};
    }
    return {};
  }

  const FuzzCase& c_;
  DistributedSettings settings_;
  std::string label_;
};

}  // namespace

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int s = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

std::string DistributedSettings::describe(bool mesh) const {
  std::string s = sizes.to_string(mesh);
  if (!mesh)
    s += fmt::format(", {}x{} ranks{}", process_grid[0], process_grid[1],
                     periodic[0] || periodic[1] ? fmt::format(", periodic {}{}", periodic[0] ? "I" : "", periodic[1] ? "J" : "")
                                                : std::string());
  return s + fmt::format(", {}, {}, {} thread(s), overlap {}", to_string(layout), to_string(mode), threads, overlap);
}

DistributedSettings draw_settings(const FuzzCase& c, std::uint64_t seed) {
  std::mt19937_64 rng(seed * 0x2545F4914F6CDD1Dull + 17);
  auto uni = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  DistributedSettings s;
  s.sizes.nk = std::array{1, 2, 3, 5}[uni(0, 3)];
  if (c.mesh) {
    s.sizes.nx = uni(4, 9);
    s.sizes.ny = uni(4, 8);
  } else {
    MPI_Dims_create(world_size(), 2, s.process_grid.data());
    if (uni(0, 1)) std::swap(s.process_grid[0], s.process_grid[1]);
    s.sizes.ni = uni(5 * s.process_grid[0], 5 * s.process_grid[0] + 9);
    s.sizes.nj = uni(5 * s.process_grid[1], 5 * s.process_grid[1] + 9);
  }
  s.layout = c.layouts[0];
  s.threads = uni(1, 2);
  s.mode = std::array{TransientMemoryMode::pool, TransientMemoryMode::scoped, TransientMemoryMode::persistent,
                      TransientMemoryMode::external}[uni(0, 3)];
  s.overlap = uni(0, 1);
  if (!c.mesh) {  // drawn last: earlier seeds keep their other settings
    s.periodic = {uni(0, 1) == 0, uni(0, 1) == 0};
    // A periodic grid has no points past its edge to compute (a call there is refused), and many
    // of the generator's programs have a domain reaching past some edge: an axis wraps only where
    // every domain along it lies inside the grid, so periodic cases run rather than being refused.
    const std::map<std::string, std::int64_t> sizes{{"ni", s.sizes.ni}, {"nj", s.sizes.nj}, {"nk", s.sizes.nk}};
    const std::int64_t n[2] = {s.sizes.ni, s.sizes.nj};
    for (const ir::Stmt& st : c.program.stmts)
      for (const auto& r : st.domain)
        for (int a = 0; a < 2; ++a)
          if (r.dim == (a == 0 ? I : J) && (r.lo.evaluate(sizes) < 0 || r.hi.evaluate(sizes) > n[a])) s.periodic[a] = false;
  }
  return s;
}

DistributedOutcome check_distributed(const FuzzCase& c, const DistributedSettings& settings) {
  try {
    return CaseRunner(c, settings).run();
  } catch (const std::exception& e) {
    return {Outcome::failed, fmt::format("{}: {} while setting up: {}", settings.describe(c.mesh), error_kind(e), e.what()),
            error_kind(e) + " while setting up"};
  }
}

}  // namespace fieldflow::fuzz
