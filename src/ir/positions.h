#pragma once
// Abstract evaluation positions: where, relative to a kernel's loop point, each node of a kernel
// value is evaluated. Shifts move a position, neighbour shifts replace a coordinate by one read
// from a table, reductions add a neighbour-slot coordinate, concat_where adds a condition on the
// branch taken. The passes use this to count recomputation (transient selection) and to summarise
// reads (extent inference); code generation follows the same rules when it emits the loads.
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/schedule.h"

namespace fieldflow::ir {

struct Coord {
  Dimension dim;
  DimAccess::Kind kind = DimAccess::Kind::loop;
  std::int64_t offset = 0;  // loop / table: added to the index; local: the first slot read
  std::string via;          // table / local / dynamic: how the index is obtained (identity)
  int extent = 0;           // local: number of neighbour slots read (all of them in a reduction)
  // table: how the index is found from the loop box (see DimAccess::hops); empty when it is not.
  std::vector<TableHop> hops;
  Dimension root;
  std::int64_t root_offset = 0;
  // table: the concat_where branches (condition index, outcome) the looked-up index is known to
  // be in (DimAccess::value_constraints); part of the position's identity.
  std::vector<std::pair<int, bool>> value_constraints;
};

struct Position {
  std::vector<Coord> coords;
  std::vector<std::pair<int, bool>> constraints;  // (condition index, outcome) of enclosing branches
  const Coord* find(const Dimension& d) const;
  std::string key() const;  // identity of the point (constraints excluded)
};

Position loop_position(const std::vector<Dimension>& loop_dims);

// Calls visit(node, position, component) for every distinct evaluation the value needs, parents
// before children; returning false skips the node's children. Scan nodes: only their inputs are
// walked (at the same position); their bodies are scalar code. `conditions` collects the
// concat_where conditions (deduplicated) that constraints refer to.
using PositionVisitor = std::function<bool(const Expr& e, const Position& p, int component)>;
void walk_positions(const ExprPtr& root, const Position& start, std::vector<Condition>& conditions,
                    const PositionVisitor& visit);

// Rebuilds `root` with every occurrence of `target` replaced by `replacement` (tuple elements of
// a replaced tuple are forwarded through tuple_get).
ExprPtr replace_node(const ExprPtr& root, const Expr* target, const ExprPtr& replacement);
// The same for several nodes at once. Replacements are not searched: a replacement that contains
// a target node (a field's new value computed from its old one) keeps it, where replacing one node
// after the other would substitute into the previous replacement.
ExprPtr replace_nodes(const ExprPtr& root, const std::unordered_map<const Expr*, ExprPtr>& replacements);

// A read of a schedule-level buffer (parameter or transient) as an expression.
ExprPtr buffer_ref(const std::string& name, DType dtype, std::vector<Dimension> dims);

}  // namespace fieldflow::ir
