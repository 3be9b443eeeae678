#pragma once
// Hand-written C++/OpenMP versions of the built-in example programs: what an experienced HPC
// programmer would write for the same computation on the same data (the fields of an
// examples::ExampleInstance, read through their strides and origins). They are the yardstick of
// the benchmark suite (vs_handwritten) and are checked against the reference executor by
// tests/bench/test_baselines.cpp, so they compute exactly the same thing: every floating-point
// operation happens in the order the program states it, and this file is compiled like
// generated code (-O3 -march=native -ffp-contract=off -fno-trapping-math), so results match
// bit for bit.
//
// Style: one fused pass per program where that is natural (stencils recompute their cheap
// intermediates from cache instead of materialising them), unit-stride inner loops under
// `omp simd`, `omp parallel for` over the outer dimensions, restrict pointers.
#include <cstdint>
#include <functional>
#include <string>

#include "fieldflow/examples.h"
#include "fieldflow/field.h"

namespace fieldflow::bench {

// Whether a hand-written version exists for this program and layout.
bool has_baseline(const std::string& program, Layout layout);

// Binds the instance's fields once (pointers, strides, sizes, tables) and returns the
// computation as a callable: the timed call does no lookups. The layout is the fields' own.
// The instance must outlive the callable. Throws ArgumentError for an unknown program.
//
// A horizontal-fastest mesh baseline's level loops over its blocks come in two forms: as written
// (each loop either forced into vector form or left to the compiler, as measured best on an AMD
// EPYC with AVX-512) and all forced into vector form, their neighbour loads then gathers (the
// faster on an AMD EPYC without AVX-512). `tuned` times both when binding (so it runs the
// computation a few times) and keeps the faster, as fieldflow's LoopForm::tuned does: a yardstick
// as good as the best of both on the machine measuring. Other baselines have one form.
enum class BaselineForm { tuned, as_written, vector };
std::function<void()> bind_baseline(const std::string& program, examples::ExampleInstance& inst,
                                    BaselineForm form = BaselineForm::tuned);

// The bandwidth probe: out[i] = in[i], parallel, unit stride (n doubles each way).
void copy_kernel(const double* in, double* out, std::int64_t n);

}  // namespace fieldflow::bench
