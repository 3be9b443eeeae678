// The reference executor: pull-style, point-by-point evaluation of the IR.
// eval(e, p) is the value of expression e at the index point p; a shift evaluates its operand at
// a moved point, a reduction sums its operand over the local index, a scan sweeps a column once
// and caches it. Outputs are computed into copies and committed only when the call succeeds.
#include <fmt/format.h>
#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>

#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"
#include "ir/call_binding.h"
#include "reference/value.h"

namespace fieldflow {

namespace {

using ir::Expr;
using ir::ExprKind;
using reference::dispatch;
using reference::scalar_as;

// An index point: one slot per dimension the program mentions (as many as it has: ICON programs
// touch several locations and many local dimensions); unset slots are not part of it.
struct Point {
  std::vector<std::int64_t> index;
  std::vector<char> set;
};

// Every dimension the program mentions, each once: the slots of its points.
std::vector<Dimension> program_dims(const ir::Program& p) {
  std::vector<Dimension> dims;
  auto add = [&](const Dimension& d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) dims.push_back(d);
  };
  auto add_type = [&](const ir::Type& t, auto& self) -> void {
    for (const auto& d : t.dims) add(d);
    for (const auto& el : t.elements) self(el, self);
  };
  for (const auto& prm : p.params) {
    add_type(prm.type, add_type);
    if (prm.kind == ir::ParamKind::connectivity)
      for (const auto& d : {prm.conn.source, prm.conn.target, prm.conn.local}) add(d);
  }
  for (const auto& st : p.stmts) {
    for (const auto& r : st.domain) add(r.dim);
    for (const Expr* e : ir::post_order(st.expr)) {
      add_type(e->type, add_type);
      if (e->kind == ExprKind::neighbor_shift || e->kind == ExprKind::reduce || e->kind == ExprKind::local_slot)
        for (const auto& d : {e->conn.source, e->conn.target, e->conn.local}) add(d);
      if (e->kind == ExprKind::index || e->kind == ExprKind::concat_where || e->kind == ExprKind::shift ||
          e->kind == ExprKind::dynamic_shift || e->kind == ExprKind::scan)
        add(e->dim);
    }
  }
  return dims;
}

class Interpreter {
 public:
  Interpreter(const ir::Program& p, const ir::BoundCall& call, std::vector<Field*> work)
      : p_(p), call_(call), work_(std::move(work)), slots_(program_dims(p)) {}

  void run_stmt(const ir::Stmt& st) {
    stmt_ = &st;
    ranges_ = ir::evaluate_domain(st.domain, call_.sizes);
    scan_cache_.clear();
    const int n_out = static_cast<int>(st.outputs.size());
    std::vector<Field*> outs;
    for (const auto& o : st.outputs) outs.push_back(work_[p_.index_of(o)]);
    // Compute every value first, then write: an output that is also read (in/out) is never
    // observed half-updated.
    std::vector<std::pair<std::vector<std::int64_t>, std::vector<Scalar>>> results;
    Point pt{std::vector<std::int64_t>(slots_.size()), std::vector<char>(slots_.size())};
    std::vector<std::int64_t> idx(ranges_.size());
    for (const auto& r : ranges_)
      if (r.hi <= r.lo) return;  // empty domain
    for (std::size_t i = 0; i < ranges_.size(); ++i) idx[i] = ranges_[i].lo;
    while (true) {
      for (std::size_t i = 0; i < ranges_.size(); ++i) {
        const int s = slot(ranges_[i].dim);
        pt.index[s] = idx[i];
        pt.set[s] = true;
      }
      std::vector<Scalar> vals;
      for (int c = 0; c < n_out; ++c) vals.push_back(eval(*st.expr, pt, n_out > 1 ? c : -1));
      results.emplace_back(idx, std::move(vals));
      std::size_t d = ranges_.size();
      while (d > 0) {
        --d;
        if (++idx[d] < ranges_[d].hi) break;
        idx[d] = ranges_[d].lo;
        if (d == 0) goto done;
      }
      if (ranges_.empty()) break;
    }
  done:
    for (const auto& [index, vals] : results) {
      for (int c = 0; c < n_out; ++c) {
        Field& f = *outs[c];
        std::vector<std::int64_t> fidx(f.dims().size());
        for (std::size_t a = 0; a < f.dims().size(); ++a)
          for (std::size_t i = 0; i < ranges_.size(); ++i)
            if (ranges_[i].dim == f.dims()[a]) fidx[a] = index[i];
        store(f, f.offset_of(fidx), vals[c]);
      }
    }
  }

