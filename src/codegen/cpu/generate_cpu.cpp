// C++/OpenMP code generation. Each kernel becomes one function; its value is emitted as SSA-style
// locals, one per (node, evaluation point), so a value read at one point several times is
// computed once, and a value read at several points (shifts, neighbours) is recomputed at each:
// the transients the passes selected are the only intermediates that go through memory.
#include "codegen/cpu/generate_cpu.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <tuple>

#include "fieldflow/errors.h"

namespace fieldflow::codegen {

namespace {

using ir::Expr;
using ir::ExprKind;

std::string ctype(DType t) { return std::string(cpp_type_name(t)); }

std::string pad_text(int ind) { return std::string(2 * ind, ' '); }

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return o;
}

std::string literal(const Scalar& v) {
  switch (v.dtype()) {
    case DType::boolean: return v.as_int() ? "true" : "false";
    case DType::int32: return fmt::format("std::int32_t({})", v.as_int());
    case DType::int64: return fmt::format("std::int64_t({}LL)", v.as_int());
    case DType::float32:
    case DType::float64: {
      const double d = v.as_double();
      const std::string t = ctype(v.dtype());
      if (std::isnan(d)) return fmt::format("std::numeric_limits<{}>::quiet_NaN()", t);
      if (std::isinf(d)) return fmt::format("({}std::numeric_limits<{}>::infinity())", d < 0 ? "-" : "", t);
      // Hexadecimal floats are exact: the generated constant is the same bits as the IR's.
      return fmt::format("{}({:a})", t, d);
    }
  }
  return "0";
}

// One coordinate of an evaluation point in generated code: `base + offset` along `dim`.
struct Index {
  Dimension dim;
  std::string base;
  std::int64_t offset = 0;
  bool dynamic = false;  // bounds-checked at the load
  std::string str() const { return offset == 0 ? base : fmt::format("({} {} {})", base, offset < 0 ? '-' : '+', std::abs(offset)); }
};
using Point = std::vector<Index>;

std::string point_key(const Point& p) {
  std::string k;
  for (const auto& i : p) k += i.dim.name + "=" + i.str() + ";";
  return k;
}

const Index* find(const Point& p, const Dimension& d) {
  for (const auto& i : p)
    if (i.dim == d) return &i;
  return nullptr;
}

// Declarations at the top of a generated function, shared by the kernels it contains.
struct Decls {
  std::string text;
  std::map<std::string, bool> declared;
  std::string column_locals;  // per-thread column pointers, declared inside the parallel region
};

class KernelEmitter {
 public:
  KernelEmitter(const ir::Schedule& s, int kidx, Decls& decls)
      : s_(s), k_(s.kernels[kidx]), kidx_(kidx), d_(decls), loop_dims_(ir::kernel_loop_dims(s, k_)) {
    // Outputs first: an in/out field is read before it is written and needs a writable pointer.
    for (const auto& o : k_.outputs) use_buffer(o, true);
  }

  // A standalone kernel: one function with its own parallel loop nest.
  std::string emit() {
    std::string body = k_.kind == ir::KernelKind::scan ? emit_scan() : emit_pointwise();
    std::string head = fmt::format("// kernel {}: '{}' ({})\nstatic void kernel_{}(const ff_call* call) {{\n", kidx_,
                                   k_.name, k_.kind == ir::KernelKind::scan ? "scan" : "pointwise", kidx_);
    head += bounds();
    head += fmt::format("  for (int a = 0; a < {}; ++a) if (dom{}[2 * a + 1] <= dom{}[2 * a]) return;\n",
                        loop_dims_.size(), kidx_, kidx_);
    head += d_.text;
    return head + body + "}\n\n";
  }

  // This kernel's loop bounds, read from ff_call::domains, and its number of points.
  std::string bounds() const {
    std::string b = fmt::format("  const std::int64_t* dom{0} = call->domains + {0} * 2 * FF_MAX_DIMS;\n", kidx_);
    std::string points = "std::int64_t(1)";
    for (std::size_t a = 0; a < loop_dims_.size(); ++a) {
      b += fmt::format("  const std::int64_t {} = dom{}[{}], {} = dom{}[{}];\n", lo(loop_dims_[a]), kidx_, 2 * a,
                       hi(loop_dims_[a]), kidx_, 2 * a + 1);
      points += fmt::format(" * ({} - {})", hi(loop_dims_[a]), lo(loop_dims_[a]));
    }
    return b + fmt::format("  const std::int64_t points_k{} = {};\n", kidx_, points);
  }

  // Threads start only when there is enough work to pay for waking them (a few microseconds):
  // small calls, like those of a tiny program in a time loop, run on the calling thread. The
  // threshold is a call field (CompileOptions::parallel_threshold), so tests can force the
  // parallel path on small sizes with the same module.
  std::string parallel_clauses() const {
    return fmt::format(" num_threads(call->num_threads) if({} > call->parallel_threshold)", points());
  }
  std::string points() const { return fmt::format("points_k{}", kidx_); }

  // One column of this kernel inside a column group (fuse_columns): the horizontal loop
  // variables belong to the group; the vertical loop is this kernel's own.
  std::string emit_column(int ind) {
    Dimension kdim;
    for (const auto& d : loop_dims_)
      if (d.kind == DimKind::vertical) kdim = d;
    memo_.assign(1, {});
    const Point p = loop_point();
    std::string code = fmt::format("{}{{  // kernel {}: '{}'\n", pad(ind), kidx_, k_.name);
    if (k_.kind == ir::KernelKind::pointwise) {
      std::string inner;
      std::vector<std::string> values;
      const int nout = static_cast<int>(k_.outputs.size());
      for (int c = 0; c < nout; ++c) values.push_back(gen(*k_.value, p, nout > 1 ? c : -1, inner, ind + 2));
      store_all(values, p, inner, ind + 2);
      code += std::string("#pragma omp simd") + (uses_error_ ? " reduction(|:err)" : "") + "\n" + loop(kdim, ind + 1) +
              inner + pad(ind + 1) + "}\n";
    } else {
      const Expr& scan = *k_.value;
      const std::string body = scan_level(p, ind + 2);
      for (std::size_t c = 0; c < scan.init.size(); ++c)
        code += fmt::format("{}{} c{} = {};\n", pad(ind + 1), ctype(scan.init[c].dtype()), c, literal(scan.init[c]));
      code += fmt::format("{}for (std::int64_t st = 0; st < {} - {}; ++st) {{\n{}{}", pad(ind + 1), hi(kdim), lo(kdim),
                          pad(ind + 2), level(scan)) + body + pad(ind + 1) + "}\n";
    }
    return code + pad(ind) + "}\n";
  }

