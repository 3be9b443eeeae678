#include "ir/positions.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdint>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "fieldflow/errors.h"

namespace fieldflow::ir {

const Coord* Position::find(const Dimension& d) const {
  for (const auto& c : coords)
    if (c.dim == d) return &c;
  return nullptr;
}

namespace {

// Keys are built for every (node, position) a pass visits, so by appending, not fmt::format
// (which took a quarter of a warm load's instructions); the text is the same as "{}", "{:+d}".
void append_integer(std::string& s, std::int64_t v, bool plus = false) {
  char digits[24];
  if (plus && v >= 0) s += '+';
  s.append(digits, std::to_chars(digits, digits + sizeof digits, v).ptr);
}

void append_pointer(std::string& s, const void* p) {
  char digits[24];
  s += "0x";
  s.append(digits, std::to_chars(digits, digits + sizeof digits, reinterpret_cast<std::uintptr_t>(p), 16).ptr);
}

// s += p.key()
void append_key(std::string& s, const Position& p) {
  for (const auto& c : p.coords) {
    s += c.dim.name;
    if (c.kind != DimAccess::Kind::loop) {
      s += "=<";
      s += c.via;
      s += '>';
    }
    if (c.kind != DimAccess::Kind::local) append_integer(s, c.offset, /*plus=*/true);
    for (const auto& [ci, outcome] : c.value_constraints) {
      s += '?';
      append_integer(s, ci);
      s += outcome ? 't' : 'f';
    }
    s += ';';
  }
}

}  // namespace

std::string Position::key() const {
  std::string s;
  append_key(s, *this);
  return s;
}

Position loop_position(const std::vector<Dimension>& loop_dims) {
  Position p;
  for (const auto& d : loop_dims) p.coords.push_back({d, DimAccess::Kind::loop, 0, "", 0, {}, {}, 0, {}});
  return p;
}

namespace {

class Walker {
 public:
  Walker(std::vector<Condition>& conditions, const PositionVisitor& visit) : conditions_(conditions), visit_(visit) {}

  void walk(const Expr& e, const Position& p, int component) {
    std::string key;
    append_pointer(key, &e);
    key += '|';
    append_integer(key, component);
    key += '|';
    append_key(key, p);
    key += '|';
    for (const auto& [ci, o] : p.constraints) {
      append_integer(key, ci);
      key += o ? "t;" : "f;";
    }
    if (!seen_.insert(std::move(key)).second) return;
    if (!visit_(e, p, component)) return;
    switch (e.kind) {
      case ExprKind::shift: {
        Position q = p;
        Coord* c = mutable_coord(q, e.dim);
        c->offset += e.offset;
        walk(*e.args[0], q, component);
        return;
      }
      case ExprKind::dynamic_shift: {
        walk(*e.args[1], p, -1);
        Position q = p;
        Coord* c = mutable_coord(q, e.dim);
        c->via = fmt::format("{}+{}@{}", c->via, static_cast<const void*>(e.args[1].get()), p.key());
        c->kind = DimAccess::Kind::dynamic;
        walk(*e.args[0], q, component);
        return;
      }
      case ExprKind::neighbor_shift: {
        Position q = p;
        const Coord* src = q.find(e.conn.source);
        FIELDFLOW_ASSERT(src, "neighbour shift at a position without its source dimension");
        std::string slot = fmt::format("{}", e.offset);
        if (e.offset < 0) {
          const Coord* local = q.find(e.conn.local);
          FIELDFLOW_ASSERT(local, "local neighbour shift outside a reduction over its connectivity");
          slot = local->via;
        }
        Coord nb{e.conn.target, DimAccess::Kind::table, 0,
                 fmt::format("{}[{}]({})", e.conn.name, slot, Position{{*src}, {}}.key()), 0, {}, {}, 0, {}};
        // The rows this table is read at are known from the loop box when the source index is a
        // loop index, or itself found that way (chained shifts); the call checks exactly those.
        const TableHop hop{e.conn.name, e.offset >= 0 ? static_cast<int>(e.offset) : -1};
        if (src->kind == DimAccess::Kind::loop) {
          nb.hops = {hop};
          nb.root = src->dim;
          nb.root_offset = src->offset;
        } else if (src->kind == DimAccess::Kind::table && !src->hops.empty() && src->offset == 0) {
          nb.hops = src->hops;
          nb.hops.push_back(hop);
          nb.root = src->root;
          nb.root_offset = src->root_offset;
        }
        std::erase_if(q.coords, [&](const Coord& c) {
          return c.dim == e.conn.source || (e.offset < 0 && c.dim == e.conn.local);
        });
        q.coords.push_back(nb);
        walk(*e.args[0], q, component);
        return;
      }
      case ExprKind::reduce: {
        // A reduction inside an operand of another over the same connectivity has its own slot:
        // its operand's local dimension is the inner slot (the outer one is not visible there).
        Position q = p;
        std::erase_if(q.coords, [&](const Coord& c) { return c.dim == e.conn.local; });
        q.coords.push_back({e.conn.local, DimAccess::Kind::local, 0,
                            fmt::format("slot{}@{}", static_cast<const void*>(&e), p.key()), e.conn.max_neighbors, {}, {},
                            0, {}});
        walk(*e.args[0], q, -1);
        return;
      }
      case ExprKind::concat_where: {
        const Coord* c = p.find(e.dim);
        Position a = p, b = p;
        if (c && c->kind == DimAccess::Kind::loop) {
          // The condition at a shifted point is the same condition on the loop index, moved.
          const int ci = add_condition({e.dim, e.cmp, e.bound - SymExpr(c->offset)});
          a.constraints.push_back({ci, true});
          b.constraints.push_back({ci, false});
        } else if (c && c->kind == DimAccess::Kind::table) {
          // At a neighbour: a condition on the index looked up from the table (the same move).
          const int ci = add_condition({e.dim, e.cmp, e.bound - SymExpr(c->offset)});
          mutable_coord(a, e.dim)->value_constraints.push_back({ci, true});
          mutable_coord(b, e.dim)->value_constraints.push_back({ci, false});
        }
        walk(*e.args[0], a, component);
        walk(*e.args[1], b, component);
        return;
      }
      case ExprKind::where:
        walk(*e.args[0], p, -1);
        walk(*e.args[1], p, component);
        walk(*e.args[2], p, component);
        return;
      case ExprKind::make_tuple:
        if (component >= 0) walk(*e.args[component], p, -1);
        else for (const auto& a : e.args) walk(*a, p, -1);
        return;
      case ExprKind::tuple_get: walk(*e.args[0], p, static_cast<int>(e.offset)); return;
      case ExprKind::scan:
        for (const auto& a : e.args) walk(*a, p, -1);
        return;
      case ExprKind::named:
      case ExprKind::broadcast: walk(*e.args[0], p, component); return;
      case ExprKind::local_slot: {
        // A constant slot: only that slot is read, so a sparse field needs to cover only it (as
        // in the reference; fuzzer seed 66, docs/reliability.md class 20).
        Position q = p;
        std::erase_if(q.coords, [&](const Coord& c) { return c.dim == e.conn.local; });
        q.coords.push_back({e.conn.local, DimAccess::Kind::local, e.offset, fmt::format("#{}", e.offset), 1, {}, {}, 0, {}});
        walk(*e.args[0], q, component);
        return;
      }
      default:
        for (const auto& a : e.args) walk(*a, p, -1);
        return;
    }
  }