 private:
  int slot(const Dimension& d) {
    for (int i = 0; i < static_cast<int>(slots_.size()); ++i)
      if (slots_[i] == d) return i;
    FIELDFLOW_UNREACHABLE("dimension " + d.name + " is not mentioned by the program");
  }

  std::string where() const { return fmt::format("program '{}', call '{}'", p_.name, stmt_->op); }

  static void store(Field& f, std::int64_t off, const Scalar& v) {
    switch (f.dtype()) {
      case DType::boolean: static_cast<bool*>(f.data())[off] = scalar_as<bool>(v); break;
      case DType::int32: static_cast<std::int32_t*>(f.data())[off] = scalar_as<std::int32_t>(v); break;
      case DType::int64: static_cast<std::int64_t*>(f.data())[off] = scalar_as<std::int64_t>(v); break;
      case DType::float32: static_cast<float*>(f.data())[off] = scalar_as<float>(v); break;
      case DType::float64: static_cast<double*>(f.data())[off] = scalar_as<double>(v); break;
    }
  }

  static Scalar load(const Field& f, std::int64_t off) {
    switch (f.dtype()) {
      case DType::boolean: return Scalar(static_cast<const bool*>(f.data())[off]);
      case DType::int32: return Scalar(static_cast<const std::int32_t*>(f.data())[off]);
      case DType::int64: return Scalar(static_cast<const std::int64_t*>(f.data())[off]);
      case DType::float32: return Scalar(static_cast<const float*>(f.data())[off]);
      case DType::float64: return Scalar(static_cast<const double*>(f.data())[off]);
    }
    return {};
  }

  Scalar read_field(const Expr& e, const Point& pt) {
    const Field& f = *work_[p_.index_of(e.name)];
    // A sparse field read inside a reduction over its local dimension: its slot is skipped where
    // the table row of the element it is read at (not necessarily the reduction's own, as in
    // s(E2C[0]) reduced over C2E) has no neighbour.
    for (std::size_t r = reducing_.size(); r-- > 0;) {
      const Connectivity& c = reducing_conn_[r];
      if (f.axis_of(c.local) < 0 || f.axis_of(c.source) < 0) continue;
      if (neighbor_of(c, pt, pt.index[slot(c.local)]) < 0) throw SkipNeighbor{c.local};
      break;
    }
    std::int64_t off = 0;
    for (std::size_t a = 0; a < f.dims().size(); ++a) {
      const int s = slot(f.dims()[a]);
      FIELDFLOW_ASSERT(pt.set[s], fmt::format("point lacks dimension {} of field {}", f.dims()[a].name, e.name));
      // Compared before subtracting: a dynamic index far outside (even near INT64_MIN) is refused.
      const bool inside = pt.index[s] >= f.origin()[a] && pt.index[s] - f.origin()[a] < f.shape()[a];
      const std::int64_t rel = inside ? pt.index[s] - f.origin()[a] : 0;
      if (!inside)
        throw DomainError(fmt::format("{}: reads field '{}' at {}={}, outside its extent [{}, {}); the field must "
                                      "cover every point the call reads (domain plus shifts)", where(), e.name,
                                      f.dims()[a].name, pt.index[s], f.origin()[a], f.origin()[a] + f.shape()[a]));
      off += rel * f.strides()[a];
    }
    return load(f, off);
  }

  const NeighborTable& table(const Connectivity& c) { return *call_.tables[p_.index_of(c.name)]; }