  bool uses_error() const { return uses_error_; }
  std::string lo(const Dimension& d) const { return fmt::format("lo_k{}_{}", kidx_, var(d)); }
  std::string hi(const Dimension& d) const { return fmt::format("hi_k{}_{}", kidx_, var(d)); }
  static std::string var(const Dimension& d) { return "x_" + sanitize(d.name); }

 private:
  std::string level(const Expr& scan) const {
    return fmt::format("const std::int64_t {} = {} ? {} + st : {} - 1 - st;\n", var(scan.dim),
                       scan.forward ? "true" : "false", lo(scan.dim), hi(scan.dim));
  }

  // One level of a scan at one column: the inputs, the carry update and the stores.
  std::string scan_level(const Point& p, int ind) {
    const Expr& scan = *k_.value;
    const int nc = static_cast<int>(scan.init.size());
    std::string body;
    for (std::size_t i = 0; i < scan.args.size(); ++i)
      body += fmt::format("{}const {} in{} = {};\n", pad(ind), ctype(scan.args[i]->type.dtype), i,
                          gen(*scan.args[i], p, -1, body, ind));
    memo_.emplace_back();
    std::vector<std::string> next;
    for (int c = 0; c < nc; ++c) next.push_back(gen(*scan.body, p, nc > 1 ? c : -1, body, ind));
    memo_.pop_back();
    // Every component of the new carry is computed from the whole previous one before any is
    // replaced: a body may permute them (next[0] may be `c1`).
    for (int c = 0; c < nc; ++c)
      body += fmt::format("{}const {} next{} = {};\n", pad(ind), ctype(scan.init[c].dtype()), c, next[c]);
    for (int c = 0; c < nc; ++c) body += fmt::format("{}c{} = next{};\n", pad(ind), c, c);
    std::vector<std::string> carries;
    for (int c = 0; c < nc; ++c) carries.push_back(fmt::format("c{}", c));
    store_all(carries, p, body, ind);
    return body;
  }

  bool column_local(const std::string& name) const {
    const int t = s_.transient_index(name);
    return t >= 0 && s_.transients[t].column_local;
  }

  // --- declarations of buffers, tables and scalars, emitted once at the top of the kernel ---
  int buffer_index(const std::string& name) const {
    const int t = s_.transient_index(name);
    return t >= 0 ? static_cast<int>(s_.program.params.size()) + t : s_.program.index_of(name);
  }

  std::pair<DType, std::vector<Dimension>> buffer_type(const std::string& name) const {
    const int t = s_.transient_index(name);
    if (t >= 0) return {s_.transients[t].dtype, s_.transients[t].dims};
    const ir::Param* p = s_.program.find(name);
    return {p->type.dtype, p->type.dims};
  }

  std::string use_buffer(const std::string& name, bool write) {
    const int b = buffer_index(name);
    const std::string v = fmt::format("b{}", b);
    if (!d_.declared.count(v)) {
      d_.declared[v] = true;
      auto [dtype, dims] = buffer_type(name);
      const std::string decl = fmt::format("{}{}* __restrict {} = static_cast<{}{}*>(call->buffers[{}].data)", write ? "" : "const ",
                                           ctype(dtype), v, write ? "" : "const ", ctype(dtype), b);
      if (column_local(name))  // this thread's column
        d_.column_locals += fmt::format("    {} + tid * call->buffers[{}].thread_stride;  // {}\n", decl, b, name);
      else
        d_.text += fmt::format("  {};  // {}\n", decl, name);
      d_.text += fmt::format("  const std::int64_t o{} = call->buffers[{}].offset;\n", b, b);
      const Dimension unit = ir::unit_stride_dim(dims, s_.layout);
      for (std::size_t a = 0; a < dims.size(); ++a)
        if (!(dims[a] == unit) && !column_local(name))
          d_.text += fmt::format("  const std::int64_t s{}_{} = call->buffers[{}].strides[{}];\n", b, a, b, a);
    }
    return v;
  }

  std::string use_table(const Connectivity& c) {
    const int i = s_.program.index_of(c.name);
    const std::string v = fmt::format("t{}", i);
    if (!d_.declared.count(v)) {
      d_.declared[v] = true;
      d_.text += fmt::format("  const std::int32_t* __restrict {} = call->tables[{}].data;  // {}\n", v, i, c.name);
      d_.text += fmt::format("  const std::int64_t {0}_rs = call->tables[{1}].source_stride, {0}_ns = call->tables[{1}].neighbor_stride;\n", v, i);
    }
    return v;
  }

  std::string use_scalar(const std::string& name) {
    const int i = s_.program.index_of(name);
    const std::string v = fmt::format("p{}", i);
    if (!d_.declared.count(v)) {
      d_.declared[v] = true;
      const DType t = s_.program.params[i].type.dtype;
      const std::string src = is_floating(t) ? fmt::format("call->scalars[{}].f", i)
                                             : t == DType::boolean ? fmt::format("call->scalars[{}].i != 0", i)
                                                                   : fmt::format("call->scalars[{}].i", i);
      d_.text += fmt::format("  const {} {} = static_cast<{}>({});  // {}\n", ctype(t), v, ctype(t), src, name);
    }
    return v;
  }

