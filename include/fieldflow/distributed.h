#pragma once
// Many nodes: domain decomposition and halo exchange on MPI (user guide: docs/distributed.md).
//
// A distributed call takes the arguments of the single-rank call, with every field replaced by
// the rank's part of it and every neighbour table by the rank's local table:
//  - Cartesian grids keep global indices: a rank's fields cover its owned block of (I, J) plus
//    the halo its programs read, at their global positions (Field origins);
//  - meshes are renumbered per rank: owned points first, halo points after them, and the local
//    tables (MeshDecomposition::local_mesh) index those local numbers.
// Scalars are those of the single-rank call (nx, n_vertices, ...): each statement's domain is cut
// to the rank's owned points by DistributedProgram itself.
//
// Every function here is collective over the decomposition's communicator: all ranks call it in
// the same order. A mistake on any rank (a field without the halo a program reads, decompositions
// that differ between ranks, ...) raises the same fieldflow::Error subclass on every rank, so no
// rank is left waiting in a message that never comes.
#include <mpi.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fieldflow/compile.h"
#include "fieldflow/ir.h"
#include "fieldflow/memory.h"
#include "fieldflow/mesh.h"

namespace fieldflow::distributed {

// The global index space of a Cartesian decomposition: [0, nx) x [0, ny) along two horizontal
// dimensions, each periodic or not.
struct CartesianGrid {
  std::int64_t nx = 0, ny = 0;
  bool periodic_i = false, periodic_j = false;
  Dimension i = horizontal_dim("I"), j = horizontal_dim("J");
};

// Block decomposition of a CartesianGrid over the ranks of `comm` (an MPI Cartesian communicator
// of px x py ranks; MPI_Dims_create chooses px, py when process_grid is {0, 0}). Blocks differ in
// size by at most one point per axis.
class CartesianDecomposition {
 public:
  // Throws ArgumentError on every rank when the ranks pass different grids or process grids, or
  // a process grid that does not match the communicator's size or the grid.
  CartesianDecomposition(MPI_Comm comm, CartesianGrid grid, std::array<int, 2> process_grid = {0, 0});
  ~CartesianDecomposition();
  CartesianDecomposition(const CartesianDecomposition&) = delete;
  CartesianDecomposition& operator=(const CartesianDecomposition&) = delete;

  MPI_Comm comm() const { return comm_; }  // the Cartesian communicator (owned)
  int rank() const { return rank_; }
  int size() const { return size_; }
  const CartesianGrid& grid() const { return grid_; }
  std::array<int, 2> process_grid() const { return dims_; }
  std::array<int, 2> coords() const { return coords_; }
  // The owned block [begin, end) along axis 0 (I) or 1 (J), in global indices.
  std::int64_t begin(int axis) const { return begin_[axis]; }
  std::int64_t end(int axis) const { return end_[axis]; }
  // The rank at offset (di, dj) in the process grid (wrapping where periodic), MPI_PROC_NULL
  // beyond a non-periodic edge.
  int neighbor(int di, int dj) const;
  // A stable description that every rank computes alike (grid, process grid), for checks.
  std::string describe() const;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  CartesianGrid grid_;
  int rank_ = 0, size_ = 1;
  std::array<int, 2> dims_{1, 1}, coords_{0, 0};
  std::array<std::int64_t, 2> begin_{0, 0}, end_{0, 0};
};

struct HaloPatternCache;  // exchange patterns shared by the programs on one decomposition

// A mesh partitioned over the ranks of `comm`: METIS splits the cells (rank 0 partitions, every
// rank receives the result); an edge belongs to the rank owning its lowest-numbered cell, a vertex
// likewise. Each rank keeps its owned points and the halo the given programs read from them
// (their statements' reads, followed through the neighbour tables, transients included), plus
// the direct neighbours of every point it computes, so each table row a kernel can visit is
// complete. Local numbering per location: owned points first, ordered from deepest inside the
// partition to its border (so points whose reads need no halo form a prefix), then halo points
// grouped by owning rank.
class MeshDecomposition {
 public:
  struct Options {
    int metis_seed = 1;
  };
  // `global` must be the same mesh on every rank (checked: ArgumentError on every rank
  // otherwise). Throws ProgramError when a program reads a field through a table whose rows it
  // cannot know from its domain (a data-dependent index), or shifts a mesh index by an offset.
  MeshDecomposition(MPI_Comm comm, const Mesh& global, const std::vector<ir::Program>& programs, Options options);
  MeshDecomposition(MPI_Comm comm, const Mesh& global, const std::vector<ir::Program>& programs)
      : MeshDecomposition(comm, global, programs, Options{}) {}
  ~MeshDecomposition();
  MeshDecomposition(const MeshDecomposition&) = delete;
  MeshDecomposition& operator=(const MeshDecomposition&) = delete;

