#include "passes/fuse_kernels.h"

#include <algorithm>
#include <set>
#include <unordered_map>

#include "ir/positions.h"
#include "passes/infer_accesses.h"

namespace fieldflow::passes {

namespace {

using ir::Access;
using ir::Kernel;

bool same_domain(const ir::Domain& a, const ir::Domain& b) {
  if (a.empty() || a.size() != b.size()) return false;
  for (const auto& r : a) {
    auto it = std::find_if(b.begin(), b.end(), [&](const ir::DomainRange& q) { return q.dim == r.dim; });
    if (it == b.end() || !(it->lo == r.lo) || !(it->hi == r.hi)) return false;
  }
  return true;
}

// Every read of `buffer` in k is at the point being computed (vacuously true if it is not read).
bool reads_only_at_point(const Kernel& k, const std::string& buffer) {
  for (const Access& a : k.accesses)
    if (a.buffer == buffer && !ir::at_point(a)) return false;
  return true;
}

bool can_fuse(const Kernel& a, const Kernel& b) {
  if (a.kind != ir::KernelKind::pointwise || b.kind != ir::KernelKind::pointwise) return false;
  if (!same_domain(a.domain, b.domain)) return false;
  for (const auto& out : a.outputs)
    if (!reads_only_at_point(b, out)) return false;
  for (const auto& out : b.outputs)
    if (!reads_only_at_point(a, out)) return false;
  return true;
}

std::vector<ir::ExprPtr> components(const Kernel& k) {
  if (k.outputs.size() == 1) return {k.value};
  if (k.value->kind == ir::ExprKind::make_tuple) return k.value->args;
  std::vector<ir::ExprPtr> parts;
  for (std::size_t c = 0; c < k.outputs.size(); ++c) {
    auto e = std::make_shared<ir::Expr>();
    e->kind = ir::ExprKind::tuple_get;
    e->type = k.value->type.elements[c];
    e->args = {k.value};
    e->offset = static_cast<std::int64_t>(c);
    parts.push_back(e);
  }
  return parts;
}

}  // namespace

void fuse_kernels(ir::Schedule& s) {
  bool changed = false;
  for (std::size_t k = 0; k + 1 < s.kernels.size();) {
    Kernel& a = s.kernels[k];
    const Kernel& b = s.kernels[k + 1];
    if (!can_fuse(a, b)) {
      ++k;
      continue;
    }
    std::vector<ir::ExprPtr> a_parts = components(a), b_parts = components(b);
    // The later kernel takes the earlier one's values directly instead of re-reading them: each
    // read of an output of `a` becomes the value `a` last wrote to it (a buffer may be written
    // twice, by two fused statements). All reads are replaced at once: a value of `a` may read
    // that buffer itself (`o = o * i`), and that read means the value before `a`, not another
    // substitution (fuzzer seed 49, docs/reliability.md class 19).
    for (auto& part : b_parts) {
      std::unordered_map<const ir::Expr*, ir::ExprPtr> written;
      for (const ir::Expr* e : ir::post_order(part))
        if (e->kind == ir::ExprKind::field_ref)
          for (std::size_t o = 0; o < a.outputs.size(); ++o)
            if (e->name == a.outputs[o]) written[e] = a_parts[o];  // the last write wins
      if (!written.empty()) part = ir::replace_nodes(part, written);
    }
    std::vector<std::string> outputs;
    std::vector<ir::ExprPtr> values;
    for (std::size_t o = 0; o < a.outputs.size(); ++o) {
      // A transient nobody else reads need not be stored at all.
      const bool needed_later = std::any_of(s.kernels.begin() + static_cast<long>(k) + 2, s.kernels.end(),
                                            [&](const Kernel& later) { return later.reads(a.outputs[o]); });
      if (s.transient_index(a.outputs[o]) >= 0 && !needed_later) continue;
      outputs.push_back(a.outputs[o]);
      values.push_back(a_parts[o]);
    }
    for (std::size_t o = 0; o < b.outputs.size(); ++o) {
      outputs.push_back(b.outputs[o]);
      values.push_back(b_parts[o]);
    }
    Kernel fused = a;
    fused.name = a.name + "+" + b.name;
    fused.outputs = outputs;
    if (values.size() == 1) {
      fused.value = values[0];
    } else {
      auto tuple = std::make_shared<ir::Expr>();
      tuple->kind = ir::ExprKind::make_tuple;
      for (const auto& v : values) tuple->type.elements.push_back(v->type);
      tuple->args = values;
      fused.value = tuple;
    }
    s.kernels[k] = std::move(fused);
    s.kernels.erase(s.kernels.begin() + static_cast<long>(k) + 1);
    // Transients no kernel writes any more are gone.
    std::erase_if(s.transients, [&](const ir::Transient& t) {
      return std::none_of(s.kernels.begin(), s.kernels.end(), [&](const Kernel& kk) {
        return kk.writes(t.name);
      });
    });
    infer_accesses(s);
    changed = true;
  }
  if (changed) infer_accesses(s);
}

}  // namespace fieldflow::passes