  std::string sym(const ir::SymExpr& e) {
    std::string s = fmt::format("std::int64_t({}LL)", e.constant);
    for (const auto& [name, k] : e.terms) {
      auto op = e.ops.find(name);
      s += fmt::format(" + std::int64_t({}) * {}", k, op == e.ops.end() ? use_scalar(name) : sym_op(*op->second));
    }
    return "(" + s + ")";
  }

  // A non-affine step of a bound, with the helpers SymExpr::evaluate uses (same integer results).
  std::string sym_op(const ir::SymOp& op) {
    const std::string a = sym(op.a), b = sym(op.b);
    switch (op.kind) {
      case ir::SymOpKind::div: return fmt::format("fieldflow::abi::ff_div({}, {})", a, b);
      case ir::SymOpKind::floor_divide: return fmt::format("fieldflow::abi::ff_floordiv({}, {})", a, b);
      case ir::SymOpKind::mod: return fmt::format("fieldflow::abi::ff_mod({}, {})", a, b);
      case ir::SymOpKind::mul:
        return fmt::format("std::int64_t(static_cast<unsigned long long>({}) * static_cast<unsigned long long>({}))", a, b);
      case ir::SymOpKind::min: return fmt::format("fieldflow::abi::ff_min({}, {})", a, b);
      case ir::SymOpKind::max: return fmt::format("fieldflow::abi::ff_max({}, {})", a, b);
    }
    return "0";
  }

  // Element offset of a point in buffer b (dims canonical): the unit-stride dim needs no multiply.
  std::string element(const std::string& name, const Point& p, std::string& code, int ind) {
    const int b = buffer_index(name);
    auto [dtype, dims] = buffer_type(name);
    const Dimension unit = ir::unit_stride_dim(dims, s_.layout);
    std::string off = fmt::format("o{}", b);
    const bool column = column_local(name);
    for (std::size_t a = 0; a < dims.size(); ++a) {
      if (column && dims[a].kind != DimKind::vertical) continue;  // one column per thread
      const Index* i = find(p, dims[a]);
      FIELDFLOW_ASSERT(i, "buffer " + name + " read at a point without " + dims[a].name);
      std::string idx = i->str();
      if (i->dynamic) {
        // Data-dependent offsets are checked against the buffer's box; a miss flags an error.
        const std::string d = fresh("dyn");
        code += fmt::format("{}std::int64_t {} = {};\n", pad(ind), d, idx);
        code += fmt::format("{0}if ({1} < call->buffers[{2}].lo[{3}] || {1} >= call->buffers[{2}].hi[{3}]) {{ err |= "
                            "ff_error_dynamic_offset; {1} = call->buffers[{2}].lo[{3}]; }}\n",
                            pad(ind), d, b, a);
        uses_error_ = true;
        idx = d;
      }
      off += dims[a] == unit ? fmt::format(" + {}", idx) : fmt::format(" + {} * s{}_{}", idx, b, a);
    }
    return off;
  }

  static std::string pad(int ind) { return pad_text(ind); }
  std::string fresh(const char* prefix) { return fmt::format("{}{}", prefix, counter_++); }

  std::string lookup(const std::string& key) const {
    for (auto it = memo_.rbegin(); it != memo_.rend(); ++it)
      if (auto f = it->find(key); f != it->end()) return f->second;
    return {};
  }

  // Returns a C++ expression (a local or a literal) for component `comp` of e at point p.
  std::string gen(const Expr& e, const Point& p, int comp, std::string& code, int ind) {
    // Before the memo: a read reused from an earlier reduction still masks this one.
    if (e.kind == ExprKind::field_ref) mask_sparse_read(e.name, p, code, ind);
    const std::string key = fmt::format("{}#{}@{}", static_cast<const void*>(&e), comp, point_key(p));
    if (std::string v = lookup(key); !v.empty()) return v;
    std::string v = gen_uncached(e, p, comp, code, ind);
    memo_.back()[key] = v;
    return v;
  }

  std::string define(DType t, const std::string& expr, std::string& code, int ind) {
    const std::string v = fresh("v");
    code += fmt::format("{}const {} {} = {};\n", pad(ind), ctype(t), v, expr);
    return v;
  }

