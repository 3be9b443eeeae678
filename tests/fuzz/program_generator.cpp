// The random program generator. Validity is by construction, not by filtering:
//  - horizontal Cartesian shifts are drawn against a per-statement budget (how far the domain may
//    be moved before it leaves the halo of 2 that every field has), so every read stays inside
//    the fields passed at call time;
//  - vertical shifts are wrapped in concat_where on K, so they never leave [0, nk);
//  - scans (whose values exist only over the statement's K range) only appear in statements over
//    the full K range, and are never shifted vertically outside a guarded branch;
//  - neighbour shifts with a fixed index only use table slots that never hold -1 (except, rarely,
//    on purpose: then both backends must reject the call alike; and in a call whose data
//    emptied two rows of a table, emptied_rows);
//  - dynamic offsets are clamped into [0, nk) along K and into the halo budget along I and J
//    (except, one in eight, on purpose: reads that leave the fields, rejected while running);
//  - integer leaves are sometimes near their type's limits (literals, and one input element in
//    32), so sums, differences, products and neighbour sums wrap around, as the language defines;
//  - a statement without K (a surface) only reads fields without K;
//  - a domain bound narrowed through minimum/maximum/floor_divide/% only ever shrinks the domain
//    (max of the low bound, min of the high one), so the budget drawn for the plain bound holds.
// Anything the DSL still rejects (a DimensionError for a shift along a missing dim, ...) falls
// back to a simpler expression, so generation never fails.
#include "fuzz/program_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string_view>
#include <tuple>
#include <utility>

#include "fieldflow/dsl.h"
#include "fieldflow/errors.h"

namespace fieldflow::fuzz {

namespace {

const Dimension I = horizontal_dim("I"), J = horizontal_dim("J"), K = vertical_dim("K");
const Dimension Vertex = horizontal_dim("Vertex"), Edge = horizontal_dim("Edge"), Cell = horizontal_dim("Cell");
constexpr int halo = 2;  // every Cartesian field reaches at least this far past [0, n)

// The halo budget of a statement: how many points a read may still move down / up along I and J.
struct Budget {
  int lo[2] = {0, 0}, hi[2] = {0, 0};
  bool covers(const Budget& need) const {
    for (int d = 0; d < 2; ++d)
      if (lo[d] < need.lo[d] || hi[d] < need.hi[d]) return false;
    return true;
  }
};

struct Ctx {
  Budget budget;
  bool allow_scan = true;  // the statement sweeps the full K range
  bool flat = false;       // the statement has no K (a surface): its value must not have K either
  int loc = 0;             // mesh: 0 Vertex, 1 Edge, 2 Cell
};

// A value built once and used by several statements (a materialized value or a scan): these are
// the transients that live across statements and column groups.
struct Shared {
  Expr e;
  Budget reach;
  bool has_scan = false;
  int loc = 0;
};

class Generator {
 public:
  Generator(std::uint64_t seed, const GenerateOptions& options)
      : rng_(seed), pb_(fmt::format("fuzz_{}", seed)), options_(options) {}

  FuzzCase run(std::uint64_t seed) {
    FuzzCase c;
    c.seed = seed;
    c.mesh = coin(0.4);
    c.bounded = c.mesh && coin(0.5);
    mesh_ = c.mesh;
    bounded_ = c.bounded;
    declare_parameters(c);
    const int n_shared = uni(0, 3);
    for (int s = 0; s < n_shared; ++s) make_shared_value();
    const int n_stmts = uni(2, 5);
    for (int s = 0; s < n_stmts || stmts_ == 0; ++s) {
      if (s > 12) break;  // the DSL kept rejecting: give up (never seen)
      make_statement();
    }
    c.program = pb_.build();
    const int n_sizes = uni(2, 3);
    for (int s = 0; s < n_sizes; ++s) c.sizes.push_back(draw_sizes());
    c.layouts.push_back(coin(0.5) ? Layout::vertical_fastest : Layout::horizontal_fastest);
    if (coin(0.2)) c.layouts.push_back(c.layouts[0] == Layout::vertical_fastest ? Layout::horizontal_fastest
                                                                               : Layout::vertical_fastest);
    c.short_field_calls = coin(0.35);
    return c;
  }

 private:
  // ---- random helpers
  int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  double real(double lo, double hi) { return std::uniform_real_distribution<double>(lo, hi)(rng_); }
  template <class T> const T& pick(const std::vector<T>& v) { return v[uni(0, static_cast<int>(v.size()) - 1)]; }

  const Dimension& loc_dim(int loc) const { return loc == 0 ? Vertex : loc == 1 ? Edge : Cell; }
  Expr loc_size(int loc) const { return loc == 0 ? scalars_.at("n_v") : loc == 1 ? scalars_.at("n_e") : scalars_.at("n_c"); }

  // ---- parameters
  struct FieldParam {
    std::string name;
    Expr e;
    DType dtype;
    int loc;         // mesh location, -1 for Cartesian
    bool output;     // written by statements (may still be read)
    bool full;       // has every horizontal dim of its family (can be written by a statement)
    bool has_k;      // over K (a statement without K writes only fields without it)
    std::string local;  // a sparse field's connectivity (one value per neighbour), else ""
  };

  // How far a field reaches past [0, n) on each side: Cartesian fields at least the halo budget.
  FieldExtent random_extent() {
    return mesh_ ? FieldExtent{uni(0, 2), uni(0, 2)} : FieldExtent{uni(halo, halo + 1), uni(halo, halo + 1)};
  }

  void add_field(FuzzCase& c, const std::string& name, std::vector<Dimension> dims, DType t, int loc, bool output,
                 const std::string& local = "") {
    const bool has_k = std::find(dims.begin(), dims.end(), K) != dims.end();
    const bool full = local.empty() && dims.size() - (has_k ? 1 : 0) == (mesh_ ? 1u : 2u);
    fields_.push_back({name, pb_.field(name, std::move(dims), t), t, loc, output, full, has_k, local});
    c.extents[name] = random_extent();
  }

  // A tuple parameter (`tuple_field`): its elements are read as `uv[0]`, `uv[1]` and may be
  // written as in/out outputs, each a field parameter `uv.0`, `uv.1` of the program.
  void add_tuple_field(FuzzCase& c, const std::string& name, std::vector<ProgramBuilder::FieldSpec> elements, int loc) {
    const Expr t = pb_.tuple_field(name, elements);
    for (std::size_t i = 0; i < elements.size(); ++i) {
      const std::string element = fmt::format("{}.{}", name, i);
      fields_.push_back({element, t[static_cast<int>(i)], elements[i].dtype, loc, false, true, true, ""});
      c.extents[element] = random_extent();
    }
  }

