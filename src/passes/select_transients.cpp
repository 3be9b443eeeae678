#include "passes/select_transients.h"

#include <fmt/format.h>
#include <algorithm>
#include <map>
#include <set>

#include "fieldflow/errors.h"
#include "ir/positions.h"

namespace fieldflow::passes {

namespace {

using ir::Expr;
using ir::ExprKind;

bool is_leaf(const Expr& e) {
  return e.kind == ExprKind::field_ref || e.kind == ExprKind::scalar_ref || e.kind == ExprKind::literal ||
         e.kind == ExprKind::index;
}

bool has_local_dim(const ir::Type& t) {
  for (const auto& d : t.dims)
    if (d.kind == DimKind::local) return true;
  return false;
}

// Operation count of evaluating e once at one point: every distinct node of its DAG (loads
// included; generated code computes a shared subexpression once per point), a reduction's
// operand once per neighbour slot.
double cost(const Expr& e, std::map<const Expr*, double>& memo) {
  if (auto it = memo.find(&e); it != memo.end()) return it->second;
  double c = 0;
  for (const Expr* x : ir::post_order(std::shared_ptr<const Expr>(std::shared_ptr<const Expr>{}, &e), false)) {
    c += 1;
    if (x->kind == ExprKind::reduce) c += (x->conn.max_neighbors - 1) * static_cast<double>(ir::post_order(x->args[0], false).size());
    if (x->kind == ExprKind::neighbor_shift) c += 2;
  }
  memo[&e] = c;
  return c;
}

// Whether `target` is among the nodes under `from` that are not under `around` (scan bodies,
// which read only carries and inputs, excluded).
bool reached_around(const Expr& from, const Expr& target, const Expr& around) {
  std::set<const Expr*> seen;
  std::vector<const Expr*> stack{&from};
  while (!stack.empty()) {
    const Expr* e = stack.back();
    stack.pop_back();
    if (e == &around || !seen.insert(e).second) continue;
    if (e == &target) return true;
    for (const auto& a : e->args) stack.push_back(a.get());
  }
  return false;
}

bool is_dynamic(const ir::Position& p) {
  for (const auto& c : p.coords)
    if (c.kind == ir::DimAccess::Kind::dynamic) return true;
  return false;
}

// The next node of kernel `k` to store as a transient, or nullptr.
//
// A value read at a dynamic offset is not stored: a transient holds the points of the kernel's
// loop box (plus static offsets), while a dynamic read may go anywhere the value's own inputs
// reach, which only the call's data decides. Such a value is computed where it is read, as the
// reference does (a `materialize` label there is a request the kernel cannot honour; labels never
// change a result). A scan has no pointwise form and is stored all the same.
const Expr* pick(const ir::Schedule& s, const ir::Kernel& k) {
  std::vector<const Expr*> forced;  // scans and materialize labels, in walk order
  std::set<const Expr*> read_dynamically;
  std::map<const Expr*, std::set<std::string>> positions;
  std::vector<ir::Condition> conditions;
  const Expr* root = k.value.get();
  ir::walk_positions(k.value, ir::loop_position(ir::kernel_loop_dims(s, k)), conditions,
                     [&](const Expr& e, const ir::Position& p, int) {
                       if (is_dynamic(p)) read_dynamically.insert(&e);
                       if (&e != root && (e.kind == ExprKind::scan || (e.kind == ExprKind::named && e.materialize)) &&
                           std::find(forced.begin(), forced.end(), &e) == forced.end())
                         forced.push_back(&e);
                       if (!is_leaf(e)) positions[&e].insert(p.key());
                       return true;
                     });
  // A scan (or label) inside a labelled value that the kernel also reads elsewhere goes first, so
  // that both readers read one transient. Taking the label first moved the scan into the label's
  // producer and left a copy in the kernel: two transients, the scan swept twice.
  auto storable = [&](const Expr* e) { return e->kind == ExprKind::scan || !read_dynamically.count(e); };
  for (const Expr* e : forced) {
    if (!storable(e)) continue;
    const auto inside = ir::post_order(std::shared_ptr<const Expr>(std::shared_ptr<const Expr>{}, e), false);
    if (std::none_of(inside.begin(), inside.end(), [&](const Expr* x) {
          return x != e && storable(x) && std::find(forced.begin(), forced.end(), x) != forced.end() &&
                 reached_around(*root, *x, *e);
        }))
      return e;
  }
  std::map<const Expr*, double> memo;
  const Expr* best = nullptr;
  double best_saving = 0;
  for (const auto& [e, where] : positions) {
    if (e == root || e->type.is_tuple() || e->type.dims.empty() || has_local_dim(e->type)) continue;
    if (read_dynamically.count(e)) continue;
    // A label costs one more than what it wraps, so a labelled value is stored under its label.
    if (e->kind == ExprKind::broadcast || e->kind == ExprKind::cast) continue;
    const double extra = (static_cast<double>(where.size()) - 1) * cost(*e, memo);
    const double saving = extra - recompute_threshold;
    if (saving > best_saving) {
      best_saving = saving;
      best = e;
    }
  }
  return best;
}

std::string label_of(const ir::Kernel& k, const Expr* e, const ir::Schedule& s) {
  std::string base = e->kind == ExprKind::named ? e->name : e->kind == ExprKind::scan ? e->name : k.name + "_tmp";
  std::string name = base;
  for (int n = 1; s.program.find(name) || s.transient_index(name) >= 0 ||
                  s.transient_index(name + "_0") >= 0; ++n)
    name = fmt::format("{}_{}", base, n);
  return name;
}

}  // namespace

void select_transients(ir::Schedule& s) {
  // Kernels are revisited after each change: a new producer may itself hold candidates.
  for (std::size_t k = 0; k < s.kernels.size();) {
    const Expr* e = pick(s, s.kernels[k]);
    if (!e) {
      ++k;
      continue;
    }
    const ir::Kernel& consumer = s.kernels[k];
    const std::string name = label_of(consumer, e, s);
    ir::Kernel producer;
    producer.name = name;
    producer.stmt = consumer.stmt;
    producer.extent_from_outputs = true;
    std::vector<ir::ExprPtr> refs;
    const Expr* value = e;
    while (value->kind == ExprKind::named) value = value->args[0].get();
    const ir::Type& t = e->type;
    const int n = t.is_tuple() ? static_cast<int>(t.elements.size()) : 1;
    for (int c = 0; c < n; ++c) {
      const ir::Type& et = t.is_tuple() ? t.elements[c] : t;
      ir::Transient tr;
      tr.name = n > 1 ? fmt::format("{}_{}", name, c) : name;
      tr.dtype = et.dtype;
      tr.dims = et.dims;
      tr.producer = static_cast<int>(k);
      if (value->kind == ExprKind::scan) tr.swept = value->dim;
      producer.outputs.push_back(tr.name);
      refs.push_back(ir::buffer_ref(tr.name, et.dtype, et.dims));
      s.transients.push_back(std::move(tr));
    }
    ir::ExprPtr replacement = refs[0];
    if (n > 1) {
      auto tuple = std::make_shared<Expr>();
      tuple->kind = ExprKind::make_tuple;
      tuple->type = t;
      tuple->args = refs;
      replacement = tuple;
    }
    // Keep the producer's value alive independently of the consumer's rewritten tree.
    for (const ir::Expr* x : ir::post_order(consumer.value))
      if (x == value) {
        // Find the shared_ptr that owns `value` among the consumer's nodes.
        for (const ir::Expr* parent : ir::post_order(consumer.value))
          for (const auto& a : parent->args)
            if (a.get() == value) producer.value = a;
        break;
      }
    FIELDFLOW_ASSERT(producer.value, "materialised node not found in its consumer");
    producer.kind = value->kind == ExprKind::scan ? ir::KernelKind::scan : ir::KernelKind::pointwise;
    s.kernels[k].value = ir::replace_node(consumer.value, e, replacement);
    // Transients produced by kernels from index k on move one place later.
    for (auto& tr : s.transients)
      if (tr.producer >= static_cast<int>(k) && tr.name != producer.outputs[0] &&
          !producer.writes(tr.name))
        ++tr.producer;
    s.kernels.insert(s.kernels.begin() + static_cast<long>(k), std::move(producer));
    // Re-examine the new producer first (it is at index k now).
  }
}

}  // namespace fieldflow::passes