  // The neighbour `n` of the point's source element, or -1; checks the source index is in the table.
  std::int32_t neighbor_of(const Connectivity& c, const Point& pt, std::int64_t n) {
    const NeighborTable& t = table(c);
    const int s = slot(c.source);
    FIELDFLOW_ASSERT(pt.set[s], "neighbour shift without its source dimension");
    const std::int64_t src = pt.index[s];
    if (src < 0 || src >= t.n_source)
      throw DomainError(fmt::format("{}: reads connectivity '{}' at {}={}, outside its table [0, {})", where(),
                                    c.name, c.source.name, src, t.n_source));
    return t(src, static_cast<int>(n));
  }

  Scalar eval(const Expr& e, const Point& pt, int component = -1) {
    switch (e.kind) {
      case ExprKind::field_ref: return read_field(e, pt);
      case ExprKind::scalar_ref: return call_.scalars[p_.index_of(e.name)];
      case ExprKind::literal: return e.literal;
      case ExprKind::index: {
        const int s = slot(e.dim);
        FIELDFLOW_ASSERT(pt.set[s], "index() outside its dimension");
        return Scalar(static_cast<std::int32_t>(pt.index[s]));
      }
      case ExprKind::unary: {
        const Scalar x = eval(*e.args[0], pt);
        return dispatch(e.args[0]->type.dtype, [&]<class T>() { return reference::apply_unary<T>(e.uop, scalar_as<T>(x)); });
      }
      case ExprKind::binary: {
        const Scalar a = eval(*e.args[0], pt), b = eval(*e.args[1], pt);
        return dispatch(e.args[0]->type.dtype,
                        [&]<class T>() { return reference::apply_binary<T>(e.bop, scalar_as<T>(a), scalar_as<T>(b)); });
      }
      case ExprKind::where: {
        // Both branches are evaluated, as in compiled code: where is a pointwise select, so a
        // branch must be readable even where it is not chosen (concat_where is the lazy one).
        const bool c = eval(*e.args[0], pt).as_int() != 0;
        const Scalar a = eval(*e.args[1], pt, component), b = eval(*e.args[2], pt, component);
        return c ? a : b;
      }
      case ExprKind::concat_where: {
        const std::int64_t i = pt.index[slot(e.dim)], b = e.bound.evaluate(call_.sizes);
        bool c = false;
        switch (e.cmp) {
          case ir::CompareOp::less: c = i < b; break;
          case ir::CompareOp::less_equal: c = i <= b; break;
          case ir::CompareOp::greater: c = i > b; break;
          case ir::CompareOp::greater_equal: c = i >= b; break;
          case ir::CompareOp::equal: c = i == b; break;
          case ir::CompareOp::not_equal: c = i != b; break;
        }
        return eval(*e.args[c ? 0 : 1], pt, component);
      }
      case ExprKind::cast: return eval(*e.args[0], pt).cast(e.type.dtype);
      case ExprKind::broadcast:
      case ExprKind::named: return eval(*e.args[0], pt, component);
      case ExprKind::shift: {
        Point q = pt;
        q.index[slot(e.dim)] += e.offset;
        return eval(*e.args[0], q, component);
      }
      case ExprKind::dynamic_shift: {
        Point q = pt;
        // Wraps like the generated index (abi::ff_iadd): a huge offset is refused, never undefined.
        q.index[slot(e.dim)] = abi::ff_iadd(q.index[slot(e.dim)], eval(*e.args[1], pt).as_int());
        return eval(*e.args[0], q, component);
      }
      case ExprKind::neighbor_shift: {
        const std::int64_t n = e.offset >= 0 ? e.offset : pt.index[slot(e.conn.local)];
        const std::int32_t nb = neighbor_of(e.conn, pt, n);
        // A local field read inside a reduction over its own local dimension: the neighbour is
        // skipped (also when this shift is not at the reduction's source, as in f(V2E)(E2V[0])).
        if (nb < 0 && e.offset < 0 && std::find(reducing_.begin(), reducing_.end(), e.conn.local) != reducing_.end())
          throw SkipNeighbor{e.conn.local};
        if (nb < 0)
          throw DomainError(fmt::format("{}: reads through a missing neighbour: {}[{}] of {} {} is -1 (skipped); "
                                        "only reductions skip missing neighbours", where(), e.conn.name, n,
                                        e.conn.source.name, pt.index[slot(e.conn.source)]));
        Point q = pt;
        q.set[slot(e.conn.source)] = false;
        if (e.offset < 0) q.set[slot(e.conn.local)] = false;
        q.index[slot(e.conn.target)] = nb;
        q.set[slot(e.conn.target)] = true;
        return eval(*e.args[0], q, component);
      }
      case ExprKind::reduce: return eval_reduce(e, pt);
      case ExprKind::make_tuple: return eval(*e.args[component], pt);
      case ExprKind::tuple_get: return eval(*e.args[0], pt, static_cast<int>(e.offset));
      case ExprKind::scan: return eval_scan(e, pt, component);
      case ExprKind::scan_arg: return frame_->inputs[e.offset];
      case ExprKind::carry: return frame_->carry[e.offset];
      case ExprKind::local_slot: {
        // The slot is fixed here: an enclosing reduction over the same local dimension no longer
        // indexes (or masks) it.
        std::vector<Dimension> saved_dims = reducing_;
        std::vector<Connectivity> saved_conns = reducing_conn_;
        for (std::size_t r = reducing_.size(); r-- > 0;)
          if (reducing_[r] == e.conn.local) {
            reducing_.erase(reducing_.begin() + static_cast<std::ptrdiff_t>(r));
            reducing_conn_.erase(reducing_conn_.begin() + static_cast<std::ptrdiff_t>(r));
          }
        struct Restore {
          std::vector<Dimension>& d;
          std::vector<Connectivity>& c;
          std::vector<Dimension> sd;
          std::vector<Connectivity> sc;
          ~Restore() { d = std::move(sd); c = std::move(sc); }
        } restore{reducing_, reducing_conn_, std::move(saved_dims), std::move(saved_conns)};
        Point q = pt;
        q.index[slot(e.conn.local)] = e.offset;
        q.set[slot(e.conn.local)] = true;
        return eval(*e.args[0], q, component);
      }
    }
    FIELDFLOW_UNREACHABLE("unknown expression kind");
  }