  Connectivity connectivity(const std::string& table) const {
    struct Shape { const char* name; int from, to, width; };  // from: the location the value is at
    static const Shape shapes[] = {{"V2E", 0, 1, 6},  {"V2C", 0, 2, 6},    {"V2E2V", 0, 0, 6}, {"E2V", 1, 0, 2},
                                   {"E2C2V", 1, 0, 4}, {"E2C", 1, 2, 2},    {"E2C2E", 1, 1, 4}, {"C2E", 2, 1, 3},
                                   {"C2V", 2, 0, 3},   {"C2E2CO", 2, 2, 4}, {"C2E2C", 2, 2, 3}};
    for (const Shape& s : shapes)
      if (table == s.name) return make_connectivity(s.name, loc_dim(s.from), loc_dim(s.to), s.width);
    throw std::logic_error("unknown table " + table);
  }

  void declare_parameters(FuzzCase& c) {
    if (!mesh_) {
      for (const char* n : {"a", "b", "c"}) add_field(c, n, {I, J, K}, DType::float64, -1, false);
      add_field(c, "g", {I, J, K}, DType::float32, -1, false);
      add_field(c, "m", {I, J, K}, DType::int32, -1, false);
      add_field(c, "surf", {I, J}, DType::float64, -1, false);
      add_field(c, "g_s", {I, J}, DType::float32, -1, false);
      add_field(c, "col", {K}, DType::float64, -1, false);
      add_field(c, "l", {I, J, K}, DType::int64, -1, false);
      add_field(c, "mask", {I, J, K}, DType::boolean, -1, false);
      for (const char* n : {"o0", "o1", "o2", "o3"}) add_field(c, n, {I, J, K}, DType::float64, -1, true);
      add_field(c, "o_f32", {I, J, K}, DType::float32, -1, true);
      add_field(c, "o_i32", {I, J, K}, DType::int32, -1, true);
      add_field(c, "o_i64", {I, J, K}, DType::int64, -1, true);
      add_field(c, "o_b", {I, J, K}, DType::boolean, -1, true);
      add_field(c, "o_surf", {I, J}, DType::float64, -1, true);
      add_tuple_field(c, "uv", {{{I, J, K}, DType::float64}, {{I, J, K}, DType::float32}}, -1);
      for (const char* n : {"ni", "nj", "nk"}) scalars_.emplace(n, pb_.scalar(n, DType::int32));
    } else {
      const char* loc_names[] = {"v", "e", "c"};
      for (int loc = 0; loc < 3; ++loc) {
        const Dimension& L = loc_dim(loc);
        add_field(c, fmt::format("f{}_a", loc_names[loc]), {L, K}, DType::float64, loc, false);
        add_field(c, fmt::format("f{}_b", loc_names[loc]), {L, K}, DType::float64, loc, false);
        add_field(c, fmt::format("o{}_0", loc_names[loc]), {L, K}, DType::float64, loc, true);
        add_field(c, fmt::format("o{}_1", loc_names[loc]), {L, K}, DType::float64, loc, true);
        add_field(c, fmt::format("area_{}", loc_names[loc]), {L}, DType::float64, loc, false);  // no K
        add_field(c, fmt::format("o{}_s", loc_names[loc]), {L}, DType::float64, loc, true);
      }
      // Sparse fields, one weight per element and neighbour (ICON's geofac_div, geofac_n2s,
      // geofac_rot, and per-level interpolation coefficients).
      add_field(c, "w_C2E", {Cell, connectivity("C2E").local}, DType::float64, 2, false, "C2E");
      add_field(c, "w_C2E2CO", {Cell, connectivity("C2E2CO").local}, DType::float64, 2, false, "C2E2CO");
      add_field(c, "w_V2E", {Vertex, connectivity("V2E").local}, DType::float64, 0, false, "V2E");
      add_field(c, "w_E2C2V", {Edge, connectivity("E2C2V").local, K}, DType::float64, 1, false, "E2C2V");
      // Weights over tables whose -1 entries sit in the middle of a row on the bounded mesh
      // (E2C2E's slots 2 and 3, any slot of C2E2C), one of them float32 (reductions of float32).
      add_field(c, "w_E2C2E", {Edge, connectivity("E2C2E").local}, DType::float64, 1, false, "E2C2E");
      add_field(c, "w_C2E2C", {Cell, connectivity("C2E2C").local, K}, DType::float32, 2, false, "C2E2C");
      add_field(c, "col", {K}, DType::float64, -1, false);
      add_field(c, "l_c", {Cell, K}, DType::int64, 2, false);
      add_field(c, "mask_e", {Edge, K}, DType::boolean, 1, false);
      add_field(c, "o_c_i64", {Cell, K}, DType::int64, 2, true);
      add_field(c, "o_e_b", {Edge, K}, DType::boolean, 1, true);
      add_field(c, "g_e", {Edge, K}, DType::float32, 1, false);
      add_field(c, "g_v", {Vertex, K}, DType::float32, 0, false);
      add_field(c, "g_c", {Cell}, DType::float32, 2, false);
      add_field(c, "mask_c", {Cell, K}, DType::boolean, 2, false);
      add_field(c, "l_v", {Vertex, K}, DType::int64, 0, false);
      add_field(c, "l_e", {Edge}, DType::int64, 1, false);
      add_field(c, "m_v", {Vertex, K}, DType::int32, 0, false);
      add_field(c, "o_e_f32", {Edge, K}, DType::float32, 1, true);
      add_field(c, "o_v_i32", {Vertex, K}, DType::int32, 0, true);
      add_tuple_field(c, "uv_e", {{{Edge, K}, DType::float64}, {{Edge, K}, DType::int32}}, 1);
      for (const char* n : {"n_v", "n_e", "n_c", "nk"}) scalars_.emplace(n, pb_.scalar(n, DType::int32));
    }
    scalars_.emplace("alpha", pb_.scalar("alpha", DType::float64));
    scalars_.emplace("beta", pb_.scalar("beta", DType::float32));
    scalars_.emplace("flag", pb_.scalar("flag", DType::boolean));
  }

  // Fields of dtype t readable at a point of the statement: at its location (or a [K] column),
  // without K in a statement without K, never sparse (see sparse_fields).
  std::vector<const FieldParam*> fields_of(DType t, const Ctx& ctx) const {
    std::vector<const FieldParam*> out;
    for (const auto& f : fields_)
      if (f.dtype == t && (!mesh_ || f.loc == ctx.loc || f.loc == -1) && (!ctx.flat || !f.has_k) && f.local.empty())
        out.push_back(&f);
    return out;
  }
  // The sparse fields over [loc, table.local] (and maybe K).
  std::vector<const FieldParam*> sparse_fields(const std::string& table, const Ctx& ctx) const {
    std::vector<const FieldParam*> out;
    for (const auto& f : fields_)
      if (f.local == table && (!ctx.flat || !f.has_k)) out.push_back(&f);
    return out;
  }
  // A sparse field as weights of dtype t (converted when it has another dtype).
  static Expr weights_as(const FieldParam& w, DType t) { return w.dtype == t ? w.e : astype(w.e, t); }
  // A value of dtype t: integer expressions stay shallow (see int_expr).
  Expr value_of(DType t, const Ctx& ctx, int depth) {
    return is_integral(t) ? int_expr(ctx, std::min(depth, 1), t) : float_expr(t, ctx, depth);
  }
  // Outputs a statement over the context's dims may write.
  std::vector<const FieldParam*> writable(DType t, const Ctx& ctx) const {
    std::vector<const FieldParam*> out;
    for (const auto& f : fields_)
      if (f.dtype == t && f.full && (!mesh_ || f.loc == ctx.loc) && f.has_k == !ctx.flat) out.push_back(&f);
    return out;
  }