  std::string gen_uncached(const Expr& e, const Point& p, int comp, std::string& code, int ind) {
    const DType t = e.type.is_tuple() ? e.type.elements.at(comp).dtype : e.type.dtype;
    switch (e.kind) {
      case ExprKind::field_ref:
        return define(t, fmt::format("{}[{}]", use_buffer(e.name, false), element(e.name, p, code, ind)), code, ind);
      case ExprKind::scalar_ref: return use_scalar(e.name);
      case ExprKind::literal: return literal(e.literal);
      case ExprKind::index: {
        const Index* i = find(p, e.dim);
        FIELDFLOW_ASSERT(i, "index() at a point without " + e.dim.name);
        return define(t, fmt::format("static_cast<std::int32_t>({})", i->str()), code, ind);
      }
      case ExprKind::unary: return define(t, unary(e, gen(*e.args[0], p, -1, code, ind)), code, ind);
      case ExprKind::binary:
        return define(t, binary(e, gen(*e.args[0], p, -1, code, ind), gen(*e.args[1], p, -1, code, ind)), code, ind);
      case ExprKind::where: {
        const std::string c = gen(*e.args[0], p, -1, code, ind);
        const std::string a = gen(*e.args[1], p, comp, code, ind), b = gen(*e.args[2], p, comp, code, ind);
        return define(t, fmt::format("({} ? {} : {})", c, a, b), code, ind);
      }
      case ExprKind::concat_where: {
        const Index* i = find(p, e.dim);
        FIELDFLOW_ASSERT(i, "concat_where at a point without " + e.dim.name);
        static const char* ops[] = {"<", "<=", ">", ">=", "==", "!="};
        const std::string cond = fmt::format("{} {} {}", i->str(), ops[static_cast<int>(e.cmp)], sym(e.bound));
        const std::string v = fresh("v");
        code += fmt::format("{}{} {};\n{}if ({}) {{\n", pad(ind), ctype(t), v, pad(ind), cond);
        // Each branch has its own scope: values computed in one are not visible in the other.
        memo_.emplace_back();
        code += fmt::format("{}{} = {};\n", pad(ind + 1), v, gen(*e.args[0], p, comp, code, ind + 1));
        memo_.pop_back();
        code += fmt::format("{}}} else {{\n", pad(ind));
        memo_.emplace_back();
        code += fmt::format("{}{} = {};\n", pad(ind + 1), v, gen(*e.args[1], p, comp, code, ind + 1));
        memo_.pop_back();
        code += fmt::format("{}}}\n", pad(ind));
        return v;
      }
      case ExprKind::cast: {
        const DType from = e.args[0]->type.dtype;
        const std::string x = gen(*e.args[0], p, -1, code, ind);
        if (is_floating(from) && is_integral(t))
          return define(t, fmt::format("fieldflow::abi::ff_to_int<{}>({})", ctype(t), x), code, ind);
        // An integer computed from a float (astype(abs(astype(x, int32)), float64)): compilers
        // fold such round trips into float operations (a truncation that keeps the sign of
        // -0.25, where the integer gives +0), so the integer is hidden from them.
        bool from_float = false;
        for (const ir::Expr* n : ir::post_order(e.args[0]))
          from_float |= n->kind == ExprKind::cast && is_floating(n->args[0]->type.dtype);
        if (is_floating(t) && from_float)
          return define(t, fmt::format("static_cast<{}>(fieldflow::abi::ff_opaque({}))", ctype(t), x), code, ind);
        return define(t, fmt::format("static_cast<{}>({})", ctype(t), x), code, ind);
      }
      case ExprKind::broadcast:
      case ExprKind::named: return gen(*e.args[0], p, comp, code, ind);
      case ExprKind::shift: {
        Point q = p;
        for (auto& i : q)
          if (i.dim == e.dim) i.offset += e.offset;
        return gen(*e.args[0], q, comp, code, ind);
      }
      case ExprKind::dynamic_shift: {
        const std::string off = gen(*e.args[1], p, -1, code, ind);
        Point q = p;
        for (auto& i : q)
          if (i.dim == e.dim) {
            i.base = fmt::format("({} + std::int64_t({}))", i.str(), off);
            i.offset = 0;
            i.dynamic = true;
          }
        return gen(*e.args[0], q, comp, code, ind);
      }
      case ExprKind::neighbor_shift: {
        const Index* src = find(p, e.conn.source);
        FIELDFLOW_ASSERT(src, "neighbour shift at a point without " + e.conn.source.name);
        std::string slot = fmt::format("{}", e.offset);
        if (e.offset < 0) {
          const Index* local = find(p, e.conn.local);
          FIELDFLOW_ASSERT(local, "local shift outside its reduction");
          slot = local->str();
        }
        // A local field read inside a reduction over its neighbours skips missing ones; anywhere
    // else (a sparse output) reading through -1 is an error, like a fixed-index shift.
    const bool reducing = std::find(reducing_.begin(), reducing_.end(), e.conn.local) != reducing_.end();
    const std::string nb =
        neighbor(e.conn, src->str(), slot, e.offset < 0 && reducing ? Missing::skip : Missing::error, code, ind);
        Point q;
        for (const auto& i : p)
          if (!(i.dim == e.conn.source) && !(e.offset < 0 && i.dim == e.conn.local)) q.push_back(i);
        q.push_back({e.conn.target, nb, 0, false});
        return gen(*e.args[0], q, comp, code, ind);
      }
      case ExprKind::reduce: return reduce(e, p, code, ind);
      case ExprKind::make_tuple: return gen(*e.args[comp], p, -1, code, ind);
      case ExprKind::tuple_get: return gen(*e.args[0], p, static_cast<int>(e.offset), code, ind);
      case ExprKind::scan_arg: return fmt::format("in{}", e.offset);
      case ExprKind::carry: return fmt::format("c{}", e.offset);
      case ExprKind::scan: FIELDFLOW_ASSERT(false, "scan inside a kernel value (select_transients missed it)");
      case ExprKind::local_slot: {
        Point q;
        for (const auto& i : p)
          if (!(i.dim == e.conn.local)) q.push_back(i);
        q.push_back({e.conn.local, std::to_string(e.offset), 0, false});
        // The slot is fixed here: an enclosing reduction over the same local dimension does not
        // mask it (the reference does the same).
        const auto saved = std::make_tuple(reducing_, reducing_conn_, reduce_src_, reduce_ok_);
        for (std::size_t r = reducing_.size(); r-- > 0;)
          if (reducing_[r] == e.conn.local) {
            const auto at = static_cast<std::ptrdiff_t>(r);
            reducing_.erase(reducing_.begin() + at);
            reducing_conn_.erase(reducing_conn_.begin() + at);
            reduce_src_.erase(reduce_src_.begin() + at);
            reduce_ok_.erase(reduce_ok_.begin() + at);
          }
        const std::string v = gen(*e.args[0], q, comp, code, ind);
        std::tie(reducing_, reducing_conn_, reduce_src_, reduce_ok_) = saved;
        return v;
      }
    }
    FIELDFLOW_ASSERT(false, "unknown expression kind");
  }

  // A sparse field read inside a reduction over its local dimension, at another element than the
  // reduction's own (s(E2C[0]) reduced over C2E): its slot is masked by the table row of the
  // element it is read at, as the reduction's own row masks any other operand.
  void mask_sparse_read(const std::string& name, const Point& p, std::string& code, int ind) {
    const auto dims = buffer_type(name).second;
    for (std::size_t r = reducing_.size(); r-- > 0;) {
      const Connectivity& c = reducing_conn_[r];
      if (std::find(dims.begin(), dims.end(), c.local) == dims.end()) continue;
      const Index* src = find(p, c.source);
      const Index* slot = find(p, c.local);
      if (!src || !slot || src->str() == reduce_src_[r]) continue;  // the reduction's own row: checked there
      const std::string t = use_table(c);
      const std::string present = fmt::format("({0}[std::int64_t({1}) * {0}_rs + std::int64_t({2}) * {0}_ns] >= 0)", t,
                                              src->str(), slot->str());
      if (reduce_ok_[r].empty()) code += fmt::format("{}if (!{}) continue;  // a skipped slot of {}\n", pad(ind), present, name);
      else code += fmt::format("{0}{1} = {1} && {2};  // a skipped slot of {3}\n", pad(ind), reduce_ok_[r], present, name);
    }
  }

