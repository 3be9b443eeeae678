#pragma once
// Which points of a mesh a program reads, point by point: the set form of extent inference
// (ir::compute_extents gives bounding ranges, which suffice for sizing memory but not for deciding
// which points a rank must receive). Walks a lowered schedule over concrete neighbour tables.
//
// Supported reads of a mesh field (anything else is a ProgramError naming the program and field):
// at the kernel's own point, or through a chain of neighbour tables starting at the kernel's
// point. Vertical and neighbour-slot dimensions are not decomposed and are ignored here.
#include <map>
#include <string>
#include <vector>

#include "fieldflow/mesh.h"
#include "ir/schedule.h"

namespace fieldflow::distributed::detail {

using PointMask = std::vector<char>;  // one flag per point of a location

// The tables a walk follows. `complete_rows` (per table name; absent: every row complete) marks
// the rows whose entries are all known; a walk that needs another row throws DomainError.
struct MeshTables {
  const Mesh* mesh = nullptr;
  const std::map<std::string, PointMask>* complete_rows = nullptr;
};

struct MeshReads {
  std::map<std::string, PointMask> field_points;  // per field parameter: the points read
  std::map<std::string, PointMask> loop_points;   // per location: points some kernel computes
  std::map<std::string, PointMask> reached;       // per location: loop points and points read
  // Per location: points whose table rows a read looks up, the kernels' own points and the
  // points midway along a chain of tables (E2C2V after C2E[0]): a rank needs those rows whole.
  std::map<std::string, PointMask> rows_read;
};

// The horizontal (mesh location) dimension among `dims`, or nullptr.
const Dimension* location_dim(const std::vector<Dimension>& dims);

// Checks that every read of `s` is of a supported kind (ProgramError otherwise).
void check_mesh_reads_supported(const ir::Schedule& s);

// Reads of the kernels of `s` when statement `i` computes the points seeds[i] of its location
// (the kernels producing transients compute what their consumers read).
MeshReads mesh_reads(const ir::Schedule& s, const MeshTables& tables, const std::vector<PointMask>& seeds);

// Per statement, over its location: which of the points [0, owned) depend, through any chain of
// kernels, on a field value at a point >= owned of that field's location (a halo point), or
// visit a row that is not complete. `owned` per location name.
std::vector<PointMask> halo_dependent_points(const ir::Schedule& s, const MeshTables& tables,
                                             const std::map<std::string, std::int64_t>& owned);

// The location each statement's domain runs over (ProgramError if none, or more than one).
std::vector<Dimension> statement_locations(const ir::Schedule& s);

}  // namespace fieldflow::distributed::detail