  MPI_Comm comm() const { return comm_; }  // a duplicate of the communicator given (owned)
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The rank's mesh: local tables (entries -1 where the global table has -1, or where the target
  // is not kept on this rank), geometry of the local points.
  const Mesh& local_mesh() const { return local_; }
  // "Vertex", "Edge", "Cell": owned points (local ids [0, owned)), all local points, and the
  // global id of every local point.
  std::int64_t owned(const std::string& location) const;
  std::int64_t local(const std::string& location) const;
  std::int64_t global_size(const std::string& location) const;
  const std::vector<std::int64_t>& global_ids(const std::string& location) const;
  // The rank owning each local point (this rank for [0, owned)).
  const std::vector<int>& owners(const std::string& location) const;
  // Rows of a local table whose every entry is known on this rank (a kernel may visit them).
  const std::vector<char>& complete_rows(const std::string& table) const;
  // Global sizes and a fingerprint of the global mesh (equal on every rank).
  std::string describe() const;
  HaloPatternCache& patterns() const { return *patterns_; }

 private:
  struct Location {
    std::int64_t owned = 0, global_size = 0;
    std::vector<std::int64_t> global_ids;
    std::vector<int> owners;
  };
  const Location& location_(const std::string& name) const;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1;
  Mesh local_;
  std::map<std::string, Location> locations_;
  std::map<std::string, std::vector<char>> complete_rows_;
  std::string description_;
  std::unique_ptr<HaloPatternCache> patterns_;
};

struct DistributedOptions {
  // Run the points whose reads need no halo while the messages are in flight, then the others.
  // Programs that write a field they also read at other points run in one piece after the
  // exchange whatever this says (their order of reads and writes would change otherwise).
  bool overlap = true;
  // Memory of the pack buffers. Unset: the pack buffers follow the program's own memory options
  // (the same mode; in external mode the same allocator, asked once more for them). A caller-owned
  // transient workspace cannot also hold the pack buffers while the program runs over it: give
  // them their own here (size from halo_workspace_requirement()).
  std::optional<Workspace> halo_workspace;
};

// What the halo exchange of a program did, summed over calls (seconds on this rank).
struct ExchangeStats {
  std::uint64_t calls = 0;  // exchanges: calls of the program and of exchange()
  std::uint64_t messages_sent = 0;
  std::uint64_t bytes_sent = 0;
  double pack_seconds = 0, wait_seconds = 0, unpack_seconds = 0, compute_seconds = 0;
};

// A program compiled for one decomposition (which must outlive it). Its inferred read extents say, per call, which field
// arguments are read outside the rank's owned points and how far: exactly those halos are
// exchanged (several fields in one message per neighbour) before the points that need them run.
class DistributedProgram {
 public:
  // Collective (compiles on rank 0 first, the others then find it in the cache). Throws
  // ProgramError on every rank for programs it cannot distribute (see docs/distributed.md):
  // a statement that reads another statement's output outside the point it computes, a domain
  // that is not along the decomposed dimensions, or (meshes) a program the decomposition was not
  // built for whose reads reach points the rank does not hold.
  DistributedProgram(const ir::Program& program, const CartesianDecomposition& decomposition,
                     CompileOptions options = {}, DistributedOptions distributed = {});
  DistributedProgram(const ir::Program& program, const MeshDecomposition& decomposition,
                     CompileOptions options = {}, DistributedOptions distributed = {});
  DistributedProgram(DistributedProgram&&) noexcept;
  DistributedProgram& operator=(DistributedProgram&&) noexcept;
  ~DistributedProgram();

  // Collective. Exchanges the halos the call reads, runs the rank's part of every statement.
  // Throws (on every rank) what a single-rank call would throw, plus DomainError for a field that
  // does not cover the halo the call reads.
  void operator()(const Arguments& local_args);
  // Collective. Only the halo exchange of such a call (no computation): e.g. to fill halos for
  // output, or to time the exchange alone.
  void exchange(const Arguments& local_args);

  // The fields exchanged by the last call and, per field, the elements received on this rank.
  const std::map<std::string, std::int64_t>& received_elements() const;
  // Bytes and alignment the pack buffers need, known after the first call (0 before).
  WorkspaceRequirement halo_workspace_requirement() const;
  ExchangeStats exchange_stats() const;
  MemoryStats halo_memory_stats() const;  // the pack buffers' memory (see DistributedOptions)
  bool overlaps() const;                  // overlap requested and possible for this program
  const ir::Program& program() const;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

// Collective: every rank receives the global field with each rank's owned points of `local`
// written into `global` (which has the global field's dims and dtype; points nobody owns keep
// their values). Cartesian: owned boxes at their global indices; meshes: the location dimension
// through the global ids. Throws ArgumentError (on every rank) when shapes do not fit.
void gather(const CartesianDecomposition& d, const Field& local, Field& global);
void gather(const MeshDecomposition& d, const Field& local, Field& global);

}  // namespace fieldflow::distributed
