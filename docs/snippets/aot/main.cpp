// A host of an ahead-of-time library: no compiler, no cache directory, no dlopen at run time.
#include <fieldflow/aot.h>
#include <fieldflow_aot_column_stencils_smooth.h>

#include <cstdio>

int main() {
  using namespace fieldflow;
  CompileOptions options;  // layout and static scalars as generated (the header says which)
  options.num_threads = 2;
  CompiledProgram smooth = load_aot(fieldflow_aot_column_stencils_smooth(), options);

  const int ni = 64, nk = 10;
  Field u({horizontal_dim("I"), vertical_dim("K")}, DType::float64, {ni, nk});
  Field out({horizontal_dim("I"), vertical_dim("K")}, DType::float64, {ni, nk});
  for (int i = 0; i < ni; ++i)
    for (int k = 0; k < nk; ++k) u.at<double>({i, k}) = i * i + k;
  smooth(Arguments().field("u", u).field("out", out).scalar("ni", ni).scalar("nk", nk));

  // (i - 1)^2 / 4 + i^2 / 2 + (i + 1)^2 / 4 = i^2 + 1/2; i = 0 is outside the domain, left at 0.
  const bool ok = out.at<double>({1, 0}) == 1.5 && out.at<double>({7, 9}) == 58.5 && out.at<double>({0, 0}) == 0.0;
  std::printf("smooth: out(1, 0) = %g, out(7, 9) = %g\n", out.at<double>({1, 0}), out.at<double>({7, 9}));
  return ok ? 0 : 1;
}