  // What a -1 entry means where it is read: an error (fixed-index shift), a neighbour the enclosing
  // reduction skips (local shift), or nothing yet (the reduction's own row, checked by the caller).
  enum class Missing { error, skip, unchecked };

  std::string neighbor(const Connectivity& c, const std::string& src, const std::string& slot, Missing missing,
                       std::string& code, int ind) {
    const std::string key = fmt::format("nb:{}[{}]({})", c.name, slot, src);
    if (std::string v = lookup(key); !v.empty()) return v;
    const std::string t = use_table(c);
    const std::string v = fresh("nb");
    code += fmt::format("{0}std::int32_t {1} = {2}[std::int64_t({3}) * {2}_rs + std::int64_t({4}) * {2}_ns];\n", pad(ind),
                        v, t, src, slot);
    // Fixed-index shifts (Missing::error) need no check here: the runtime has checked every table
    // row they read for skip values before the call (CompiledProgram::Impl::check_reads).
    if (missing == Missing::skip) {
      // A local field read through another element's row (f(V2E)(E2V[0])): its missing
      // neighbours are skipped by the reduction whose loop this code is in.
      std::string ok;
      for (std::size_t r = reducing_.size(); r-- > 0;)
        if (reducing_[r] == c.local) {
          ok = reduce_ok_[r];
          break;
        }
      if (ok.empty()) code += fmt::format("{}if ({} < 0) continue;\n", pad(ind), v);
      else code += fmt::format("{0}{1} = {1} && {2} >= 0;\n{0}{2} = {2} < 0 ? 0 : {2};\n", pad(ind), ok, v);
    }
    memo_.back()[key] = v;
    return v;
  }

  std::string reduce(const Expr& e, const Point& p, std::string& code, int ind) {
    const DType t = e.type.dtype;
    const Index* src = find(p, e.conn.source);  // absent when the operand shifts elsewhere first
    const std::string acc = fresh("acc");
    const std::string init = e.rop == ir::ReduceOp::sum   ? fmt::format("{}(0)", ctype(t))
                             : e.rop == ir::ReduceOp::max ? fmt::format("std::numeric_limits<{}>::lowest()", ctype(t))
                                                          : fmt::format("std::numeric_limits<{}>::max()", ctype(t));
    // Branch-free form: a missing neighbour reads slot 0 instead and its value is not added, so the
    // fixed-length, fully unrolled neighbour loop vectorises along the unit-stride loop around it.
    // Not when the operand has data-dependent offsets: their bounds check would see slot 0's data.
    bool branch_free = true;
    for (const ir::Expr* x : ir::post_order(e.args[0])) branch_free &= x->kind != ExprKind::dynamic_shift;
    code += fmt::format("{}{} {} = {};\n", pad(ind), ctype(t), acc, init);
    // Unrolled here rather than by the C++ compiler: with a constant slot, every table lookup and
    // every load that does not move with the unit-stride loop is loop-invariant, so the compiler
    // hoists it and the loop around vectorises with contiguous loads. Each slot is a
    // do { } while (false) block, so `continue` skips a missing neighbour.
    for (int slot = 0; slot < e.conn.max_neighbors; ++slot) {
      const std::string n = std::to_string(slot);
      const std::string ok = branch_free ? fresh("ok") : std::string();
      // Branch-free slots stay in the enclosing scope, so a second reduction over the same
      // neighbours (x and y components of a gradient) reuses the first one's lookups and values.
      if (!branch_free) {
        code += fmt::format("{}do {{  // {} neighbour {}\n", pad(ind), e.conn.name, slot);
        memo_.emplace_back();
      }
      const int body_ind = branch_free ? ind : ind + 1;
      if (src) {
        const std::string nb = neighbor(e.conn, src->str(), n, Missing::unchecked, code, body_ind);
        if (branch_free) {
          const std::string present_key = "present:" + nb;
          std::string present = lookup(present_key);
          if (present.empty()) {
            present = fresh("present");
            // Selects, not branches: the loop around must stay free of control flow to vectorise.
            code += fmt::format("{0}const bool {1} = {2} >= 0;  // missing neighbours do not contribute\n"
                                "{0}{2} = {1} ? {2} : 0;\n", pad(body_ind), present, nb);
            memo_.back()[present_key] = present;
          }
          code += fmt::format("{}bool {} = {};\n", pad(body_ind), ok, present);
        } else {
          code += fmt::format("{}if ({} < 0) continue;  // missing neighbours do not contribute\n", pad(body_ind), nb);
        }
      } else if (branch_free) {
        code += fmt::format("{}bool {} = true;\n", pad(body_ind), ok);
      }
      Point q = p;
      // The inner of two nested reductions over one connectivity shadows the outer slot.
      std::erase_if(q, [&](const Index& i) { return i.dim == e.conn.local; });
      q.push_back({e.conn.local, n, 0, false});
      reducing_.push_back(e.conn.local);
      reducing_conn_.push_back(e.conn);
      reduce_src_.push_back(src ? src->str() : std::string());
      reduce_ok_.push_back(ok);
      const std::string x = gen(*e.args[0], q, -1, code, body_ind);
      reduce_ok_.pop_back();
      reduce_src_.pop_back();
      reducing_conn_.pop_back();
      reducing_.pop_back();
      std::string next;
      switch (e.rop) {
        case ir::ReduceOp::sum: next = fmt::format("static_cast<{}>({} + {})", ctype(t), acc, x); break;
        case ir::ReduceOp::max: next = fmt::format("fieldflow::abi::ff_max({}, {})", acc, x); break;
        // ff_min(acc, x) keeps acc unless x < acc, as the reference folds (ties and NaNs too).
        case ir::ReduceOp::min: next = fmt::format("fieldflow::abi::ff_min({}, {})", acc, x); break;
      }
      if (branch_free) {
        // The update is computed unconditionally and then selected: a conditional floating-point
        // add would count as control flow (it may trap) and stop vectorisation.
        const std::string candidate = fresh("v");
        code += fmt::format("{0}const {1} {2} = {3};\n{0}{4} = {5} ? {2} : {4};\n", pad(body_ind), ctype(t), candidate,
                            next, acc, ok);
      } else {
        code += fmt::format("{}{} = {};\n", pad(body_ind), acc, next);
      }
      if (!branch_free) {
        memo_.pop_back();
        code += fmt::format("{}}} while (false);\n", pad(ind));
      }
    }
    return acc;
  }