  // ---- expressions
  Expr lit(DType t, double v) {
    if (t == DType::float32) return Expr::literal(Scalar(static_cast<float>(v)));
    if (t == DType::int32) return Expr::literal(Scalar(static_cast<std::int32_t>(v)));
    if (t == DType::int64) return Expr::literal(Scalar(static_cast<std::int64_t>(v)));
    return Expr::literal(Scalar(v));
  }
  // max - r, min + r or +-(2^(bits/2) + r): a sum or product with it leaves the type's range.
  Expr near_limit(DType t) {
    const int r = uni(0, 3), kind = uni(0, 2);
    const int sign = coin(0.5) ? 1 : -1;
    if (t == DType::int32) {
      using L = std::numeric_limits<std::int32_t>;
      return Expr::literal(Scalar(kind == 0 ? L::max() - r : kind == 1 ? L::min() + r : (65536 + r) * sign));
    }
    using L = std::numeric_limits<std::int64_t>;
    return Expr::literal(Scalar(kind == 0 ? L::max() - r : kind == 1 ? L::min() + r : ((std::int64_t{1} << 32) + r) * sign));
  }
  Expr index_of_some_dim(const Ctx& ctx) {
    if (mesh_) {
      const bool location = coin(0.5) || ctx.flat;
      if (location && options_.decomposable) return lit(DType::int32, 3);
      return index(location ? loc_dim(ctx.loc) : K);
    }
    return index(ctx.flat ? pick(std::vector<Dimension>{I, J}) : pick(std::vector<Dimension>{I, J, K}));
  }

  Expr float_leaf(DType t, const Ctx& ctx) {
    const int choice = uni(0, 10);
    if (choice <= 4) {
      auto fs = fields_of(t, ctx);
      if (!fs.empty()) return pick(fs)->e;
    }
    if (choice == 5) return lit(t, std::round(real(-3, 3) * 4) / 4);
    if (choice == 6) return t == DType::float64 ? scalars_.at("alpha") : scalars_.at("beta");
    if (choice == 7) return astype(index_of_some_dim(ctx), t);
    if (choice == 8) return astype(int_expr(ctx, 1, coin(0.25) ? DType::int64 : DType::int32), t);
    if (choice == 9 && t == DType::float64) {
      auto fs = fields_of(DType::float32, ctx);
      if (!fs.empty()) return astype(pick(fs)->e, DType::float64);
    }
    if (choice == 10 && mesh_) {  // one stored slot of a sparse field
      std::vector<const FieldParam*> fs;
      for (const auto& f : fields_)
        if (!f.local.empty() && f.dtype == t && f.loc == ctx.loc && (!ctx.flat || !f.has_k)) fs.push_back(&f);
      if (!fs.empty()) {
        const FieldParam* w = pick(fs);
        const Connectivity conn = connectivity(w->local);
        return w->e(slot(conn, uni(0, conn.max_neighbors - 1)));
      }
    }
    return lit(t, real(-2, 2));
  }

  // A Cartesian field read as it is or, sometimes, moved by a shift its halo budget allows.
  Expr maybe_shifted(const FieldParam& f, const Ctx& ctx) {
    if (mesh_ || !coin(0.3) || !f.e.type().has(I) || !f.e.type().has(J)) return f.e;
    const int d = uni(0, 1), s = uni(-2, 2);
    if (s == 0 || ctx.budget.lo[d] + s < 0 || ctx.budget.hi[d] - s < 0) return f.e;
    return f.e((d == 0 ? I : J) + s);
  }

  // Integer expressions (int32 or int64) stay shallow; power only raises a leaf. About one literal
  // in three is near the type's limits, or the square root of its range, so + - * wrap around.
  Expr int_expr(const Ctx& ctx, int depth, DType t = DType::int32) {
    const DType other = t == DType::int32 ? DType::int64 : DType::int32;
    if (depth <= 0 || coin(0.3)) {
      const int choice = uni(0, 5);
      auto fs = fields_of(t, ctx);
      if (choice <= 1 && !fs.empty()) return maybe_shifted(*pick(fs), ctx);
      if (choice == 2) return astype(index_of_some_dim(ctx), t);
      if (choice == 3) {  // a float value, often clamped first (NaN and huge values saturate)
        const Expr x = float_expr(DType::float64, ctx, 1);
        return astype(coin(0.7) ? where(abs(x) < 100.0, x, 0.0) : x, t);
      }
      if (choice == 4) {  // through the other integer type
        auto os = fields_of(other, ctx);
        if (!os.empty()) return astype(pick(os)->e, t);
      }
      if (coin(0.3)) return near_limit(t);
      return lit(t, uni(-5, 5));
    }
    if (mesh_ && coin(0.3)) return neighbour_expr(t, ctx, depth);  // integer sums wrap around
    const Expr a = int_expr(ctx, std::min(depth - 1, 1), t), b = int_expr(ctx, std::min(depth - 1, 1), t);
    switch (uni(0, 9)) {
      case 0: return a + b;
      case 1: return a - b;
      case 2: return a * b;
      case 3: return a / b;  // division by zero is defined (0)
      case 4: return minimum(a, b);
      case 5: return maximum(a, abs(b));
      case 6: return floor_divide(a, b);  // Python's // and %: rounds toward minus infinity
      case 7: return a % b;
      case 8: return depth > 1 ? a + b : power(a, lit(t, uni(-1, 2)));  // a negative exponent truncates to 0, 1, -1
      default: return where(bool_expr(ctx, 0), a, b);
    }
  }

  // A bool field read at a neighbour, through a slot that is never -1.
  std::optional<Expr> bool_at_neighbour(const Ctx& ctx) {
    std::vector<std::pair<const Route*, const FieldParam*>> reads;
    for (const Route& r : routes_into(ctx.loc)) {
      Ctx at = ctx;
      at.loc = r.from;
      for (const FieldParam* b : fields_of(DType::boolean, at))
        if (r.safe_slots > 0 && b->e.type().has(loc_dim(r.from))) reads.emplace_back(&r, b);
    }
    if (reads.empty()) return std::nullopt;
    const auto& [r, b] = pick(reads);
    return b->e(connectivity(r->table)[uni(0, r->safe_slots - 1)]);
  }

