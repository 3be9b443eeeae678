// Cartesian examples: stencils over I, J with halos, vertical operators along K.
//
// Every program takes its sizes as int32 scalars nx, ny, nk and writes the domain
// [0,nx) x [0,ny) x [0,nk); inputs start at a negative origin where the stencil reads a halo.
#include "examples/support.h"

namespace fieldflow::examples::detail {

namespace {

constexpr double f64_bytes = 8;

// The standard size parameters and the domain [0,nx) x [0,ny) x [0,nk).
struct Sizes {
  Expr nx, ny, nk;
  explicit Sizes(ProgramBuilder& pb)
      : nx(pb.scalar("nx", DType::int32)), ny(pb.scalar("ny", DType::int32)), nk(pb.scalar("nk", DType::int32)) {}
  std::vector<ProgramBuilder::Bound> domain() const {
    return {{dim_I(), 0, nx}, {dim_J(), 0, ny}, {dim_K(), 0, nk}};
  }
};

void add_sizes(ExampleInstance& inst, const ExampleSize& s) {
  inst.scalars["nx"] = int_scalar(s.nx);
  inst.scalars["ny"] = int_scalar(s.ny);
  inst.scalars["nk"] = int_scalar(s.nk);
}

// A float64 [I, J, K] field covering [-halo, n + halo) horizontally and nk + extra_k levels.
Field ijk_field(const ExampleSize& s, Layout layout, int halo, int extra_k = 0) {
  return Field({dim_I(), dim_J(), dim_K()}, DType::float64,
               {s.nx + 2 * halo, s.ny + 2 * halo, s.nk + extra_k}, {-halo, -halo, 0}, layout);
}

// Adds a field filled with a seeded wave; returns it.
Field& add_wave_field(ExampleInstance& inst, const std::string& name, Field f, std::uint64_t seed, double center,
                      double amplitude) {
  const Wave w(seed, name, center, amplitude);
  fill(f, [&](const std::vector<std::int64_t>& i) {
    return w(static_cast<double>(i[0]), static_cast<double>(i[1]), static_cast<double>(i[2]));
  });
  return inst.fields.emplace(name, std::move(f)).first->second;
}

double points(const ExampleSize& s) { return static_cast<double>(s.nx) * s.ny * s.nk; }

// ---------------------------------------------------------------------------------------------
// The five-point Laplacian, a reusable field operator.
Expr laplacian(const Expr& in) {
  const Dimension &I = dim_I(), &J = dim_J();
  return -4.0 * in + in(I + 1) + in(I - 1) + in(J + 1) + in(J - 1);
}

Example make_laplacian() {
  ProgramBuilder pb("laplacian");
  Expr in = pb.field("in", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Expr out = pb.field("out", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Sizes n(pb);
  pb.call("laplacian", laplacian(in), {out}, n.domain());

  Example ex;
  ex.name = "laplacian";
  ex.description = "five-point Laplacian: out = -4 in + in(I+-1) + in(J+-1); input halo 1";
  ex.program = pb.build();
  ex.make_instance = [](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    ExampleInstance inst;
    add_wave_field(inst, "in", ijk_field(s, layout, 1), seed, 1.0, 0.5);
    add_wave_field(inst, "out", ijk_field(s, layout, 1), seed, -1.0, 0.25);
    add_sizes(inst, s);
    inst.outputs = {"out"};
    return inst;
  };
  // in: the domain widened by one point along I and J (a cross, corners unread); out: the domain.
  ex.compulsory_bytes = [](const ExampleSize& s) {
    const double in = (static_cast<double>(s.nx + 2) * (s.ny + 2) - 4) * s.nk;
    return f64_bytes * (in + points(s));
  };
  return ex;
}

// Points within Manhattan distance 2 of the nx x ny rectangle, per level: the footprint of a
// radius-2 diamond stencil (lap of lap, hdiff).
double diamond2_footprint(const ExampleSize& s) {
  return (static_cast<double>(s.nx + 4) * (s.ny + 4) - 12) * s.nk;
}

Example make_lap_of_lap() {
  ProgramBuilder pb("lap_of_lap");
  Expr in = pb.field("in", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Expr out = pb.field("out", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Sizes n(pb);
  pb.call("lap_of_lap", laplacian(named("lap", laplacian(in))), {out}, n.domain());

  Example ex;
  ex.name = "lap_of_lap";
  ex.description = "the Laplacian applied twice (biharmonic operator); input halo 2";
  ex.program = pb.build();
  ex.make_instance = [](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    ExampleInstance inst;
    add_wave_field(inst, "in", ijk_field(s, layout, 2), seed, 1.0, 0.5);
    add_wave_field(inst, "out", ijk_field(s, layout, 2), seed, -1.0, 0.25);
    add_sizes(inst, s);
    inst.outputs = {"out"};
    return inst;
  };
  ex.compulsory_bytes = [](const ExampleSize& s) { return f64_bytes * (diamond2_footprint(s) + points(s)); };
  return ex;
}

// ---------------------------------------------------------------------------------------------
// COSMO horizontal diffusion with a monotonic flux limiter (the gridtools/GT4Py benchmark).
// The Laplacian here is the fieldflow one (-4 in + neighbours), so the fluxes are down-gradient
// and the limiter removes counter-gradient fluxes: out = in - coeff * div(limited grad(lap in)).
Example make_hdiff() {
  const Dimension &I = dim_I(), &J = dim_J();
  ProgramBuilder pb("hdiff");
  Expr in = pb.field("in", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Expr coeff = pb.field("coeff", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Expr out = pb.field("out", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Sizes n(pb);
  const Expr lap = named("lap", laplacian(in));
  const Expr flx_raw = lap(I + 1) - lap;
  const Expr flx = named("flx", where(flx_raw * (in(I + 1) - in) > 0.0, 0.0, flx_raw));
  const Expr fly_raw = lap(J + 1) - lap;
  const Expr fly = named("fly", where(fly_raw * (in(J + 1) - in) > 0.0, 0.0, fly_raw));
  pb.call("hdiff", in - coeff * (flx - flx(I - 1) + fly - fly(J - 1)), {out}, n.domain());

  Example ex;
  ex.name = "hdiff";
  ex.description = "COSMO horizontal diffusion with flux limiter (lap -> flx/fly -> out); input halo 2";
  ex.program = pb.build();
  ex.make_instance = [](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    ExampleInstance inst;
    add_wave_field(inst, "in", ijk_field(s, layout, 2), seed, 1.0, 0.5);
    add_wave_field(inst, "coeff", ijk_field(s, layout, 0), seed, 0.025, 0.01);
    add_wave_field(inst, "out", ijk_field(s, layout, 2), seed, -1.0, 0.25);
    add_sizes(inst, s);
    inst.outputs = {"out"};
    return inst;
  };
  // in: lap is needed on the domain widened by one along I and along J, so in is read within
  // Manhattan distance 2 of the domain; coeff and out: the domain.
  ex.compulsory_bytes = [](const ExampleSize& s) { return f64_bytes * (diamond2_footprint(s) + 2 * points(s)); };
  return ex;
}

// ---------------------------------------------------------------------------------------------
// Vertical advection (gridtools vertical_advection_dycore, the u component): implicit in the
// vertical, a tridiagonal system per column solved by the Thomas algorithm as a forward scan
// carrying (c', d') and a backward substitution scan.
Example make_vadv() {
  const Dimension &I = dim_I(), &K = dim_K();
  constexpr double bet_m = 0.5, bet_p = 0.5;
  ProgramBuilder pb("vadv");
  const std::vector<Dimension> ijk{dim_I(), dim_J(), dim_K()};
  Expr u_stage = pb.field("u_stage", ijk, DType::float64);
  Expr wcon = pb.field("wcon", ijk, DType::float64);
  Expr u_pos = pb.field("u_pos", ijk, DType::float64);
  Expr utens = pb.field("utens", ijk, DType::float64);
  Expr utens_stage = pb.field("utens_stage", ijk, DType::float64);
  Expr dtr_stage = pb.scalar("dtr_stage", DType::float64);
  Expr out = pb.field("out", ijk, DType::float64);
  Sizes n(pb);

  // Contravariant vertical velocity at the lower (gav) and upper (gcv) face, staggered in I;
  // no flux through the bottom and top boundaries.
  const Expr gav = concat_where(K == 0, 0.0, -0.25 * (wcon(I + 1) + wcon));
  const Expr gcv = concat_where(K == n.nk - 1, 0.0, 0.25 * (wcon(I + 1)(K + 1) + wcon(K + 1)));
  const Expr as = gav * bet_m, cs = gcv * bet_m;
  const Expr a = named("acol", gav * bet_p);
  const Expr c = named("ccol", gcv * bet_p);
  const Expr b = named("bcol", dtr_stage - a - c);
  const Expr correction = concat_where(K == 0, 0.0, -as * (u_stage(K - 1) - u_stage)) +
                          concat_where(K == n.nk - 1, 0.0, -cs * (u_stage(K + 1) - u_stage));
  const Expr d = named("dcol", dtr_stage * u_pos + utens + utens_stage + correction);

  // Forward elimination: c'_k = c_k / (b_k - a_k c'_{k-1}), d'_k = (d_k - a_k d'_{k-1}) / (same).
  const Expr forward = scan(
      "thomas_forward", ScanDirection::forward, {Scalar(0.0), Scalar(0.0)},
      [](const Expr& carry, const std::vector<Expr>& in) {
        const Expr &ak = in[0], &bk = in[1], &ck = in[2], &dk = in[3];
        const Expr divided = 1.0 / (bk - carry[0] * ak);
        return make_tuple({ck * divided, (dk - carry[1] * ak) * divided});
      },
      {a, b, c, d});
  // Back substitution: x_k = d'_k - c'_k x_{k+1}, with c' = 0 at the top level.
  const Expr x = scan(
      "thomas_backward", ScanDirection::backward, {Scalar(0.0)},
      [](const Expr& carry, const std::vector<Expr>& in) { return in[1] - in[0] * carry; },
      {forward[0], forward[1]});
  pb.call("vadv", dtr_stage * (x - u_pos), {out}, n.domain());

  Example ex;
  ex.name = "vadv";
  ex.description = "vertical advection: implicit tridiagonal (Thomas) solve per column with a tuple-carry "
                   "forward scan and a backward scan";
  ex.program = pb.build();
  ex.make_instance = [](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    ExampleInstance inst;
    add_wave_field(inst, "u_stage", ijk_field(s, layout, 0), seed, 1.0, 0.5);
    // wcon is staggered: one extra point along I (read at I+1). Small against dtr_stage so the
    // system is diagonally dominant.
    Field wcon({dim_I(), dim_J(), dim_K()}, DType::float64, {s.nx + 1, s.ny, s.nk}, {0, 0, 0}, layout);
    add_wave_field(inst, "wcon", std::move(wcon), seed, 0.1, 0.05);
    add_wave_field(inst, "u_pos", ijk_field(s, layout, 0), seed, 1.0, 0.5);
    add_wave_field(inst, "utens", ijk_field(s, layout, 0), seed, 0.5, 0.25);
    add_wave_field(inst, "utens_stage", ijk_field(s, layout, 0), seed, 0.5, 0.25);
    add_wave_field(inst, "out", ijk_field(s, layout, 0), seed, -1.0, 0.25);
    inst.scalars["dtr_stage"] = Scalar(3.0 / 20.0);
    add_sizes(inst, s);
    inst.outputs = {"out"};
    return inst;
  };
  // wcon is read at I and I+1 on levels 1..nk-1 only (level 0 is no face that moves mass);
  // u_stage, u_pos, utens, utens_stage and out: the domain.
  ex.compulsory_bytes = [](const ExampleSize& s) {
    const double wcon = static_cast<double>(s.nx + 1) * s.ny * (s.nk > 1 ? s.nk - 1 : 0);
    return f64_bytes * (wcon + 5 * points(s));
  };
  return ex;
}

// ---------------------------------------------------------------------------------------------
// Linear interpolation from level interfaces (nk + 1) to full levels (nk).
Example make_vertical_interp() {
  const Dimension& K = dim_K();
  ProgramBuilder pb("vertical_interp");
  Expr in = pb.field("in", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Expr out = pb.field("out", {dim_I(), dim_J(), dim_K()}, DType::float64);
  Sizes n(pb);
  pb.call("vertical_interp", 0.5 * (in + in(K + 1)), {out}, n.domain());

  Example ex;
  ex.name = "vertical_interp";
  ex.description = "interface-to-level interpolation out(K) = 0.5 (in(K) + in(K+1)); in has nk+1 levels";
  ex.program = pb.build();
  ex.make_instance = [](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    ExampleInstance inst;
    add_wave_field(inst, "in", ijk_field(s, layout, 0, 1), seed, 1.0, 0.5);
    add_wave_field(inst, "out", ijk_field(s, layout, 0), seed, -1.0, 0.25);
    add_sizes(inst, s);
    inst.outputs = {"out"};
    return inst;
  };
  ex.compulsory_bytes = [](const ExampleSize& s) {
    return f64_bytes * (static_cast<double>(s.nx) * s.ny * (s.nk + 1) + points(s));
  };
  return ex;
}

// ---------------------------------------------------------------------------------------------
// A masked two-field tendency update, in place: (a, b) += dt * (ta, tb) where mask holds.
Example make_masked_update() {
  ProgramBuilder pb("masked_update");
  const std::vector<Dimension> ijk{dim_I(), dim_J(), dim_K()};
  Expr a = pb.field("a", ijk, DType::float64);
  Expr b = pb.field("b", ijk, DType::float64);
  Expr ta = pb.field("ta", ijk, DType::float64);
  Expr tb = pb.field("tb", ijk, DType::float64);
  Expr mask = pb.field("mask", ijk, DType::boolean);
  Expr dt = pb.scalar("dt", DType::float64);
  Sizes n(pb);
  pb.call("masked_update", where(mask, make_tuple({a + dt * ta, b + dt * tb}), make_tuple({a, b})), {a, b},
          n.domain());

  Example ex;
  ex.name = "masked_update";
  ex.description = "masked in-place update (a, b) = where(mask, (a + dt ta, b + dt tb), (a, b)); "
                   "two in/out fields with a halo of 1 left untouched";
  ex.program = pb.build();
  ex.make_instance = [](const ExampleSize& s, Layout layout, std::uint64_t seed) {
    ExampleInstance inst;
    add_wave_field(inst, "a", ijk_field(s, layout, 1), seed, 1.0, 0.5);
    add_wave_field(inst, "b", ijk_field(s, layout, 1), seed, 2.0, 0.5);
    add_wave_field(inst, "ta", ijk_field(s, layout, 1), seed, 0.0, 1.0);
    add_wave_field(inst, "tb", ijk_field(s, layout, 1), seed, 0.0, 1.0);
    Field mask({dim_I(), dim_J(), dim_K()}, DType::boolean, {s.nx + 2, s.ny + 2, s.nk}, {-1, -1, 0}, layout);
    const Wave w(seed, "mask", 0.0, 1.0);
    fill(mask, [&](const std::vector<std::int64_t>& i) {
      return w(static_cast<double>(i[0]), static_cast<double>(i[1]), static_cast<double>(i[2])) > 0.0 ? 1.0 : 0.0;
    });
    inst.fields.emplace("mask", std::move(mask));
    inst.scalars["dt"] = Scalar(0.1);
    add_sizes(inst, s);
    inst.outputs = {"a", "b"};
    return inst;
  };
  // a, b read and written; ta, tb read; mask (1 byte) read; all over the domain.
  ex.compulsory_bytes = [](const ExampleSize& s) { return f64_bytes * 6 * points(s) + 1.0 * points(s); };
  return ex;
}

}  // namespace

std::vector<Example> cartesian_examples() {
  std::vector<Example> v;
  v.push_back(make_laplacian());
  v.push_back(make_lap_of_lap());
  v.push_back(make_hdiff());
  v.push_back(make_vadv());
  v.push_back(make_vertical_interp());
  v.push_back(make_masked_update());
  return v;
}

}  // namespace fieldflow::examples::detail
