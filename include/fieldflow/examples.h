#pragma once
// The built-in example programs: classic weather/climate kernels written with the DSL, shared by
// the CLI demo, the tests and the benchmarks so all three exercise exactly the same programs.
//
// Every example comes with a factory for its arguments (fields filled with smooth, seeded,
// deterministic data, in the requested layout) and with the number of bytes a perfect
// implementation must move at least once, for bandwidth figures.
//
// Dimensions used: Cartesian examples over I, J (horizontal) and K (vertical); unstructured
// examples over Vertex, Edge, Cell (horizontal, named as the mesh tables' locations) and K, on
// the periodic mesh make_torus_mesh(nx, ny) with nk levels.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fieldflow/field.h"
#include "fieldflow/ir.h"
#include "fieldflow/mesh.h"

namespace fieldflow::examples {

// Cartesian: the output domain is [0,nx) x [0,ny) x [0,nk). Unstructured: the torus mesh
// make_torus_mesh(nx, ny) (nx, ny >= 3) with nk levels.
struct ExampleSize {
  int nx = 16, ny = 16, nk = 8;
  bool bounded = false;  // unstructured: make_bounded_mesh (tables with skip values -1) instead of the torus
};

// All data of one call of an example: owns its fields (and the mesh, for unstructured examples).
// Move-only; moving keeps every field at its address, so Arguments built before a move stay valid.
class ExampleInstance {
 public:
  ExampleInstance() = default;
  ExampleInstance(ExampleInstance&&) noexcept = default;
  ExampleInstance& operator=(ExampleInstance&&) noexcept = default;
  ExampleInstance(const ExampleInstance&) = delete;
  ExampleInstance& operator=(const ExampleInstance&) = delete;

  // Every field argument by parameter name. Inputs hold smooth data; outputs are pre-filled with
  // deterministic data too, so points outside the call's domain are recognisably untouched.
  std::map<std::string, Field> fields;
  std::map<std::string, Scalar> scalars;    // sizes (int32) and coefficients
  std::shared_ptr<const Mesh> mesh;         // unstructured examples only
  std::vector<std::string> connectivities;  // the program's connectivity parameters (table names)
  std::vector<std::string> outputs;         // names of the output fields, in call order

  // All arguments by parameter name; tables come from mesh->table(name). The Arguments borrow
  // this instance's fields: keep the instance alive while they are used.
  Arguments arguments();
};

struct Example {
  std::string name, description;
  bool unstructured = false;
  ir::Program program;  // built with the DSL
  std::function<ExampleInstance(const ExampleSize&, Layout, std::uint64_t seed)> make_instance;
  // Bytes that must move at least once: every input element the program reads (fields and
  // neighbour tables), plus every output element it writes (an in/out field counts both ways).
  std::function<double(const ExampleSize&)> compulsory_bytes;
};

// The examples, in a fixed order; names are unique.
const std::vector<Example>& all_examples();
// Throws fieldflow::ArgumentError naming `name` and listing the valid names.
const Example& example(const std::string& name);

}  // namespace fieldflow::examples