  Expr bool_expr(const Ctx& ctx, int depth) {
    if (mesh_ && coin(0.2))
      if (auto b = bool_at_neighbour(ctx)) return *b;
    switch (uni(0, depth > 0 ? 10 : 6)) {
      case 0: {
        const Expr a = float_expr(DType::float64, ctx, depth), b = float_expr(DType::float64, ctx, 0);
        switch (uni(0, 3)) {
          case 0: return a < b;
          case 1: return a <= b;
          case 2: return a > b;
          default: return a == b;
        }
      }
      case 1: return float_expr(DType::float64, ctx, depth) >= scalars_.at("alpha");
      case 2: return int_expr(ctx, 1) != int_expr(ctx, 0);
      case 3: return isfinite(float_expr(DType::float64, ctx, depth));
      case 4: return coin(0.5) ? isnan(float_expr(DType::float64, ctx, depth)) : isinf(float_expr(DType::float32, ctx, depth));
      case 5: {
        if (mesh_ && coin(0.5))
          if (auto b = bool_at_neighbour(ctx)) return *b;
        auto fs = fields_of(DType::boolean, ctx);
        if (!fs.empty()) return maybe_shifted(*pick(fs), ctx);
        return scalars_.at("flag");
      }
      case 6: return int_expr(ctx, 1, DType::int64) % lit(DType::int64, 3) == lit(DType::int64, 1);
      case 7: return bool_expr(ctx, depth - 1) & bool_expr(ctx, depth - 1);
      case 8: return bool_expr(ctx, depth - 1) | (float_expr(DType::float32, ctx, 0) > 0.5);
      case 9: return bool_expr(ctx, depth - 1) ^ bool_expr(ctx, depth - 1);
      default: return ~bool_expr(ctx, depth - 1);
    }
  }

  // An index condition for concat_where over a dimension of the statement's family.
  IndexCondition condition(const Ctx& ctx) {
    if (coin(0.15)) {  // combined conditions
      switch (uni(0, 2)) {
        case 0: return simple_condition(ctx) & simple_condition(ctx);
        case 1: return simple_condition(ctx) | simple_condition(ctx);
        default: return ~simple_condition(ctx);
      }
    }
    return simple_condition(ctx);
  }
  IndexCondition simple_condition(const Ctx& ctx) {
    Dimension d = K;
    Expr n = scalars_.at("nk");
    if (coin(0.5) || ctx.flat) {
      if (mesh_ && options_.decomposable) {
        // K stays (a surface statement's condition on K is refused, and a simpler value drawn)
      } else if (mesh_) {
        d = loc_dim(ctx.loc);
        n = loc_size(ctx.loc);
      } else {
        d = coin(0.5) ? I : J;
        n = scalars_.at(d == I ? "ni" : "nj");
      }
    }
    Expr bound = coin(0.5) ? Expr(uni(0, 3)) : n - uni(0, 3);
    if (coin(0.15)) bound = coin(0.5) ? minimum(bound, Expr(uni(1, 4))) : maximum(bound, floor_divide(n, Expr(2)));
    switch (uni(0, 5)) {
      case 0: return d == bound;
      case 1: return d != bound;
      case 2: return d < bound;
      case 3: return d <= bound;
      case 4: return d > bound;
      default: return d >= bound;
    }
  }

  // A scan over the statement's K range; its inputs are generated expressions.
  Expr scan_expr(const Ctx& ctx, int depth) {
    ++scans_made_;
    // A float32 scan carries and sweeps in float (its weak literals adopt float32); its result
    // is converted to float64 where it is used.
    const DType t = coin(0.25) ? DType::float32 : DType::float64;
    auto carry = [&](double v) { return t == DType::float32 ? Scalar(static_cast<float>(v)) : Scalar(v); };
    // One Cartesian scan in four is read at the point inside a materialized value and also one
    // column up: on CUDA the value's kernel runs in the sweep's level loop over one column fewer
    // than the sweep, whose result is stored for the other read (fuse_scan_consumers).
    int reused_along = -1;
    if (!mesh_ && coin(0.25)) {
      const int d = uni(0, 1);
      if (ctx.budget.hi[d] >= 1) reused_along = d;
    }
    Ctx inputs_ctx = ctx;  // the sweep covers the column up too
    if (reused_along >= 0) inputs_ctx.budget.hi[reused_along] -= 1;
    auto to64 = [&](const Expr& x) {
      const Expr r = t == DType::float32 ? astype(x, DType::float64) : x;
      const Dimension& dim = reused_along == 0 ? I : J;
      if (reused_along < 0 || !r.type().has(dim)) return r;
      return materialize(fmt::format("t{}", labels_++), r * 0.5 + 1.0) + r(dim + 1);
    };
    std::vector<Expr> inputs;
    const int n_in = uni(1, 2);
    for (int i = 0; i < n_in; ++i) {
      Expr x = float_expr(t, inputs_ctx, depth - 1);
      if (!x.type().has(K)) {  // scan inputs need the vertical dim
        auto dims = x.type().dims;
        dims.push_back(K);
        if (mesh_ && !x.type().has(loc_dim(ctx.loc))) dims.push_back(loc_dim(ctx.loc));
        x = broadcast(x, dims);
      }
      inputs.push_back(x);
    }
    // The inputs of one scan combine pointwise: one over [I, K] and one over [J, K] are both
    // broadcast to [I, J, K] (the language refuses to promote two horizontal dimensions; seed 973177).
    std::vector<Dimension> all;
    for (const Expr& x : inputs)
      for (const Dimension& d : x.type().dims)
        if (std::find(all.begin(), all.end(), d) == all.end()) all.push_back(d);
    for (Expr& x : inputs)
      if (x.type().dims.size() != all.size()) x = broadcast(x, all);
    const double w = std::round(real(0.1, 0.9) * 8) / 8;
    const bool tuple = coin(0.4);
    const int form = uni(0, 3);
    const ScanDirection dir = coin(0.5) ? ScanDirection::forward : ScanDirection::backward;
    const std::string name = fmt::format("scan{}", scans_made_);
    if (!tuple) {
      const Expr s = scan(name, dir, {carry(std::round(real(-2, 2)))},
                          [&](const Expr& c, const std::vector<Expr>& in) {
                            const Expr& last = in.back();
                            switch (form) {
                              case 0: return c * w + in[0];
                              case 1: return maximum(c, in[0]) * w - last;
                              case 2: return where(in[0] > c, c + last * w, c * w);
                              default: return (c + in[0]) / (abs(last) + 1.0);
                            }
                          },
                          inputs);
      return to64(s);
    }
    const Expr s = scan(name, dir, {carry(0.0), carry(1.0)},
                        [&](const Expr& c, const std::vector<Expr>& in) {
                          const Expr& last = in.back();
                          if (form % 2 == 0) return make_tuple({c[0] * w + in[0], c[1] * 0.5 + c[0] * last});
                          return make_tuple({minimum(c[1], in[0]) + 0.25, (c[0] - last) / (abs(c[1]) + 2.0)});
                        },
                        inputs);
    switch (uni(0, 2)) {
      case 0: return to64(s[0]);
      case 1: return to64(s[1]);
      default: return to64(s[0] - s[1]);
    }
  }

