#pragma once
// Shared pieces of the example programs: their dimensions and connectivities, seeded smooth data,
// and field construction helpers. Internal to src/examples/.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fieldflow/dsl.h"
#include "fieldflow/examples.h"
#include "fieldflow/field.h"
#include "fieldflow/ir.h"
#include "fieldflow/mesh.h"

namespace fieldflow::examples::detail {

// Dimensions: I, J, K for Cartesian grids; Vertex, Edge, Cell (the mesh tables' location names,
// which call binding checks) and K for meshes.
const Dimension& dim_I();
const Dimension& dim_J();
const Dimension& dim_K();
const Dimension& dim_vertex();
const Dimension& dim_edge();
const Dimension& dim_cell();

// Connectivities, named like the torus mesh's tables.
const Connectivity& conn_E2V();
const Connectivity& conn_V2E();
const Connectivity& conn_E2C2V();
const Connectivity& conn_C2E2CO();

// x(conn[index]) (index -1: the local field x(conn)). The DSL may reject shifts whose source and
// target are the same location (Cell -> Cell); then the node is built directly, with exactly
// the type the DSL gives any other neighbour shift.
Expr neighbor_shift(const Expr& x, const Connectivity& conn, int index = -1);

// A smooth, seeded function of up to three coordinates with values in
// [center - amplitude, center + amplitude]. `salt` makes each field's data different.
// Periods > 0 make the x / y dependence periodic with that period (for the torus).
class Wave {
 public:
  Wave(std::uint64_t seed, std::string_view salt, double center, double amplitude, double period_x = 0,
       double period_y = 0);
  double operator()(double x, double y, double z) const;

 private:
  double center_, amplitude_;
  double fx_, fy_, fz_, px_, py_, pz_;
};

// Sets every element of f to value(absolute index, in f's dims order).
void fill(Field& f, const std::function<double(const std::vector<std::int64_t>&)>& value);

// The connectivity parameters of a program (the tables an instance passes).
std::vector<std::string> connectivity_names(const ir::Program& p);

Scalar int_scalar(std::int64_t v);  // int32 size argument

std::vector<Example> cartesian_examples();
std::vector<Example> unstructured_examples();

}  // namespace fieldflow::examples::detail
