#pragma once
// Random, valid fieldflow programs for differential fuzzing (docs/reliability.md).
//
// generate_case(seed) builds, through the public DSL, one program plus everything needed to call
// it: the extent of every field parameter (halos, non-zero origins), a few size sets and the
// layouts to compile for. The same seed always gives the same case. Inputs are not stored: they
// are drawn by make_call_data() from (case seed, size index), so a shrunk program (fewer
// statements, simpler expressions) is called with the same kind of data as the original.
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fieldflow/field.h"
#include "fieldflow/ir.h"
#include "fieldflow/mesh.h"

namespace fieldflow::fuzz {

// How far a field reaches past the size symbols of its dims: along a horizontal dim of size n it
// covers [-lo_halo, n + hi_halo); along K always [0, nk). Fields with lo_halo > 0 have a
// non-zero origin, the way a host passes a halo.
struct FieldExtent {
  int lo_halo = 0, hi_halo = 0;
};

// One set of sizes a case is called with. Cartesian: ni, nj, nk. Mesh: a torus or bounded mesh
// of nx x ny vertices, nk levels.
struct SizeSet {
  int ni = 0, nj = 0, nk = 0;  // Cartesian
  int nx = 0, ny = 0;          // mesh (unused for Cartesian programs)
  std::string to_string(bool mesh) const;
};

struct FuzzCase {
  std::uint64_t seed = 0;
  ir::Program program;
  bool mesh = false;     // unstructured (Vertex/Edge/Cell) instead of Cartesian (I/J)
  bool bounded = false;  // bounded mesh (tables with -1) instead of a torus
  std::map<std::string, FieldExtent> extents;  // by field parameter name
  std::vector<SizeSet> sizes;
  std::vector<Layout> layouts;
  // Also call with one input field one point too short on one side (read or not: the reference
  // decides whether that is an error, and the compiled program must agree).
  bool short_field_calls = false;
};

// What kind of program to draw. The defaults draw every shape; each option only narrows what is
// drawn from the same random stream, so a seed keeps its program otherwise.
struct GenerateOptions {
  // Programs a distributed call can run (docs/distributed.md): mesh statements over all of their
  // location, [0, n); data-dependent offsets only along K; no index of a mesh location (points
  // are numbered per rank), neither as a value nor in a concat_where condition.
  bool decomposable = false;
  // Cartesian domains inside the grid, [0, n) or narrower, as a periodic grid needs (it has no
  // points past its edges to compute).
  bool inside_the_grid = false;
};

FuzzCase generate_case(std::uint64_t seed, const GenerateOptions& options = {});

// The arguments of one call: owning fields (every one filled with random values, outputs too, so
// untouched points are checked), scalars and the mesh the tables come from.
struct CallData {
  std::shared_ptr<Mesh> mesh;
  std::map<std::string, Field> fields;
  std::map<std::string, Scalar> scalars;
  std::map<std::string, std::int64_t> size_values;  // ni/nj/nk or n_v/n_e/n_c/nk
  std::vector<std::string> tables;                   // connectivity parameters, bound from `mesh`
  std::map<std::string, Field> clone_fields() const;
  Arguments arguments(std::map<std::string, Field>& fields_to_bind) const;
};

// `shorten`: when non-empty, names a field parameter to allocate one point short (see
// short_field_calls); which dim and side comes from the same random stream.
CallData make_call_data(const FuzzCase& c, std::size_t size_index, Layout layout, const std::string& shorten = {});

// A field parameter worth shortening for this case (an input of some statement), or "" if none.
std::string field_to_shorten(const FuzzCase& c, std::size_t size_index);

// On one bounded-mesh call in four, the table make_call_data empties two rows of (row 0, and
// `row_draw` modulo its rows): elements without any neighbour there. A reduction over such a row
// reads nothing (no element stands in for a missing neighbour; with a field cut at its low end, a
// read of element 0 is one before its memory, which the ASan runs of the CTest seeds report); a
// fixed shift through it is rejected by both backends alike.
struct EmptiedRows {
  std::string table;
  std::uint64_t row_draw = 0;
};
std::optional<EmptiedRows> emptied_rows(const FuzzCase& c, std::size_t size_index);

}  // namespace fieldflow::fuzz