  // A value at location ctx.loc computed from values at another location, through a table.
  // A table into `loc`, from the location its values come from; its first safe_slots slots never hold -1.
  struct Route { const char* table; int from; int safe_slots; };
  static const std::vector<Route>& routes_into(int loc) {
    static const std::vector<Route> to_vertex = {{"V2E", 1, 0}, {"V2C", 2, 0}, {"V2E2V", 0, 0}};
    static const std::vector<Route> to_edge = {{"E2V", 0, 2}, {"E2C2V", 0, 2}, {"E2C", 2, 1}, {"E2C2E", 1, 2}};
    static const std::vector<Route> to_cell = {{"C2E", 1, 3}, {"C2V", 0, 3}, {"C2E2CO", 2, 1}, {"C2E2C", 2, 0}};
    return loc == 0 ? to_vertex : loc == 1 ? to_edge : to_cell;
  }
  const Route& pick_route(int loc) { return pick(routes_into(loc)); }

  Expr reduce(const Expr& local, const Connectivity& conn) {
    switch (uni(0, 2)) {
      case 0: return neighbor_sum(local, conn);
      case 1: return max_over(local, conn);
      default: return min_over(local, conn);
    }
  }

  // A reduction over the neighbours of a neighbour: `x(B)(A[s])` is, at each point, the local
  // field of B around the point's neighbour A[s] (fvm's `fe(V2E)(E2V[0])`), maybe weighted by a
  // sparse field read at that neighbour too; reduced over B. A's slot never holds -1.
  Expr chained_expr(DType t, const Ctx& ctx, int depth) {
    Route a = pick_route(ctx.loc);
    if (a.safe_slots == 0) return value_of(t, ctx, depth - 1);
    const Connectivity first = connectivity(a.table);
    const Route& b = pick_route(a.from);
    const Connectivity second = connectivity(b.table);
    Ctx inner = ctx;
    inner.loc = b.from;
    const Expr x = value_of(t, inner, depth - 1);
    if (!x.type().has(loc_dim(b.from))) return x;
    const int s = uni(0, a.safe_slots - 1);
    Expr local = x(second)(first[s]);
    Ctx at_neighbour = ctx;
    at_neighbour.loc = a.from;
    const auto ws = sparse_fields(b.table, at_neighbour);
    if (!ws.empty() && coin(0.5)) local = local * weights_as(*pick(ws), t)(first[s]);
    return reduce(local, second);
  }

  // A value of dtype t (any but bool) at the statement's location, from values at another
  // location: a fixed neighbour slot, or a reduction of a local field. Integer sums wrap around;
  // an element with no neighbour reduces to 0, or the dtype's lowest or highest value.
  Expr neighbour_expr(DType t, const Ctx& ctx, int depth) {
    try {
      return neighbour_node(t, ctx, depth);
    } catch (const Error&) {
      return value_of(t, ctx, 0);  // the DSL refused this combination: use something simpler
    }
  }
  Expr neighbour_node(DType t, const Ctx& ctx, int depth) {
    if (t == DType::float64 && coin(0.2))  // reduced in another dtype, then converted
      return astype(neighbour_node(pick(std::vector<DType>{DType::float32, DType::int32, DType::int64}), ctx, depth), t);
    if (coin(0.3)) return chained_expr(t, ctx, depth);
    const Route& r = pick_route(ctx.loc);
    const Connectivity conn = connectivity(r.table);
    const auto weights = sparse_fields(r.table, ctx);
    if (!weights.empty() && coin(0.1)) return reduce(weights_as(*pick(weights), t), conn);  // the weights alone
    Ctx inner = ctx;
    inner.loc = r.from;
    Expr x = value_of(t, inner, depth - 1);
    // Around a vertex, often the sum of a vertex field at both ends of each edge (fvm_nabla's edge
    // average): every such pair of a row shares the vertex's column, which compiled code then
    // loads once (codegen/common/loop_invariants.h, share_common_columns).
    if (std::string_view(r.table) == "V2E" && coin(0.5)) {
      Ctx at_vertex = ctx;
      at_vertex.loc = 0;
      const auto fs = fields_of(t, at_vertex);
      const Connectivity e2v = make_connectivity("E2V", loc_dim(1), loc_dim(0), 2);
      if (!fs.empty()) {
        const Expr y = pick(fs)->e;
        if (y.type().has(loc_dim(0))) x = y(e2v[0]) + y(e2v[1]);
      }
    }
    if (!x.type().has(loc_dim(r.from))) return x;  // nothing to move: x is a column or a literal
    // A fixed slot that may be -1 is rare and then both backends must reject the call alike.
    const bool unsafe = bounded_ && coin(0.02);
    if (r.safe_slots > 0 && coin(0.4)) return x(conn[uni(0, r.safe_slots - 1)]);
    if (unsafe) return x(conn[conn.max_neighbors - 1]);
    Expr local = x(conn);
    if (!weights.empty() && coin(0.3)) local = weights_as(*pick(weights), t) * local;  // geofac-style weights
    else if (coin(0.3)) local = local * value_of(t, ctx, 0);  // weights at the source point
    return reduce(local, conn);
  }

  Expr cartesian_shift(DType t, const Ctx& ctx, int depth) {
    const int d = uni(0, 1);
    const int s = uni(-2, 2);
    Ctx inner = ctx;
    inner.budget.lo[d] += s;  // reading at i + s: what the operand reads moves by s
    inner.budget.hi[d] -= s;
    if (s == 0 || inner.budget.lo[d] < 0 || inner.budget.hi[d] < 0) return float_expr(t, ctx, depth - 1);
    const Expr x = float_expr(t, inner, depth - 1);
    const Dimension& dim = d == 0 ? I : J;
    if (!x.type().has(dim)) return x;
    return x(dim + s);
  }

  Expr vertical_shift(DType t, const Ctx& ctx, int depth) {
    const Expr x = float_expr(t, ctx, depth - 1);
    if (!x.type().has(K)) return x;
    const int k = coin(0.8) ? 1 : 2;
    if (coin(0.5)) return concat_where(K < k, x, x(K - k));
    return concat_where(K >= scalars_.at("nk") - k, x, x(K + k));
  }

  // A dynamic offset: the operand read where an integer expression of the point moves it. Along
  // K the offset is clamped so that k + offset stays in [0, nk); along I or J into the
  // statement's halo budget, and the operand gets no budget of its own along that dim (it is
  // read anywhere in the clamped range). One in eight is not clamped: its reads may leave the
  // fields, which the reference rejects (DomainError) and compiled code must reject while its
  // kernels run, leaving every field as it was.
  Expr dynamic_shift(DType t, const Ctx& ctx, int depth) {
    const bool vertical = mesh_ || coin(0.5) || options_.decomposable;
    const int d = uni(0, 1);
    if (!vertical && ctx.budget.lo[d] == 0 && ctx.budget.hi[d] == 0) return float_expr(t, ctx, depth - 1);
    Ctx inner = ctx;
    if (!vertical) inner.budget.lo[d] = inner.budget.hi[d] = 0;
    const Expr x = float_expr(t, inner, depth - 1);
    const Dimension& dim = vertical ? K : d == 0 ? I : J;
    if (!x.type().has(dim)) return x;
    Expr off = int_expr(ctx, 1);
    if (!coin(0.125)) {
      if (vertical) {
        off = minimum(maximum(off, -index(K)), scalars_.at("nk") - 1 - index(K));
      } else {
        off = minimum(maximum(off, lit(DType::int32, -ctx.budget.lo[d])), lit(DType::int32, ctx.budget.hi[d]));
      }
    }
    return x(dim + off);
  }