  Scalar eval_reduce(const Expr& e, const Point& pt) {
    return dispatch(e.type.dtype, [&]<class T>() -> Scalar {
      T acc = e.rop == ir::ReduceOp::sum   ? T(0)
              : e.rop == ir::ReduceOp::max ? std::numeric_limits<T>::lowest()
                                           : std::numeric_limits<T>::max();
      Point q = pt;
      const int ls = slot(e.conn.local);
      const int ss = slot(e.conn.source);
      q.set[ls] = true;
      reducing_.push_back(e.conn.local);
      reducing_conn_.push_back(e.conn);
      struct Pop {
        std::vector<Dimension>& v;
        std::vector<Connectivity>& c;
        ~Pop() { v.pop_back(); c.pop_back(); }
      } pop{reducing_, reducing_conn_};
      for (int n = 0; n < e.conn.max_neighbors; ++n) {
        // Missing neighbours do not contribute. Where the point has the connectivity's source
        // element, its table row tells (this covers sparse fields too); a local field shifted
        // elsewhere first (f(V2E)(E2V[0])) reports its own missing neighbours (SkipNeighbor).
        if (pt.set[ss] && neighbor_of(e.conn, pt, n) < 0) continue;
        q.index[ls] = n;
        T v;
        try {
          v = scalar_as<T>(eval(*e.args[0], q));
        } catch (const SkipNeighbor& skip) {
          if (!(skip.local == e.conn.local)) throw;
          continue;
        }
        if (e.rop == ir::ReduceOp::sum) acc = scalar_as<T>(reference::apply_binary<T>(ir::BinaryOp::add, acc, v));  // ints wrap
        else if (e.rop == ir::ReduceOp::max) acc = acc < v ? v : acc;
        else acc = v < acc ? v : acc;
      }
      return Scalar(acc);
    });
  }