  static std::string unary(const Expr& e, const std::string& a) {
    const DType t = e.args[0]->type.dtype;
    const bool fl = is_floating(t);
    switch (e.uop) {
      case ir::UnaryOp::neg: return fl ? fmt::format("(-{})", a) : fmt::format("fieldflow::abi::ff_neg({})", a);
      case ir::UnaryOp::logical_not: return fmt::format("(!{})", a);
      case ir::UnaryOp::abs: return fl ? fmt::format("std::abs({})", a) : fmt::format("fieldflow::abi::ff_iabs({})", a);
      case ir::UnaryOp::isnan:
      case ir::UnaryOp::isinf:
      case ir::UnaryOp::isfinite: return fmt::format("static_cast<bool>(std::{}({}))", to_string(e.uop), a);
      // Exactly rounded in IEEE arithmetic: folding or vectorising them cannot change a bit.
      case ir::UnaryOp::sqrt:
      case ir::UnaryOp::floor:
      case ir::UnaryOp::ceil:
      case ir::UnaryOp::trunc: return fmt::format("std::{}({})", to_string(e.uop), a);
      default: break;
    }
    // A libm function, whose result may differ by an ulp from the exact one: the argument is hidden
    // from the optimizer, which would fold constant arguments exactly (tanh(0.625f)) and rewrite
    // compositions (sin(atan(x)) into x / sqrt(x * x + 1)), while the reference calls libm.
    const std::string_view name = e.uop == ir::UnaryOp::arcsin   ? "asin"
                                  : e.uop == ir::UnaryOp::arccos ? "acos"
                                  : e.uop == ir::UnaryOp::arctan ? "atan"
                                  : e.uop == ir::UnaryOp::gamma  ? "tgamma"
                                                                 : to_string(e.uop);
    return fmt::format("std::{}(fieldflow::abi::ff_libm_arg({}))", name, a);
  }

  static std::string binary(const Expr& e, const std::string& a, const std::string& b) {
    const DType t = e.args[0]->type.dtype;
    const std::string ct = ctype(t);
    switch (e.bop) {
      case ir::BinaryOp::add: return fmt::format("static_cast<{}>({} + {})", ct, a, b);
      case ir::BinaryOp::sub: return fmt::format("static_cast<{}>({} - {})", ct, a, b);
      case ir::BinaryOp::mul: return fmt::format("static_cast<{}>({} * {})", ct, a, b);
      case ir::BinaryOp::div:
        return is_floating(t) ? fmt::format("({} / {})", a, b) : fmt::format("fieldflow::abi::ff_div({}, {})", a, b);
      case ir::BinaryOp::logical_and: return fmt::format("({} && {})", a, b);
      case ir::BinaryOp::logical_or: return fmt::format("({} || {})", a, b);
      case ir::BinaryOp::minimum: return fmt::format("fieldflow::abi::ff_min({}, {})", a, b);
      case ir::BinaryOp::maximum: return fmt::format("fieldflow::abi::ff_max({}, {})", a, b);
      case ir::BinaryOp::fmod: return fmt::format("std::fmod({}, {})", a, b);
      case ir::BinaryOp::power:
        return is_floating(t) ? fmt::format("fieldflow::abi::ff_pow({}, {})", a, b)
                              : fmt::format("fieldflow::abi::ff_ipow({}, {})", a, b);
      case ir::BinaryOp::floor_divide: return fmt::format("fieldflow::abi::ff_floordiv({}, {})", a, b);
      case ir::BinaryOp::mod: return fmt::format("fieldflow::abi::ff_mod({}, {})", a, b);
      case ir::BinaryOp::logical_xor: return fmt::format("({} != {})", a, b);
      default: return fmt::format("({} {} {})", a, to_string(e.bop), b);
    }
  }

  Point loop_point() const {
    Point p;
    for (const auto& d : loop_dims_) p.push_back({d, var(d), 0, false});
    return p;
  }

  // Loop order, slowest first: the unit-stride dimension of the layout innermost. Layout::any
  // loops like horizontal_fastest (Fortran's column-major arrays, the common generic case).
  std::vector<Dimension> loop_order() const {
    std::vector<Dimension> order = loop_dims_;
    if (s_.layout != Layout::vertical_fastest) std::reverse(order.begin(), order.end());
    return order;
  }

  std::string store_all(const std::vector<std::string>& values, const Point& p, std::string& code, int ind) {
    for (std::size_t c = 0; c < k_.outputs.size(); ++c) {
      const std::string b = use_buffer(k_.outputs[c], true);
      code += fmt::format("{}{}[{}] = {};\n", pad(ind), b, element(k_.outputs[c], p, code, ind), values[c]);
    }
    return code;
  }

  std::string loop(const Dimension& d, int ind) const {
    const std::string x = var(d);
    return fmt::format("{0}for (std::int64_t {1} = {2}; {1} < {3}; ++{1}) {{\n", pad(ind), x, lo(d), hi(d));
  }