  std::optional<Expr> use_shared(const Ctx& ctx) {
    std::vector<const Shared*> fit;
    for (const auto& s : shared_)
      if (ctx.budget.covers(s.reach) && (ctx.allow_scan || !s.has_scan) && (!mesh_ || s.loc == ctx.loc) &&
          (!ctx.flat || !s.e.type().has(K)))
        fit.push_back(&s);
    if (fit.empty()) return std::nullopt;
    return pick(fit)->e;
  }

  Expr float_expr(DType t, const Ctx& ctx, int depth) {
    if (depth <= 0) return float_leaf(t, ctx);
    try {
      return float_node(t, ctx, depth);
    } catch (const Error&) {
      return float_leaf(t, ctx);  // the DSL refused this combination: use something simpler
    }
  }

  Expr float_node(DType t, const Ctx& ctx, int depth) {
    const bool f64 = t == DType::float64;
    const int choice = uni(0, 20);
    auto sub = [&] { return float_expr(t, ctx, depth - 1); };
    switch (choice) {
      case 0: return sub() + sub();
      case 1: return sub() - sub();
      case 2: return sub() * sub();
      case 3: return sub() / sub();
      case 4: case 18: {
        const Expr x = sub();
        switch (uni(0, 19)) {
          case 0: return -x;
          case 1: return abs(x);
          case 2: return sin(x);
          case 3: return sqrt(abs(x));
          case 4: return log(abs(x) + 1.0);
          case 5: return exp(x * 0.25);
          case 6: return tanh(x);
          case 7: return floor(x * 2.0);
          case 8: return arctan(x);
          case 9: return tan(x);
          case 10: return arcsin(x / (abs(x) + 1.0));  // in (-1, 1); sometimes NaN is fine too
          case 11: return arccos(coin(0.8) ? x / (abs(x) + 1.0) : x);
          case 12: return sinh(x);
          case 13: return cosh(x);
          case 14: return ceil(x * 2.0);
          case 15: return trunc(x * 2.0);
          case 16: return cbrt(x);
          case 17: return gamma(x);  // poles and overflow give inf / NaN alike everywhere
          case 18: return +x;
          default: return cos(x);
        }
      }
      case 5: return uni(0, 1) ? minimum(sub(), sub()) : maximum(sub(), sub());
      case 6: {
        // Constant exponents a compiler likes to rewrite (sqrt, x * x) must stay std::pow.
        const std::vector<double> exponents{0.5, 2, 3};
        return uni(0, 1) ? fmod(sub(), sub()) : power(abs(sub()), lit(t, pick(exponents)));
      }
      case 7:
        if (coin(0.1))  // one element of a choice between tuples
          return where(bool_expr(ctx, depth - 1), make_tuple({sub(), sub()}), make_tuple({sub(), sub()}))[uni(0, 1)];
        return coin(0.8) ? where(bool_expr(ctx, depth - 1), sub(), sub()) : if_(scalars_.at("flag"), sub(), sub());
      case 8: {
        const IndexCondition cond = condition(ctx);
        return concat_where(cond, sub(), sub());
      }
      case 9: case 10: return mesh_ ? neighbour_expr(t, ctx, depth) : cartesian_shift(t, ctx, depth);
      case 11: return vertical_shift(t, ctx, depth);
      case 12: return materialize(fmt::format("t{}", labels_++), sub());
      case 13: return f64 ? astype(float_expr(DType::float32, ctx, depth - 1), DType::float64)
                          : astype(float_expr(DType::float64, ctx, depth - 1), DType::float32);
      case 14: case 15:
        if (f64) {
          if (auto s = use_shared(ctx)) return *s + sub();
        }
        return sub() * lit(t, 0.5);
      case 16:
        if (f64 && ctx.allow_scan && depth >= 2) return scan_expr(ctx, depth);
        return sub() + float_leaf(t, ctx);
      case 17: return mesh_ ? neighbour_expr(t, ctx, depth) : sub() - float_leaf(t, ctx);
      case 19:  // meshes have no Cartesian shifts (cases 9 and 10): more dynamic ones instead
        if (mesh_) return dynamic_shift(t, ctx, depth);
        return float_leaf(t, ctx) * sub();
      case 20: return dynamic_shift(t, ctx, depth);
      default: return float_leaf(t, ctx) * sub();
    }
  }

  // ---- program structure
  void make_shared_value() {
    Ctx ctx;
    for (int d = 0; d < 2; ++d) {
      ctx.budget.lo[d] = uni(0, 1);
      ctx.budget.hi[d] = uni(0, 1);
    }
    ctx.loc = uni(0, 2);
    const int before = scans_made_;
    // Meshes a little more often: their sweeps' consumers fuse into the level loop on CUDA.
    Expr e = coin(mesh_ ? 0.65 : 0.5) && ctx.allow_scan ? scan_expr(ctx, uni(2, 3)) : float_expr(DType::float64, ctx, uni(2, 3));
    e = materialize(fmt::format("shared{}", shared_.size()), e);
    shared_.push_back({e, ctx.budget, scans_made_ > before, ctx.loc});
  }

  struct DomainChoice {
    std::vector<ProgramBuilder::Bound> bounds;
    Ctx ctx;
  };

  // Sometimes a bound that depends on the sizes in other ways (minimum, maximum, //, %), never
  // past the plain one: the domain only shrinks (maybe to nothing), so every read stays inside
  // the halo budget drawn for it.
  Expr narrower_lo(int lo, const Expr& n) {
    if (!coin(0.1)) return lo;
    return coin(0.5) ? maximum(Expr(lo), n - uni(2, 5)) : maximum(Expr(lo), floor_divide(n, Expr(uni(2, 3))));
  }
  Expr narrower_hi(const Expr& hi, const Expr& n) {
    if (!coin(0.1)) return hi;
    switch (uni(0, 2)) {
      case 0: return minimum(hi, Expr(uni(1, 6)));
      case 1: return minimum(hi, floor_divide(n, Expr(2)) + 1);
      default: return minimum(hi, n % Expr(4) + 2);
    }
  }

