// The README's example: a Laplacian over a 3-D grid, compiled for the CPU, with the memory of
// intermediate fields supplied by the host through an allocator callback.
#include <cstdlib>

#include "fieldflow/compile.h"
#include "fieldflow/dsl.h"

using namespace fieldflow;

// A field operator is a plain C++ function from fields to a field.
Expr laplacian(const Expr& f, const Dimension& I, const Dimension& J) {
  return -4.0 * f + f(I + 1) + f(I - 1) + f(J + 1) + f(J - 1);
}

double quickstart() {
  const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
  ProgramBuilder p("lap_of_lap");
  Expr in = p.field("in", {I, J, K}, DType::float64);
  Expr out = p.field("out", {I, J, K}, DType::float64);
  Expr n = p.scalar("n", DType::int32), nk = p.scalar("nk", DType::int32);
  p.call("lap_of_lap", laplacian(laplacian(in, I, J), I, J), {out}, {{I, 0, n}, {J, 0, n}, {K, 0, nk}});

  CompileOptions options;  // cpu backend, vertical dimension unit-stride
  options.memory.external_memory_allocator = [](const AllocationRequest& r) {
    void* block = std::aligned_alloc(r.alignment, (r.bytes + r.alignment - 1) / r.alignment * r.alignment);
    return Workspace{block, r.bytes, r.device, [block] { std::free(block); }};
  };
  CompiledProgram program = compile(p.build(), options);

  const int size = 32, levels = 8;
  Field input({I, J, K}, DType::float64, {size + 4, size + 4, levels}, {-2, -2, 0});  // halo of 2
  Field output({I, J, K}, DType::float64, {size, size, levels});
  input.fill(1.0);
  input.at<double>({5, 5, 0}) = 2.0;
  Arguments args;
  args.field("in", input).field("out", output).scalar("n", size).scalar("nk", levels);
  for (int step = 0; step < 10; ++step) program(args);  // the time loop: no allocation per call
  return output.at<double>({5, 5, 0});                  // 20 = (-4)^2 + 4 x 1
}