  std::string emit_pointwise() {
    const auto order = loop_order();
    const int n = static_cast<int>(order.size());
    memo_.assign(1, {});
    std::string inner;
    const Point p = loop_point();
    std::vector<std::string> values;
    const int nout = static_cast<int>(k_.outputs.size());
    for (int c = 0; c < nout; ++c) values.push_back(gen(*k_.value, p, nout > 1 ? c : -1, inner, n + 1));
    store_all(values, p, inner, n + 1);
    // In-kernel checks (dynamic offsets, fixed neighbour shifts) OR their failures into `err`.
    const std::string red = uses_error_ ? " reduction(|:err)" : "";
    const std::string report = uses_error_ ? "if (err) __atomic_fetch_or(call->error, err, __ATOMIC_RELAXED);\n" : "";
    std::string code;
    if (n == 0) {  // a zero-dimensional output: one value, no loop
      code += uses_error_ ? "  std::int32_t err = 0;\n" : "";
      return indent_nested(code + "  {\n" + inner + "  }\n" + (report.empty() ? "" : "  " + report));
    }
    if (n == 1) {
      code += uses_error_ ? "  std::int32_t err = 0;\n" : "";
      code += "#pragma omp parallel for simd schedule(static)" + parallel_clauses() + red + "\n" +
              loop(order[0], 1) + inner + "  }\n" + (report.empty() ? "" : "  " + report);
      return indent_nested(code);
    }
    code += "#pragma omp parallel" + parallel_clauses() + "\n  {\n";
    code += uses_error_ ? "    std::int32_t err = 0;\n" : "";
    code += n > 2 ? fmt::format("#pragma omp for collapse({}) schedule(static)\n", n - 1)
                  : std::string("#pragma omp for schedule(static)\n");
    for (int a = 0; a < n - 1; ++a) code += loop(order[a], 2 + a);
    code += "#pragma omp simd" + red + "\n" + loop(order[n - 1], n + 1) + inner;
    for (int a = n + 1; a >= 2; --a) code += pad(a) + "}\n";
    code += (report.empty() ? "" : "    " + report) + "  }\n";
    return indent_nested(code);
  }

  std::string emit_scan() {
    const Expr& scan = *k_.value;
    const Dimension kdim = scan.dim;
    std::vector<Dimension> horizontal;
    for (const auto& d : loop_order())
      if (!(d == kdim)) horizontal.push_back(d);
    const int nc = static_cast<int>(scan.init.size());
    const int h = static_cast<int>(horizontal.size());
    const bool vertical_inner = s_.layout == Layout::vertical_fastest;
    const std::string level_line = level(scan);
    memo_.assign(1, {});
    const Point p = loop_point();
    const int ind = vertical_inner ? h + 3 : h + 4;
    const std::string body = scan_level(p, ind);
    std::string code = "#pragma omp parallel" + parallel_clauses() + "\n  {\n";
    code += uses_error_ ? "    std::int32_t err = 0;\n" : "";
    if (vertical_inner) {
      // Column by column: the carry stays in registers along the sequential vertical sweep.
      if (h > 0) {
        code += h > 1 ? fmt::format("#pragma omp for collapse({}) schedule(static)\n", h) : "#pragma omp for schedule(static)\n";
        for (int a = 0; a < h; ++a) code += loop(horizontal[a], 2 + a);
      } else {
        code += "#pragma omp single\n    {\n";
      }
      for (int c = 0; c < nc; ++c)
        code += fmt::format("{}{} c{} = {};\n", pad(h + 2), ctype(scan.init[c].dtype()), c, literal(scan.init[c]));
      code += fmt::format("{}for (std::int64_t st = 0; st < {} - {}; ++st) {{\n{}{}", pad(h + 2), hi(kdim), lo(kdim),
                          pad(h + 3), level_line);
      code += body + pad(h + 2) + "}\n";
      for (int a = h + 1; a >= 2; --a) code += pad(a) + "}\n";
      if (h == 0) code += "    }\n";
    } else {
      // Level by level, each vectorised over the horizontal: the carry is the previous level of
      // the output itself. Static schedules give every thread the same columns at every level,
      // so no barrier is needed between levels.
      code += fmt::format("    for (std::int64_t st = 0; st < {} - {}; ++st) {{\n      {}", hi(kdim), lo(kdim), level_line);
      if (h == 0) code += "#pragma omp single\n      {\n";
      // A worksharing loop cannot reduce into the thread's private `err`: no simd when checking.
      else if (h == 1) code += uses_error_ ? "#pragma omp for schedule(static) nowait\n" : "#pragma omp for simd schedule(static) nowait\n";
      else code += fmt::format("#pragma omp for collapse({}) schedule(static) nowait\n", h - 1);
      for (int a = 0; a < h; ++a) {
        if (h > 1 && a == h - 1) code += std::string("#pragma omp simd") + (uses_error_ ? " reduction(|:err)" : "") + "\n";
        code += loop(horizontal[a], 3 + a);
      }
      Point prev = p;
      for (auto& i : prev)
        if (i.dim == kdim) i.offset = scan.forward ? -1 : 1;
      std::string carry_in;
      for (int c = 0; c < nc; ++c) {
        const std::string b = use_buffer(k_.outputs[c], true);
        carry_in += fmt::format("{}{} c{} = st == 0 ? {} : {}[{}];\n", pad(ind), ctype(scan.init[c].dtype()), c,
                                literal(scan.init[c]), b, element(k_.outputs[c], prev, carry_in, ind));
      }
      code += carry_in + body;
      for (int a = h + 2; a >= 3; --a) code += pad(a) + "}\n";
      if (h == 0) code += "      }\n";
      code += "    }\n";
    }
    code += uses_error_ ? "    if (err) __atomic_fetch_or(call->error, err, __ATOMIC_RELAXED);\n  }\n" : "  }\n";
    return indent_nested(code);
  }

  static std::string indent_nested(const std::string& code) {
    std::string out;
    for (std::size_t pos = 0; pos < code.size();) {
      const std::size_t nl = code.find('\n', pos);
      const std::string line = code.substr(pos, nl - pos);
      out += (line.rfind("#pragma", 0) == 0 ? "" : "  ") + line + "\n";
      pos = nl == std::string::npos ? code.size() : nl + 1;
    }
    return out;
  }