  DomainChoice draw_domain() {
    DomainChoice d;
    const bool full_k = coin(0.6);
    d.ctx.flat = coin(0.12);  // a surface statement: no K at all
    d.ctx.allow_scan = full_k && !d.ctx.flat;
    if (d.ctx.flat) {
    } else if (full_k) {
      d.bounds.push_back({K, 0, scalars_.at("nk")});
    } else {
      d.bounds.push_back({K, uni(0, 1), scalars_.at("nk") - uni(0, 1)});
    }
    if (!mesh_) {
      for (int dim = 0; dim < 2; ++dim) {
        int lo = pick(std::vector<int>{-1, 0, 0, 1, 2});
        int hi_off = pick(std::vector<int>{-2, -1, 0, 0, 1});
        if (options_.inside_the_grid) {
          lo = std::max(lo, 0);
          hi_off = std::min(hi_off, 0);
        }
        const Expr n = scalars_.at(dim == 0 ? "ni" : "nj");
        d.bounds.push_back({dim == 0 ? I : J, narrower_lo(lo, n), narrower_hi(n + hi_off, n)});
        d.ctx.budget.lo[dim] = lo + halo;
        d.ctx.budget.hi[dim] = halo - hi_off;
      }
    } else {
      d.ctx.loc = uni(0, 2);
      const int lo = pick(std::vector<int>{0, 0, 1, 2, 3}), hi_off = pick(std::vector<int>{0, 0, 1, 2, 3});
      const Expr n = loc_size(d.ctx.loc);
      Expr lo_bound = narrower_lo(lo, n);  // drawn even when unused: the stream stays the seed's
      Expr hi_bound = narrower_hi(n - hi_off, n);
      if (options_.decomposable) {
        lo_bound = 0;
        hi_bound = n;
      }
      d.bounds.push_back({loc_dim(d.ctx.loc), lo_bound, hi_bound});
    }
    return d;
  }

  void make_statement() {
    DomainChoice d = draw_domain();
    const int depth = uni(2, 4);
    const int kind = d.ctx.flat ? 9 : uni(0, 11);  // surfaces: float64 outputs only
    try {
      Expr value = 0.0;
      std::vector<Expr> outs;
      auto out_field = [&](DType t, const std::string& avoid) -> const FieldParam* {
        std::vector<const FieldParam*> cands;
        for (const FieldParam* f : writable(t, d.ctx))
          if (f->name != avoid && (f->output || coin(0.3))) cands.push_back(f);  // inputs: in/out
        return cands.empty() ? nullptr : pick(cands);
      };
      if (kind == 0) {  // two or three results at once, of mixed dtypes, maybe as nested tuples
        const FieldParam* o1 = out_field(DType::float64, "");
        if (!o1) return;
        const Expr a = top_value(d.ctx, depth);
        std::vector<Expr> rest;
        std::vector<DType> rest_types;
        auto element = [&](DType t) {
          return t == DType::int32     ? int_expr(d.ctx, 1)
                 : t == DType::boolean ? bool_expr(d.ctx, depth - 1)
                                       : float_expr(t, d.ctx, depth - 1);
        };
        std::vector<std::string> used = {o1->name};
        outs = {o1->e};
        const int more = coin(0.3) ? 2 : 1;
        for (int m = 0; m < more; ++m) {
          const DType t = pick(std::vector<DType>{DType::float64, DType::float64, DType::float32, DType::int32, DType::boolean});
          const FieldParam* o = nullptr;
          for (int attempt = 0; attempt < 4 && !o; ++attempt) {
            o = out_field(t, "");
            if (o && std::find(used.begin(), used.end(), o->name) != used.end()) o = nullptr;
          }
          if (!o) continue;
          used.push_back(o->name);
          outs.push_back(o->e);
          rest_types.push_back(t);
          rest.push_back(element(t));
        }
        if (rest.empty()) return;
        // (a, b, c) or (a, (b, c)): a call writes the leaves in order either way (the builder
        // flattens the nesting, so the IR never shows it).
        const bool nested = rest.size() == 2 && coin(0.5);
        auto tuple_of = [&](const Expr& first, const std::vector<Expr>& others) {
          if (nested) return make_tuple({first, make_tuple(others)});
          std::vector<Expr> all = {first};
          all.insert(all.end(), others.begin(), others.end());
          return make_tuple(all);
        };
        value = tuple_of(a, rest);
        if (coin(0.3)) {  // a choice between two tuples of the same structure, element by element
          std::vector<Expr> rest2;
          for (DType t : rest_types) rest2.push_back(element(t));
          const Expr other = tuple_of(float_expr(DType::float64, d.ctx, depth - 1), rest2);
          switch (uni(0, 2)) {
            case 0: value = where(bool_expr(d.ctx, depth - 1), value, other); break;
            case 1: value = if_(scalars_.at("flag"), value, other); break;
            default: value = concat_where(condition(d.ctx), value, other); break;
          }
        }
      } else if (kind == 1) {
        value = float_expr(DType::float32, d.ctx, depth);
        const FieldParam* o = out_field(DType::float32, "");
        if (!o) return;
        outs = {o->e};
      } else if (kind == 2 || kind == 3) {
        const DType t = kind == 2 ? DType::int32 : DType::int64;
        value = int_expr(d.ctx, 2, t);
        const FieldParam* o = out_field(t, "");
        if (!o) return;
        outs = {o->e};
      } else if (kind == 4) {
        value = bool_expr(d.ctx, depth - 1);
        const FieldParam* o = out_field(DType::boolean, "");
        if (!o) return;
        outs = {o->e};
      } else {
        value = top_value(d.ctx, depth);
        const FieldParam* o = out_field(DType::float64, "");
        if (!o) return;
        outs = {o->e};
      }
      pb_.call(fmt::format("s{}", stmts_), value, outs, d.bounds);
      ++stmts_;
    } catch (const Error&) {
      // e.g. a value over [K] written with a domain the DSL refuses: draw another statement
    }
  }

  // Statements often start from a shared value: the transient-across-statements shapes.
  Expr top_value(const Ctx& ctx, int depth) {
    if (coin(0.5))
      if (auto s = use_shared(ctx)) return coin(0.5) ? *s : *s * float_expr(DType::float64, ctx, depth - 1);
    return float_expr(DType::float64, ctx, depth);
  }

  SizeSet draw_sizes() {
    SizeSet s;
    s.nk = pick(std::vector<int>{1, 2, 3, 5, 7, 8});
    if (coin(0.1)) return long_rows();
    if (!mesh_) {
      static const std::vector<int> ns = {1, 2, 3, 4, 5, 6, 7, 9, 11, 13};
      s.ni = pick(ns);
      s.nj = pick(ns);
    } else if (bounded_) {
      s.nx = uni(2, 6);
      s.ny = uni(2, 5);
    } else {
      s.nx = uni(3, 6);
      s.ny = uni(3, 5);
    }
    return s;
  }

  // Rows longer than a horizontal-fastest row block (passes::row_block, 256 columns): several
  // blocks and a remainder, with shifts reaching across block boundaries. Few levels and short
  // other dims keep the reference's work small.
  SizeSet long_rows() {
    SizeSet s;
    s.nk = uni(1, 3);
    if (!mesh_) {
      const int along = pick(std::vector<int>{255, 257, 300, 513});
      const int across = uni(1, 3);
      s.ni = coin(0.5) ? along : across;
      s.nj = s.ni == along ? across : along;
    } else {
      // Torus: 270 edges; 264 cells; 272 vertices. Bounded meshes have a few fewer of each.
      const std::pair<int, int> shapes[] = {{10, 9}, {12, 11}, {17, 16}};
      std::tie(s.nx, s.ny) = shapes[uni(0, 2)];
    }
    return s;
  }