  struct Frame {
    std::vector<Scalar> inputs, carry;
  };
  struct SkipNeighbor {
    Dimension local;
  };

  Scalar eval_scan(const Expr& e, const Point& pt, int component) {
    const int ks = slot(e.dim);
    const ir::ConcreteRange* range = nullptr;
    for (const auto& r : ranges_)
      if (r.dim == e.dim) range = &r;
    FIELDFLOW_ASSERT(range, "scan dimension not in the call's domain");
    const std::int64_t k = pt.index[ks];
    if (k < range->lo || k >= range->hi)
      throw DomainError(fmt::format("{}: reads scan '{}' at {}={}, outside the swept range [{}, {})", where(), e.name,
                                    e.dim.name, k, range->lo, range->hi));
    // The column is identified by every other coordinate of the point.
    std::vector<std::int64_t> key{reinterpret_cast<std::intptr_t>(&e)};
    for (int s = 0; s < static_cast<int>(slots_.size()); ++s)
      if (s != ks) key.push_back(pt.set[s] ? pt.index[s] : std::numeric_limits<std::int64_t>::min());
    auto it = scan_cache_.find(key);
    if (it == scan_cache_.end()) {
      std::vector<std::vector<Scalar>> column(range->hi - range->lo);
      Frame frame{{}, e.init};
      Point q = pt;
      for (std::int64_t step = 0; step < range->hi - range->lo; ++step) {
        const std::int64_t kk = e.forward ? range->lo + step : range->hi - 1 - step;
        q.index[ks] = kk;
        frame.inputs.clear();
        for (const auto& a : e.args) frame.inputs.push_back(eval(*a, q));
        Frame* saved = frame_;
        frame_ = &frame;
        std::vector<Scalar> next;
        const int n = static_cast<int>(e.init.size());
        for (int c = 0; c < n; ++c) next.push_back(eval(*e.body, q, n > 1 ? c : -1));
        frame_ = saved;
        frame.carry = next;
        column[kk - range->lo] = std::move(next);
      }
      it = scan_cache_.emplace(std::move(key), std::move(column)).first;
    }
    return it->second[k - range->lo][component < 0 ? 0 : component];
  }

  const ir::Program& p_;
  const ir::BoundCall& call_;
  std::vector<Field*> work_;
  const ir::Stmt* stmt_ = nullptr;
  std::vector<ir::ConcreteRange> ranges_;
  std::vector<Dimension> slots_;
  Frame* frame_ = nullptr;
  std::vector<Dimension> reducing_;  // local dims of the reductions being evaluated, innermost last
  std::vector<Connectivity> reducing_conn_;  // their connectivities
  std::map<std::vector<std::int64_t>, std::vector<std::vector<Scalar>>> scan_cache_;
};

}  // namespace

void run_reference(const ir::Program& program, const Arguments& args) {
  ir::verify(program);
  const ir::BoundCall call = ir::bind_and_check_outputs(program, args);
  // Outputs are computed into copies; the originals change only after every statement succeeded.
  std::vector<Field*> work = call.fields;
  std::vector<Field> copies;
  std::vector<int> copied;
  copies.reserve(program.params.size());
  for (const auto& st : program.stmts)
    for (const auto& out : st.outputs) {
      const int i = program.index_of(out);
      if (std::find(copied.begin(), copied.end(), i) != copied.end()) continue;
      copies.push_back(call.fields[i]->clone());
      work[i] = &copies.back();
      copied.push_back(i);
    }
  Interpreter interp(program, call, work);
  for (const auto& st : program.stmts) interp.run_stmt(st);
  for (std::size_t c = 0; c < copied.size(); ++c)
    call.fields[copied[c]]->copy_values_from(copies[c]);  // element-wise: a view's padding stays the caller's
}

}  // namespace fieldflow