  const ir::Schedule& s_;
  const ir::Kernel& k_;
  int kidx_;
  Decls& d_;
  std::vector<Dimension> loop_dims_;
  std::vector<std::map<std::string, std::string>> memo_;
  std::vector<Dimension> reducing_;  // local dimensions of the reductions being generated
  std::vector<std::string> reduce_ok_;  // their "neighbour present" flags (branch-free form), or empty
  std::vector<Connectivity> reducing_conn_;  // their connectivities
  std::vector<std::string> reduce_src_;      // their source element index, or empty (shifted elsewhere)
  int counter_ = 0;
  bool uses_error_ = false;
};

// Kernels [first, last] of a column group: each thread takes whole columns and runs every
// kernel of the group on one before the next, so column-local transients fit in one column.
// The statement kernels of a group share one horizontal box (fuse_columns checks it), but a
// transient producer covers what its readers need, which may be more or less than that box when
// a reader is outside the group. So the columns loop over the union of the kernels' boxes, and
// each kernel runs only on the columns of its own box.
std::string emit_column_group(const ir::Schedule& s, int first, int last) {
  Decls d;
  std::vector<std::unique_ptr<KernelEmitter>> kernels;
  for (int k = first; k <= last; ++k) kernels.push_back(std::make_unique<KernelEmitter>(s, k, d));
  std::vector<Dimension> horizontal;
  for (const auto& dim : ir::kernel_loop_dims(s, s.kernels[first]))
    if (dim.kind != DimKind::vertical) horizontal.push_back(dim);
  const int h = static_cast<int>(horizontal.size());
  const std::string in_column = pad_text(h + 2);
  std::string columns;
  for (auto& k : kernels) {
    std::string inside;
    for (const auto& dim : horizontal)
      inside += fmt::format("{}{} >= {} && {} < {}", inside.empty() ? "" : " && ", KernelEmitter::var(dim), k->lo(dim),
                            KernelEmitter::var(dim), k->hi(dim));
    columns += fmt::format("{}if ({}) {{\n", in_column, inside) + k->emit_column(h + 3) + in_column + "}\n";
  }
  bool err = false;
  for (auto& k : kernels) err |= k->uses_error();
  std::string code = fmt::format("// kernels {}..{}: column group\nstatic void group_{}(const ff_call* call) {{\n", first,
                                 last, first);
  for (auto& k : kernels) code += k->bounds();
  code += d.text;
  // The union of the non-empty kernel boxes (an empty box must not widen it).
  for (const auto& dim : horizontal) {
    const std::string v = KernelEmitter::var(dim);
    code += fmt::format("  std::int64_t lo_g_{0} = std::numeric_limits<std::int64_t>::max(), hi_g_{0} = "
                        "std::numeric_limits<std::int64_t>::min();\n", v);
    for (auto& k : kernels)
      code += fmt::format("  if ({0} > 0) {{ lo_g_{1} = std::min(lo_g_{1}, {2}); hi_g_{1} = std::max(hi_g_{1}, {3}); }}\n",
                          k->points(), v, k->lo(dim), k->hi(dim));
  }
  std::string work = "std::int64_t(0)";
  for (auto& k : kernels) work += " + " + k->points();
  code += fmt::format("  if ({} == 0) return;\n", work);
  code += fmt::format("#pragma omp parallel num_threads(call->num_threads) if({} > call->parallel_threshold)\n", work);
  code += "  {\n    const std::int64_t tid = omp_get_thread_num();\n";
  code += d.column_locals;
  code += err ? "    std::int32_t err = 0;\n" : "";
  code += fmt::format("#pragma omp for collapse({}) schedule(static)\n", h);
  for (int a = 0; a < h; ++a)
    code += fmt::format("{0}for (std::int64_t {1} = lo_g_{1}; {1} < hi_g_{1}; ++{1}) {{\n", pad_text(2 + a),
                        KernelEmitter::var(horizontal[a]));
  code += columns;
  for (int a = h - 1; a >= 0; --a) code += pad_text(2 + a) + "}\n";
  code += err ? "    if (err) __atomic_fetch_or(call->error, err, __ATOMIC_RELAXED);\n" : "";
  return code + "  }\n}\n\n";
}

}  // namespace

std::string generate_cpu_source(const ir::Schedule& s, const CpuCodegenOptions& options) {
  const std::string& prefix = options.symbol_prefix;
  const bool identifier = !prefix.empty() && !std::isdigit(static_cast<unsigned char>(prefix[0])) &&
                          sanitize(prefix) == prefix;
  FIELDFLOW_ASSERT(identifier, "symbol prefix '" + prefix + "' does not start a C identifier");
  std::string src = fmt::format(
      "// Generated by fieldflow from program '{}' (layout {}). Do not edit.\n"
      "#include <fieldflow/abi.h>\n#include <omp.h>\n#include <cmath>\n#include <cstdint>\n#include <limits>\n\n"
      "namespace {{\n\n",
      s.program.name, to_string(s.layout));
  std::string calls;
  for (std::size_t k = 0; k < s.kernels.size();) {
    if (s.kernels[k].column_group < 0) {
      Decls d;
      src += KernelEmitter(s, static_cast<int>(k), d).emit();
      calls += fmt::format("  kernel_{}(call);\n  if (*call->error) return *call->error;\n", k);
      ++k;
      continue;
    }
    std::size_t last = k;
    while (last + 1 < s.kernels.size() && s.kernels[last + 1].column_group == s.kernels[k].column_group) ++last;
    src += emit_column_group(s, static_cast<int>(k), static_cast<int>(last));
    calls += fmt::format("  group_{}(call);\n  if (*call->error) return *call->error;\n", k);
    k = last + 1;
  }
  src += fmt::format("}}  // namespace\n\nextern \"C\" std::int32_t {}abi_version(void) {{ return FF_ABI_VERSION; }}\n\n",
                     prefix);
  src += fmt::format("extern \"C\" std::int32_t {}run(const ff_call* call) {{\n", prefix) + calls;
  src += "  return *call->error;\n}\n";
  return src;
}

}  // namespace fieldflow::codegen