  std::mt19937_64 rng_;
  ProgramBuilder pb_;
  GenerateOptions options_;
  bool mesh_ = false, bounded_ = false;
  std::vector<FieldParam> fields_;
  std::map<std::string, Expr> scalars_;
  std::vector<Shared> shared_;
  int labels_ = 0, scans_made_ = 0, stmts_ = 0;
};

std::int64_t size_along(const Dimension& d, const std::map<std::string, std::int64_t>& sizes, const Mesh* mesh) {
  if (d.kind == DimKind::local)  // "C2EDim": one value per slot of the C2E table
    return mesh->table(d.name.substr(0, d.name.size() - 3)).max_neighbors;
  if (d == I) return sizes.at("ni");
  if (d == J) return sizes.at("nj");
  if (d == K) return sizes.at("nk");
  if (d == Vertex) return sizes.at("n_v");
  if (d == Edge) return sizes.at("n_e");
  return sizes.at("n_c");
}

}  // namespace

std::string SizeSet::to_string(bool mesh) const {
  return mesh ? fmt::format("mesh {}x{}, nk={}", nx, ny, nk) : fmt::format("ni={}, nj={}, nk={}", ni, nj, nk);
}

FuzzCase generate_case(std::uint64_t seed, const GenerateOptions& options) { return Generator(seed, options).run(seed); }

std::map<std::string, Field> CallData::clone_fields() const {
  std::map<std::string, Field> out;
  for (const auto& [n, f] : fields) out.emplace(n, f.clone());
  return out;
}

Arguments CallData::arguments(std::map<std::string, Field>& fs) const {
  Arguments a;
  for (auto& [n, f] : fs) a.field(n, f);
  for (const auto& [n, s] : scalars) a.scalar(n, s);
  for (const std::string& t : tables) a.connectivity(t, mesh->table(t));
  return a;
}

CallData make_call_data(const FuzzCase& c, std::size_t size_index, Layout layout, const std::string& shorten) {
  // Values depend on the case seed and the size set only, never on the layout or on the program's
  // statements, so every compiled variant and every shrunk program sees the same data.
  std::mt19937_64 rng(c.seed * 0x9E3779B97F4A7C15ull + size_index * 7919 + 1);
  const SizeSet& s = c.sizes.at(size_index);
  CallData d;
  if (c.mesh) {
    d.mesh = std::make_shared<Mesh>(c.bounded ? make_bounded_mesh(s.nx, s.ny) : make_torus_mesh(s.nx, s.ny));
    d.size_values = {{"n_v", d.mesh->n_vertices}, {"n_e", d.mesh->n_edges}, {"n_c", d.mesh->n_cells}, {"nk", s.nk}};
  } else {
    d.size_values = {{"ni", s.ni}, {"nj", s.nj}, {"nk", s.nk}};
  }
  std::uniform_real_distribution<double> value(-2, 2);
  for (const ir::Param& p : c.program.params) {
    if (p.kind == ir::ParamKind::scalar) {
      if (p.name == "alpha") d.scalars[p.name] = Scalar(std::round(value(rng) * 8) / 8);
      else if (p.name == "beta") d.scalars[p.name] = Scalar(static_cast<float>(std::round(value(rng) * 8) / 8));
      else if (p.name == "flag") d.scalars[p.name] = Scalar(value(rng) > 0);
      else d.scalars[p.name] = Scalar(static_cast<std::int32_t>(d.size_values.at(p.name)));
      continue;
    }
    if (p.kind == ir::ParamKind::connectivity) {
      d.tables.push_back(p.name);
      continue;
    }
    const FieldExtent ext = c.extents.count(p.name) ? c.extents.at(p.name) : FieldExtent{};
    std::vector<std::int64_t> shape, origin;
    for (const Dimension& dim : p.type.dims) {
      const bool horizontal = dim.kind == DimKind::horizontal;  // K and local dims have no halo
      const std::int64_t lo = horizontal ? ext.lo_halo : 0, hi = horizontal ? ext.hi_halo : 0;
      origin.push_back(-lo);
      shape.push_back(size_along(dim, d.size_values, d.mesh.get()) + lo + hi);
    }
    if (p.name == shorten && !shape.empty()) {
      const std::size_t axis = rng() % shape.size();
      // Mesh fields lose up to 3 points at the low end: a domain over a sub-range of a table may
      // still read only points the field covers, which the reference then accepts.
      const bool low = rng() % 2;
      const std::int64_t cut = std::min<std::int64_t>(shape[axis], low && c.mesh ? 1 + rng() % 3 : 1);
      if (low) origin[axis] += cut;
      shape[axis] -= cut;
    }
    Field f(p.type.dims, p.type.dtype, shape, origin, layout);
    // Fill in logical (layout-independent) order: element n of the row-major index walk.
    std::vector<std::int64_t> idx(shape.size(), 0);
    for (std::int64_t n = 0; n < f.size(); ++n) {
      std::int64_t rest = n, off = 0;
      for (std::size_t a = shape.size(); a-- > 0;) {
        idx[a] = rest % shape[a];
        rest /= shape[a];
        off += idx[a] * f.strides()[a];
      }
      double v = value(rng);
      if (p.type.dtype == DType::int32 || p.type.dtype == DType::int64) {
        v = std::round(v * 10);
        // One element in 32 near the type's limits (exact in a double), so sums wrap around.
        if (rng() % 32 == 0)
          v = std::copysign(p.type.dtype == DType::int32 ? 2147483647.0 - std::abs(v) : 0x1.8p62 - 1024 * std::abs(v), v);
      }
      if (p.type.dtype == DType::boolean) v = v > 0;
      f.set_from_double(off, v);
    }
    d.fields.emplace(p.name, std::move(f));
  }
  if (const auto emptied = emptied_rows(c, size_index)) {
    NeighborTable& t = d.mesh->tables.at(emptied->table);
    for (const std::int64_t row : {std::int64_t{0}, static_cast<std::int64_t>(emptied->row_draw % static_cast<std::uint64_t>(t.n_source))})
      for (int k = 0; k < t.max_neighbors; ++k) t.data[static_cast<std::size_t>(row * t.max_neighbors + k)] = -1;
  }
  return d;
}

// Its own generator, so that every other value of a seed stays what it was.
std::optional<EmptiedRows> emptied_rows(const FuzzCase& c, std::size_t size_index) {
  std::vector<std::string> tables;
  for (const ir::Param& p : c.program.params)
    if (p.kind == ir::ParamKind::connectivity) tables.push_back(p.name);
  if (!c.bounded || tables.empty()) return std::nullopt;
  std::mt19937_64 rng(c.seed * 0xD1B54A32D192ED03ull + size_index * 131 + 17);
  if (rng() % 4 != 0) return std::nullopt;
  const std::string table = tables[rng() % tables.size()];
  return EmptiedRows{table, rng()};
}

std::string field_to_shorten(const FuzzCase& c, std::size_t size_index) {
  std::vector<std::string> names;
  for (const ir::Param& p : c.program.params)
    if (p.kind == ir::ParamKind::field && !p.type.dims.empty()) names.push_back(p.name);
  if (names.empty()) return {};
  std::mt19937_64 rng(c.seed + 1000003 * (size_index + 1));
  return names[rng() % names.size()];
}

}  // namespace fieldflow::fuzz