 private:
  static Coord* mutable_coord(Position& p, const Dimension& d) {
    for (auto& c : p.coords)
      if (c.dim == d) return &c;
    FIELDFLOW_UNREACHABLE("shift along " + d.name + " at a position without it");
  }

  int add_condition(const Condition& c) {
    for (std::size_t i = 0; i < conditions_.size(); ++i)
      if (conditions_[i] == c) return static_cast<int>(i);
    conditions_.push_back(c);
    return static_cast<int>(conditions_.size()) - 1;
  }

  std::vector<Condition>& conditions_;
  const PositionVisitor& visit_;
  std::unordered_set<std::string> seen_;
};

}  // namespace

void walk_positions(const ExprPtr& root, const Position& start, std::vector<Condition>& conditions,
                    const PositionVisitor& visit) {
  Walker w(conditions, visit);
  w.walk(*root, start, root->type.is_tuple() ? -2 : -1);
}

ExprPtr replace_node(const ExprPtr& root, const Expr* target, const ExprPtr& replacement) {
  return replace_nodes(root, {{target, replacement}});
}

ExprPtr replace_nodes(const ExprPtr& root, const std::unordered_map<const Expr*, ExprPtr>& replacements) {
  std::unordered_map<const Expr*, ExprPtr> done;
  std::function<ExprPtr(const ExprPtr&)> rebuild = [&](const ExprPtr& e) -> ExprPtr {
    if (auto r = replacements.find(e.get()); r != replacements.end()) return r->second;
    auto it = done.find(e.get());
    if (it != done.end()) return it->second;
    bool changed = false;
    std::vector<ExprPtr> args;
    for (const auto& a : e->args) {
      args.push_back(rebuild(a));
      changed |= args.back() != a;
    }
    ExprPtr out = e;
    if (changed) {
      if (e->kind == ExprKind::tuple_get && args[0]->kind == ExprKind::make_tuple) {
        out = args[0]->args[e->offset];
      } else {
        auto copy = std::make_shared<Expr>(*e);
        copy->args = std::move(args);
        out = copy;
      }
    }
    done[e.get()] = out;
    return out;
  };
  return rebuild(root);
}

ExprPtr buffer_ref(const std::string& name, DType dtype, std::vector<Dimension> dims) {
  auto e = std::make_shared<Expr>();
  e->kind = ExprKind::field_ref;
  e->type = Type{dtype, canonical_dims(std::move(dims)), {}};
  e->name = name;
  return e;
}

}  // namespace fieldflow::ir
