// The per-point code both generators share: see point_emitter.h.
#include "codegen/common/point_emitter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <fmt/format.h>
#include <tuple>

#include "fieldflow/abi.h"
#include "fieldflow/errors.h"

namespace fieldflow::codegen {

using ir::Expr;
using ir::ExprKind;

const Dialect& cpu_dialect() {
  static const Dialect d{};
  return d;
}

// Device code: CUDA's global math overloads and ff_limits (NVRTC has no <cmath> nor <limits>; the
// CUDA source defines ff_limits), tables through the read-only data cache.
const Dialect& cuda_dialect() {
  static const Dialect d{"::", "ff_limits", "__restrict__", true, "", "ff_index", "ff_offset", true};
  return d;
}

const Dialect& cuda_race_check_dialect() {
  static const Dialect d = [] {
    Dialect checked = cuda_dialect();
    checked.checked_buffer = "ff_checked";
    return checked;
  }();
  return d;
}

std::string ctype(DType t) { return std::string(cpp_type_name(t)); }

std::string pad_text(int ind) { return std::string(2 * ind, ' '); }

std::string sanitize(const std::string& s) {
  std::string o;
  for (char c : s) o += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return o;
}

std::string literal(const Scalar& v, const Dialect& dialect) {
  switch (v.dtype()) {
    case DType::boolean: return v.as_int() ? "true" : "false";
    case DType::int32: return fmt::format("std::int32_t({})", v.as_int());
    case DType::int64: return fmt::format("std::int64_t({}LL)", v.as_int());
    case DType::float32:
    case DType::float64: {
      const double d = v.as_double();
      const std::string t = ctype(v.dtype());
      if (std::isnan(d)) return fmt::format("{}<{}>::quiet_NaN()", dialect.limits, t);
      if (std::isinf(d)) return fmt::format("({}{}<{}>::infinity())", d < 0 ? "-" : "", dialect.limits, t);
      // Hexadecimal floats are exact: the generated constant is the same bits as the IR's.
      return fmt::format("{}({:a})", t, d);
    }
  }
  return "0";
}

std::string call_word_source(const CallWord& w) {
  using K = CallWord::Kind;
  switch (w.kind) {
    case K::domain: return fmt::format("call->domains[{}]", w.index);
    case K::buffer_data: return fmt::format("call->buffers[{}].data", w.index);
    case K::buffer_offset: return fmt::format("call->buffers[{}].offset", w.index);
    case K::buffer_stride: return fmt::format("call->buffers[{}].strides[{}]", w.index, w.slot);
    case K::buffer_lo: return fmt::format("call->buffers[{}].lo[{}]", w.index, w.slot);
    case K::buffer_hi: return fmt::format("call->buffers[{}].hi[{}]", w.index, w.slot);
    case K::table_data: return fmt::format("call->tables[{}].data", w.index);
    case K::table_source_stride: return fmt::format("call->tables[{}].source_stride", w.index);
    case K::table_neighbor_stride: return fmt::format("call->tables[{}].neighbor_stride", w.index);
    case K::scalar_i: return fmt::format("call->scalars[{}].i", w.index);
    case K::scalar_f: return fmt::format("call->scalars[{}].f", w.index);
    case K::error: return "call->error";
  }
  FIELDFLOW_UNREACHABLE("unknown call word");
}

char word_member(const CallWord& w) {
  using K = CallWord::Kind;
  switch (w.kind) {
    case K::buffer_data:
    case K::table_data:
    case K::error: return 'p';
    case K::scalar_f: return 'f';
    default: return 'i';
  }
}

std::string PointEmitter::word(const CallWord& w) {
  if (!dialect_.parameter_words) return call_word_source(w);
  auto at = std::find(d_.words.begin(), d_.words.end(), w);
  if (at == d_.words.end()) at = d_.words.insert(d_.words.end(), w);
  return fmt::format("ff_p.w[{}].{}", at - d_.words.begin(), word_member(w));
}

std::string Index::str() const {
  return offset == 0 ? base : fmt::format("({} {} {})", base, offset < 0 ? '-' : '+', std::abs(offset));
}

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

PointEmitter::PointEmitter(const ir::Schedule& s, int kidx, Decls& decls, const Dialect& dialect)
    : s_(s), k_(s.kernels[kidx]), kidx_(kidx), d_(decls), dialect_(dialect), loop_dims_(ir::kernel_loop_dims(s, k_)) {
  // Outputs first: an in/out field is read before it is written and needs a writable pointer.
  for (const auto& o : k_.outputs)
    if (!in_registers(o)) use_buffer(o, true);
}

std::string PointEmitter::points() const { return fmt::format("points_k{}", kidx_); }

std::string PointEmitter::table_entry(const std::string& table, const std::string& index) const {
  return dialect_.read_only_tables ? fmt::format("__ldg(&{}[{}])", table, index) : fmt::format("{}[{}]", table, index);
}

// This kernel's loop bounds, read from ff_call::domains, and its number of points.
std::string PointEmitter::bounds() {
  std::string b;
  std::string points = "std::int64_t(1)";
  for (std::size_t a = 0; a < loop_dims_.size(); ++a) {
    const int at = kidx_ * 2 * FF_MAX_DIMS + 2 * static_cast<int>(a);
    b += fmt::format("  const {0} {1} = static_cast<{0}>({2}), {3} = static_cast<{0}>({4});\n", dialect_.index_type,
                     lo(loop_dims_[a]), word({CallWord::Kind::domain, at}), hi(loop_dims_[a]),
                     word({CallWord::Kind::domain, at + 1}));
    points += fmt::format(" * ({} - {})", hi(loop_dims_[a]), lo(loop_dims_[a]));
  }
  return b + fmt::format("  const std::int64_t points_k{} = {};\n", kidx_, points);
}

std::string PointEmitter::lo(const Dimension& d) const { return fmt::format("lo_k{}_{}", kidx_, var(d)); }

std::string PointEmitter::hi(const Dimension& d) const { return fmt::format("hi_k{}_{}", kidx_, var(d)); }

std::string PointEmitter::var(const Dimension& d) { return "x_" + sanitize(d.name); }

std::string PointEmitter::level(const Expr& scan) const {
  return fmt::format("const {} {} = {} ? {} + st : {} - 1 - st;\n", dialect_.index_type, var(scan.dim),
                     scan.forward ? "true" : "false", lo(scan.dim), hi(scan.dim));
}

// One level of a scan at one column: the inputs, the carry update and the stores.
std::string PointEmitter::scan_level(const Point& p, int ind) {
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
  for (int c = 0; c < nc; ++c) body += fmt::format("{}{} = next{};\n", pad(ind), carry(c), c);
  std::vector<std::string> carries;
  for (int c = 0; c < nc; ++c) carries.push_back(carry(c));
  store_all(carries, p, body, ind);
  return body;
}

bool PointEmitter::column_local(const std::string& name) const {
  const int t = s_.transient_index(name);
  return t >= 0 && s_.transients[t].column_local;
}

bool PointEmitter::in_registers(const std::string& name) const {
  const int t = s_.transient_index(name);
  return t >= 0 && s_.transients[t].in_registers;
}

bool PointEmitter::read_across_rows(const std::string& name, const Dimension& unit) const {
  for (const ir::Access& a : k_.accesses)
    if (a.buffer == name)
      for (const ir::DimAccess& d : a.dims)
        if (d.kind == ir::DimAccess::Kind::loop && !(d.dim == unit) && (d.min_offset != 0 || d.max_offset != 0))
          return true;
  return false;
}

std::string PointEmitter::carry(int c) const { return fmt::format("c{}{}", c, carry_index_); }

int PointEmitter::column_block_axis(const std::string& name) const {
  const int t = s_.transient_index(name);
  if (t < 0 || !s_.transients[t].column_local || s_.transients[t].column_block == 1) return -1;
  const auto& dims = s_.transients[t].dims;
  const Dimension along = ir::column_block_dim(dims, s_.layout);
  for (std::size_t a = 0; a < dims.size(); ++a)
    if (dims[a] == along) return static_cast<int>(a);
  return -1;
}

std::string PointEmitter::block_start(const Dimension& d) { return "xb_" + sanitize(d.name); }

// The unit-stride dimension of a buffer: the layout's, except in a column-local block, which is
// laid out level by level (runtime: CompiledProgram's transient buffers) in both layouts.
Dimension PointEmitter::unit_dim(const std::string& name, const std::vector<Dimension>& dims) const {
  const int block_axis = column_block_axis(name);
  return block_axis >= 0 ? dims[block_axis] : ir::unit_stride_dim(dims, s_.layout);
}

// --- declarations of buffers, tables and scalars, emitted once at the top of the kernel ---
int PointEmitter::buffer_index(const std::string& name) const {
  const int t = s_.transient_index(name);
  return t >= 0 ? static_cast<int>(s_.program.params.size()) + t : s_.program.index_of(name);
}

std::pair<DType, std::vector<Dimension>> PointEmitter::buffer_type(const std::string& name) const {
  const int t = s_.transient_index(name);
  if (t >= 0) return {s_.transients[t].dtype, s_.transients[t].dims};
  const ir::Param* p = s_.program.find(name);
  return {p->type.dtype, p->type.dims};
}

std::string PointEmitter::use_buffer(const std::string& name, bool write) {
  const int b = buffer_index(name);
  const std::string v = fmt::format("b{}", b);
  if (!d_.declared.count(v)) {
    d_.declared[v] = true;
    auto [dtype, dims] = buffer_type(name);
    const std::string type = fmt::format("{}{}", write ? "" : "const ", ctype(dtype));
    const std::string pointer = fmt::format("static_cast<{}*>({})", type, word({CallWord::Kind::buffer_data, b}));
    const std::string decl =
        dialect_.checked_buffer.empty()
            ? fmt::format("{}* {} {} = {}", type, dialect_.restrict_qualifier, v, pointer)
            : fmt::format("const {}<{}> {}{{{}, {}}}", dialect_.checked_buffer, type, v, pointer, b);
    FIELDFLOW_ASSERT(dialect_.checked_buffer.empty() || !column_local(name), "checked buffers in a column group");
    if (column_local(name))  // this thread's column
      d_.column_locals += fmt::format("    {} + tid * call->buffers[{}].thread_stride;  // {}\n", decl, b, name);
    else
      d_.text += fmt::format("  {};  // {}\n", decl, name);
    d_.text += fmt::format("  const {0} o{1} = static_cast<{0}>({2});\n", dialect_.offset_type, b,
                           word({CallWord::Kind::buffer_offset, b}));
    const Dimension unit = unit_dim(name, dims);
    for (std::size_t a = 0; a < dims.size(); ++a)
      if (!(dims[a] == unit) && (!column_local(name) || dims[a].kind == DimKind::vertical ||
                                 static_cast<int>(a) == column_block_axis(name)))
        d_.text += fmt::format("  const {0} s{1}_{2} = static_cast<{0}>({3});\n", dialect_.offset_type, b, a,
                               word({CallWord::Kind::buffer_stride, b, static_cast<int>(a)}));
  }
  return v;
}

std::string PointEmitter::use_table(const Connectivity& c) {
  const int i = s_.program.index_of(c.name);
  const std::string v = fmt::format("t{}", i);
  if (!d_.declared.count(v)) {
    d_.declared[v] = true;
    d_.tables.insert(v);
    d_.text += fmt::format("  const std::int32_t* {} {} = static_cast<const std::int32_t*>({});  // {}\n",
                           dialect_.restrict_qualifier, v, word({CallWord::Kind::table_data, i}), c.name);
    d_.text += fmt::format("  const std::int64_t {0}_rs = {1}, {0}_ns = {2};\n", v,
                           word({CallWord::Kind::table_source_stride, i}), word({CallWord::Kind::table_neighbor_stride, i}));
  }
  return v;
}

std::string PointEmitter::use_scalar(const std::string& name) {
  const int i = s_.program.index_of(name);
  const std::string v = fmt::format("p{}", i);
  if (!d_.declared.count(v)) {
    d_.declared[v] = true;
    const DType t = s_.program.params[i].type.dtype;
    const std::string src = is_floating(t)          ? word({CallWord::Kind::scalar_f, i})
                            : t == DType::boolean ? word({CallWord::Kind::scalar_i, i}) + " != 0"
                                                  : word({CallWord::Kind::scalar_i, i});
    d_.text += fmt::format("  const {} {} = static_cast<{}>({});  // {}\n", ctype(t), v, ctype(t), src, name);
  }
  return v;
}

// A bound in wrapping int64 arithmetic (unsigned, converted back), as SymExpr::evaluate computes it.
std::string PointEmitter::sym(const ir::SymExpr& e) {
  std::string s = fmt::format("{}ULL", static_cast<unsigned long long>(e.constant));
  for (const auto& [name, k] : e.terms) {
    auto op = e.ops.find(name);
    s += fmt::format(" + {}ULL * static_cast<unsigned long long>({})", static_cast<unsigned long long>(k),
                     op == e.ops.end() ? use_scalar(name) : sym_op(*op->second));
  }
  return "std::int64_t(" + s + ")";
}

// A non-affine step of a bound, with the helpers SymExpr::evaluate uses (same integer results).
std::string PointEmitter::sym_op(const ir::SymOp& op) {
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
// For a buffer this kernel reads across rows (a stencil) it is `row + shift`: `row` a local
// holding the coordinates away from the unit-stride dimension of the point the access is centred
// on (`o0 + x_I * s0_0 + x_J * s0_1`), `shift` the unit-stride index plus the stencil offsets
// times their strides (`x_K - s0_1`). Every access around one point shares the row, which does
// not change along the vector loop, and the offsets times strides do not change in the whole
// kernel: GCC computes one row per row instead of one address per access (laplacian,
// vertical-fastest: 5-7% less time, the per-row setup of 80-level columns no longer spilling;
// 2.9 -> 2.7 instructions per point, the hand-written loop's count). Other buffers keep one sum
// per access (as row locals, masked_update's in-place loop took 10% more instructions), and so do
// accesses whose coordinates are not plain loop variables (neighbours, dynamic offsets, blocks).
std::string PointEmitter::element(const std::string& name, const Point& p, std::string& code, int ind,
                                  bool row_local, std::string* in_box) {
  const int b = buffer_index(name);
  auto [dtype, dims] = buffer_type(name);
  const Dimension unit = unit_dim(name, dims);
  std::string flat = fmt::format("o{}", b);  // the whole address as one sum, in the buffer's order
  const bool rows = row_local && read_across_rows(name, unit);
  std::string row = flat;
  bool plain_row = true;  // the row's coordinates are this kernel's loop variables, unshifted
  bool row_has_terms = false;
  // The shift's terms: the unit-stride index, then `N * stride` per offset (negative: a minus).
  std::vector<std::pair<bool, std::string>> shift;  // (negative, term)
  const bool column = column_local(name);
  const int block_axis = column_block_axis(name);
  for (std::size_t a = 0; a < dims.size(); ++a) {
    const bool along_block = static_cast<int>(a) == block_axis;
    if (column && dims[a].kind != DimKind::vertical && !along_block) continue;  // the thread's column
    const Index* i = find(p, dims[a]);
    FIELDFLOW_ASSERT(i, "buffer " + name + " read at a point without " + dims[a].name);
    max_shift_ = std::max(max_shift_, i->offset < 0 ? -i->offset : i->offset);
    const std::string stride = fmt::format("s{}_{}", b, a);
    std::string idx = i->str();
    if (along_block) {
      idx = fmt::format("({} - {})", i->str(), block_start(dims[a]));  // the column's place in this thread's block
    } else if (i->dynamic) {
      // Data-dependent offsets are checked against the buffer's box; a miss flags an error, and
      // the load is not made (in_box): the box's first index, which the offset then becomes, is
      // no element when the box is empty along this dim (a field without levels).
      FIELDFLOW_ASSERT(in_box, "buffer " + name + " read at a dynamic offset where nothing guards the load");
      const std::string d = fresh("dyn"), inside = fresh("in_box");
      code += fmt::format("{}std::int64_t {} = {};\n", pad(ind), d, idx);
      const std::string box_lo = word({CallWord::Kind::buffer_lo, b, static_cast<int>(a)});
      const std::string box_hi = word({CallWord::Kind::buffer_hi, b, static_cast<int>(a)});
      code += fmt::format("{}const bool {} = {} >= {} && {} < {};\n", pad(ind), inside, d, box_lo, d, box_hi);
      code += fmt::format("{0}if (!{1}) {{ err |= ff_error_dynamic_offset; {2} = {3}; }}\n", pad(ind), inside, d, box_lo);
      *in_box = in_box->empty() ? inside : *in_box + " && " + inside;
      uses_error_ = true;
      // Checked in 64 bits, then a coordinate in the buffer's box, of the coordinates' type: a
      // 64-bit term would make a 32-bit kernel's whole offset 64-bit arithmetic again.
      idx = fmt::format("static_cast<{}>({})", dialect_.index_type, d);
    }
    flat += dims[a] == unit ? fmt::format(" + {}", idx) : fmt::format(" + {} * {}", idx, stride);
    if (!rows) continue;
    if (dims[a] == unit) {
      shift.insert(shift.begin(), {false, idx});
      continue;
    }
    row_has_terms = true;
    if (along_block || i->dynamic || i->base != var(dims[a])) {
      plain_row = false;
      continue;
    }
    row += fmt::format(" + {} * {}", i->base, stride);
    const std::int64_t n = i->offset;
    if (n != 0) shift.emplace_back(n < 0, n == 1 || n == -1 ? stride : fmt::format("{} * {}", n < 0 ? -n : n, stride));
  }
  if (!rows || !plain_row || !row_has_terms) return flat;
  const std::string key = "row#" + row;
  std::string base = lookup(key);
  if (base.empty()) {
    base = fresh("row");
    code += fmt::format("{}const {} {} = {};\n", pad(ind), dialect_.offset_type, base, row);
    memo_.back()[key] = base;
  }
  std::string sum;  // ` + x_K - s0_1`
  for (const auto& [negative, term] : shift) sum += fmt::format(" {} {}", negative ? '-' : '+', term);
  if (shift.size() <= 1) return base + sum;
  return fmt::format("{} + ({}{})", base, shift[0].first ? "-" : "", sum.substr(3));  // grouped: one row, one shift
}

// Branch-free reductions evaluate their operand at a stand-in for a missing neighbour: the
// row's first neighbour, which the call reaches. A row without any neighbour has none, and an
// element of no row the call reaches may lie outside everything the runtime checked (a field
// that covers only the edges reached, a table without rows), so the loads through it are guarded
// by the flag that the row has a neighbour ("reached:" + the index's local): such a value is
// never added, only nothing may be read for it. The guard of a point is the conjunction of its
// indices' flags (empty: every index is reached).
std::string PointEmitter::reached_at(const Point& p, std::string& code, int ind) {
  std::vector<std::string> flags;
  for (const Index& i : p)
    if (std::string f = lookup("reached:" + i.base); !f.empty() && std::find(flags.begin(), flags.end(), f) == flags.end())
      flags.push_back(std::move(f));
  if (flags.size() <= 1) return flags.empty() ? std::string() : flags[0];
  std::sort(flags.begin(), flags.end());
  std::string all;
  for (const auto& f : flags) all += (all.empty() ? "" : " && ") + f;
  const std::string key = "reached all:" + all;
  if (std::string v = lookup(key); !v.empty()) return v;
  const std::string v = fresh("reached");
  code += fmt::format("{}const bool {} = {};\n", pad(ind), v, all);
  memo_.back()[key] = v;
  return v;
}

// `load` where `reached` holds, else `otherwise`, without reading; remembered so that a copy
// of the loop where every row is full can read unguarded (unguarded()).
std::string PointEmitter::guarded(const std::string& reached, const std::string& load, const std::string& otherwise) {
  if (reached.empty()) return load;
  std::string g = fmt::format("{} ? {} : {}", reached, load, otherwise);
  guarded_loads_.emplace_back(g, load);
  return g;
}

std::string PointEmitter::unguarded(std::string body) const {
  for (const auto& [g, load] : guarded_loads_) {
    const std::string from = " = " + g + ";", to = " = " + load + ";";
    for (std::size_t at = body.find(from); at != std::string::npos; at = body.find(from, at + to.size()))
      body.replace(at, from.size(), to);
  }
  return body;
}

std::string PointEmitter::fresh(const char* prefix) { return fmt::format("{}{}", prefix, counter_++); }

std::string PointEmitter::lookup(const std::string& key) const {
  for (auto it = memo_.rbegin(); it != memo_.rend(); ++it)
    if (auto f = it->find(key); f != it->end()) return f->second;
  return {};
}

// Returns a C++ expression (a local or a literal) for component `comp` of e at point p.
std::string PointEmitter::gen(const Expr& e, const Point& p, int comp, std::string& code, int ind) {
  // Before the memo: a read reused from an earlier reduction still masks this one.
  if (e.kind == ExprKind::field_ref) mask_sparse_read(e.name, p, code, ind);
  const std::string key = fmt::format("{}#{}@{}", static_cast<const void*>(&e), comp, point_key(p));
  if (std::string v = lookup(key); !v.empty()) return v;
  std::string v = gen_uncached(e, p, comp, code, ind);
  memo_.back()[key] = v;
  return v;
}

std::string PointEmitter::define(DType t, const std::string& expr, std::string& code, int ind) {
  const std::string v = fresh("v");
  code += fmt::format("{}const {} {} = {};\n", pad(ind), ctype(t), v, expr);
  return v;
}

std::string PointEmitter::gen_uncached(const Expr& e, const Point& p, int comp, std::string& code, int ind) {
  const DType t = e.type.is_tuple() ? e.type.elements.at(comp).dtype : e.type.dtype;
  switch (e.kind) {
    case ExprKind::field_ref:
      if (auto r = registers_.find(e.name); r != registers_.end()) {
        bool loop_point = true;
        for (const Dimension& d : buffer_type(e.name).second) {
          const Index* i = find(p, d);
          loop_point = loop_point && i && i->offset == 0 && !i->dynamic && i->base == var(d);
        }
        FIELDFLOW_ASSERT(loop_point, "register value " + e.name + " read away from the loop point");
        return r->second;
      }
    {
      std::string in_box;  // a read at a dynamic offset: only where it is inside the field
      const std::string zero = fmt::format("{}(0)", ctype(t));
      std::string load = fmt::format("{}[{}]", use_buffer(e.name, false), element(e.name, p, code, ind, true, &in_box));
      if (!in_box.empty()) load = fmt::format("({} ? {} : {})", in_box, load, zero);
      return define(t, guarded(reached_at(p, code, ind), load, zero), code, ind);
    }
    case ExprKind::scalar_ref: return use_scalar(e.name);
    case ExprKind::literal: return literal(e.literal, dialect_);
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
          // Wraps like the reference's index: a huge int64 offset is then refused, never undefined.
          i.base = fmt::format("fieldflow::abi::ff_iadd<std::int64_t>({}, {})", i.str(), off);
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
    case ExprKind::carry: return carry(static_cast<int>(e.offset));
    case ExprKind::scan: FIELDFLOW_UNREACHABLE("scan inside a kernel value (select_transients missed it)");
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
  FIELDFLOW_UNREACHABLE("unknown expression kind");
}

// A sparse field read inside a reduction over its local dimension, at another element than the
// reduction's own (s(E2C[0]) reduced over C2E): its slot is masked by the table row of the
// element it is read at, as the reduction's own row masks any other operand. The slot index is
// the innermost reduction's over that local dimension (it shadows the outer ones), so only that
// reduction is masked: an outer one over the same neighbours must not lose its whole neighbour
// because the inner one skips a slot.
void PointEmitter::mask_sparse_read(const std::string& name, const Point& p, std::string& code, int ind) {
  auto dims = buffer_type(name).second;
  for (std::size_t r = reducing_.size(); r-- > 0;) {
    const Connectivity& c = reducing_conn_[r];
    const auto local = std::find(dims.begin(), dims.end(), c.local);
    if (local == dims.end()) continue;
    dims.erase(local);  // outer reductions over this local dimension are shadowed
    const Index* src = find(p, c.source);
    const Index* slot = find(p, c.local);
    if (!src || !slot || src->str() == reduce_src_[r]) continue;  // the reduction's own row: checked there
    const std::string t = use_table(c);
    const std::string reached = lookup("reached:" + src->str());
    const std::string present = fmt::format(
        "({}{} >= 0)", reached.empty() ? "" : reached + " && ",
        table_entry(t, fmt::format("std::int64_t({1}) * {0}_rs + std::int64_t({2}) * {0}_ns", t, src->str(), slot->str())));
    if (reduce_ok_[r].empty()) code += fmt::format("{}if (!{}) continue;  // a skipped slot of {}\n", pad(ind), present, name);
    else code += fmt::format("{0}{1} = {1} && {2};  // a skipped slot of {3}\n", pad(ind), reduce_ok_[r], present, name);
  }
}

std::string PointEmitter::reduce(const Expr& e, const Point& p, std::string& code, int ind) {
  const DType t = e.type.dtype;
  const Index* src = find(p, e.conn.source);  // absent when the operand shifts elsewhere first
  const std::string acc = fresh("acc");
  const std::string init = e.rop == ir::ReduceOp::sum   ? fmt::format("{}(0)", ctype(t))
                           : e.rop == ir::ReduceOp::max ? fmt::format("{}<{}>::lowest()", dialect_.limits, ctype(t))
                                                        : fmt::format("{}<{}>::max()", dialect_.limits, ctype(t));
  // Branch-free form: a missing neighbour reads the row's first neighbour instead (present_in_row)
  // and its value is not added, so the fixed-length, fully unrolled neighbour loop vectorises along
  // the unit-stride loop around it. Not when the operand has data-dependent offsets: their bounds
  // check would see the stand-in's data (element 0 in a row without neighbours).
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
        code += fmt::format("{}bool {} = {};\n", pad(body_ind), ok, in_bounds_neighbor(e.conn, src->str(), n, nb, code, body_ind));
      } else {
        code += fmt::format("{}if (!{}) continue;  // missing neighbours do not contribute\n", pad(body_ind), present_test(nb));
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
      case ir::ReduceOp::sum: next = arithmetic(ir::BinaryOp::add, t, acc, x); break;
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

std::string PointEmitter::unary(const Expr& e, const std::string& a) const {
  const DType t = e.args[0]->type.dtype;
  const bool fl = is_floating(t);
  switch (e.uop) {
    case ir::UnaryOp::neg: return fl ? fmt::format("(-{})", a) : fmt::format("fieldflow::abi::ff_neg({})", a);
    case ir::UnaryOp::logical_not: return fmt::format("(!{})", a);
    case ir::UnaryOp::abs: return fl ? fmt::format("{}abs({})", dialect_.math, a) : fmt::format("fieldflow::abi::ff_iabs({})", a);
    case ir::UnaryOp::isnan:
    case ir::UnaryOp::isinf:
    case ir::UnaryOp::isfinite: return fmt::format("static_cast<bool>({}{}({}))", dialect_.math, to_string(e.uop), a);
    // Exactly rounded in IEEE arithmetic: folding or vectorising them cannot change a bit.
    case ir::UnaryOp::sqrt:
    case ir::UnaryOp::floor:
    case ir::UnaryOp::ceil:
    case ir::UnaryOp::trunc: return fmt::format("{}{}({})", dialect_.math, to_string(e.uop), a);
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
  return fmt::format("{}{}(fieldflow::abi::ff_libm_arg({}))", dialect_.math, name, a);
}

// + - * of two values of dtype t (also a reduction's sum): integers wrap (fieldflow/abi.h).
std::string PointEmitter::arithmetic(ir::BinaryOp op, DType t, const std::string& a, const std::string& b) {
  if (is_floating(t)) return fmt::format("static_cast<{}>({} {} {})", ctype(t), a, ir::to_string(op), b);
  const char* name = op == ir::BinaryOp::add ? "ff_iadd" : op == ir::BinaryOp::sub ? "ff_isub" : "ff_imul";
  return fmt::format("fieldflow::abi::{}({}, {})", name, a, b);
}

std::string PointEmitter::binary(const Expr& e, const std::string& a, const std::string& b) const {
  const DType t = e.args[0]->type.dtype;
  const std::string ct = ctype(t);
  switch (e.bop) {
    case ir::BinaryOp::add:
    case ir::BinaryOp::sub:
    case ir::BinaryOp::mul: return arithmetic(e.bop, t, a, b);
    case ir::BinaryOp::div:
      return is_floating(t) ? fmt::format("({} / {})", a, b) : fmt::format("fieldflow::abi::ff_div({}, {})", a, b);
    case ir::BinaryOp::logical_and: return fmt::format("({} && {})", a, b);
    case ir::BinaryOp::logical_or: return fmt::format("({} || {})", a, b);
    case ir::BinaryOp::minimum: return fmt::format("fieldflow::abi::ff_min({}, {})", a, b);
    case ir::BinaryOp::maximum: return fmt::format("fieldflow::abi::ff_max({}, {})", a, b);
    case ir::BinaryOp::fmod: return fmt::format("{}fmod({}, {})", dialect_.math, a, b);
    case ir::BinaryOp::power:
      return is_floating(t) ? fmt::format("fieldflow::abi::ff_pow({}, {})", a, b)
                            : fmt::format("fieldflow::abi::ff_ipow({}, {})", a, b);
    case ir::BinaryOp::floor_divide: return fmt::format("fieldflow::abi::ff_floordiv({}, {})", a, b);
    case ir::BinaryOp::mod: return fmt::format("fieldflow::abi::ff_mod({}, {})", a, b);
    case ir::BinaryOp::logical_xor: return fmt::format("({} != {})", a, b);
    default: return fmt::format("({} {} {})", a, to_string(e.bop), b);
  }
}

Point PointEmitter::loop_point() const {
  Point p;
  for (const auto& d : loop_dims_) p.push_back({d, var(d), 0, false});
  return p;
}

// Loop order, slowest first: the unit-stride dimension of the layout innermost. Layout::any
// loops like horizontal_fastest (Fortran's column-major arrays, the common generic case).
std::vector<Dimension> PointEmitter::loop_order() const {
  std::vector<Dimension> order = loop_dims_;
  if (s_.layout != Layout::vertical_fastest) std::reverse(order.begin(), order.end());
  return order;
}

void PointEmitter::store_all(const std::vector<std::string>& values, const Point& p, std::string& code, int ind) {
  for (std::size_t c = 0; c < k_.outputs.size(); ++c) {
    if (in_registers(k_.outputs[c])) continue;  // its fused consumer reads the value itself
    const std::string b = use_buffer(k_.outputs[c], true);
    code += fmt::format("{}{}[{}] = {};\n", pad(ind), b, element(k_.outputs[c], p, code, ind), values[c]);
  }
}

void PointEmitter::store_value(const Point& p, std::string& code, int ind) {
  std::vector<std::string> values;
  const int nout = static_cast<int>(k_.outputs.size());
  for (int c = 0; c < nout; ++c) values.push_back(gen(*k_.value, p, nout > 1 ? c : -1, code, ind));
  store_all(values, p, code, ind);
}

namespace {
std::string neighbor_key(const Connectivity& c, const std::string& src, const std::string& slot) {
  return fmt::format("nb:{}[{}]({})", c.name, slot, src);
}
}  // namespace

std::string PointEmitter::neighbor(const Connectivity& c, const std::string& src, const std::string& slot, Missing missing,
                     std::string& code, int ind) {
  const std::string key = neighbor_key(c, src, slot);
  std::string v = lookup(key);
  if (v.empty()) {
    const std::string t = use_table(c);
    v = fresh("nb");
    // A row of an element that may not be reached is read only where it is (-1 elsewhere: no
    // neighbour, so nothing is read through it either).
    const std::string reached = lookup("reached:" + src);
    code += fmt::format("{}const std::int32_t {} = {};\n", pad(ind), v,
                        guarded(reached, table_entry(t, fmt::format("std::int64_t({1}) * {0}_rs + std::int64_t({2}) * {0}_ns", t, src, slot)), "-1"));
    memo_.back()[key] = v;
    if (!reached.empty()) memo_.back()["reached:" + v] = reached;
  }
  // Fixed-index shifts (Missing::error) need no check here: the runtime has checked every table
  // row they read for skip values before the call (CompiledProgram::Impl::check_reads).
  if (missing == Missing::skip) {
    // A local field read through another element's row (f(V2E)(E2V[0])): its missing
    // neighbours are skipped by the reduction whose loop this code is in. Checked for this
    // reduction even when the entry was looked up for another one.
    std::string ok;
    for (std::size_t r = reducing_.size(); r-- > 0;)
      if (reducing_[r] == c.local) {
        ok = reduce_ok_[r];
        break;
      }
    if (ok.empty()) {
      code += fmt::format("{}if (!{}) continue;\n", pad(ind), present_test(v));
    } else {
      const std::string present = in_bounds_neighbor(c, src, slot, v, code, ind);
      code += fmt::format("{0}{1} = {1} && {2};\n", pad(ind), ok, present);
      v = lookup(key);
    }
  }
  return v;
}

// Whether table entry `nb` names a neighbour: `nb >= 0`, or, for an entry branch-free code has
// replaced by a stand-in, the flag kept when it was (in_bounds_neighbor).
std::string PointEmitter::present_test(const std::string& nb) const {
  const std::string flag = lookup("present:" + nb);
  return flag.empty() ? fmt::format("({} >= 0)", nb) : flag;
}

// Branch-free code reads every slot, so a missing neighbour's -1 is replaced before any load by a
// neighbour the row does have (present_in_row): a new variable that replaces the entry in this
// scope's memo (the entry itself, perhaps looked up in an enclosing scope where code tests it for
// -1, is never changed), with a flag saying whether the neighbour exists. Returns the flag.
std::string PointEmitter::in_bounds_neighbor(const Connectivity& c, const std::string& src, const std::string& slot,
                                             const std::string& nb, std::string& code, int ind) {
  if (std::string flag = lookup("present:" + nb); !flag.empty()) return flag;  // nb is already the safe one
  const std::string stand_in = present_in_row(c, src, code, ind);
  const std::string present = fresh("present"), safe = fresh("nb");
  // Selects, not branches: the loop around must stay free of control flow to vectorise.
  code += fmt::format("{0}const bool {1} = {2} >= 0;  // missing neighbours do not contribute\n"
                      "{0}const std::int32_t {3} = {1} ? {2} : {4};\n", pad(ind), present, nb, safe, stand_in);
  memo_.back()[neighbor_key(c, src, slot)] = safe;
  memo_.back()["present:" + safe] = present;
  // The stand-in is reached only if the row has a neighbour (then src is reached too: the
  // entries of a row not reached are -1).
  memo_.back()["reached:" + safe] = lookup("row present:" + neighbor_key(c, src, "*"));
  return present;
}

// The first neighbour row `src` of `c` has: what branch-free code reads in place of a missing one.
// It is an element the call reaches through this row, so everything read there was checked before
// the call; element 0 (what it read before) may be outside a field that covers only what is
// reached, or a row of a chained table without the neighbours read through it. A row without any
// neighbour has no such element: its flag ("row present:") guards every load through the stand-in
// (reached_at), which is then 0 only as a value, never read at.
std::string PointEmitter::present_in_row(const Connectivity& c, const std::string& src, std::string& code, int ind) {
  const std::string key = "first present:" + neighbor_key(c, src, "*");
  if (std::string v = lookup(key); !v.empty()) return v;
  std::vector<std::string> entries;  // looked up in slot order
  for (int slot = 0; slot < c.max_neighbors; ++slot)
    entries.push_back(neighbor(c, src, std::to_string(slot), Missing::unchecked, code, ind));
  std::string choice = "0", any;
  for (auto nb = entries.rbegin(); nb != entries.rend(); ++nb) {
    choice = fmt::format("{0} >= 0 ? {0} : {1}", *nb, choice);
    any = fmt::format("{} >= 0{}{}", *nb, any.empty() ? "" : " || ", any);
  }
  const std::string v = fresh("nb"), row = fresh("row_present");
  code += fmt::format("{}const std::int32_t {} = {};  // the first neighbour present\n", pad(ind), v, choice);
  code += fmt::format("{}const bool {} = {};  // else nothing of this row is reached\n", pad(ind), row, any);
  memo_.back()[key] = v;
  memo_.back()["row present:" + neighbor_key(c, src, "*")] = row;
  return v;
}

}  // namespace fieldflow::codegen
