#include "ir/memory_overlap.h"

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "fieldflow/abi.h"
#include "fieldflow/dtype.h"

namespace fieldflow::ir {
namespace {

// Wide enough for any sum of a field's steps: each field's span fits 64 bits (Field checks it),
// and so does the distance between two addresses.
using Wide = __int128;

Wide gcd(Wide a, Wide b) {
  while (b != 0) a = std::exchange(b, a % b);
  return a;
}

// (a * b) mod m for 0 <= a, b < m: the product may pass 2^127, not 2^128.
Wide mul_mod(Wide a, Wide b, Wide m) {
  using U = unsigned __int128;
  return static_cast<Wide>(static_cast<U>(a) * static_cast<U>(b) % static_cast<U>(m));
}

// x in [0, m) with a * x = 1 (mod m), for a and m coprime (extended Euclid).
Wide inverse_mod(Wide a, Wide m) {
  Wide r0 = m, r1 = a % m, x0 = 0, x1 = 1;
  while (r1 != 0) {
    const Wide q = r0 / r1;
    r0 = std::exchange(r1, r0 - q * r1);
    x0 = std::exchange(x1, x0 - q * x1);
  }
  return ((x0 % m) + m) % m;
}

// One unknown of the equation: `step` (bytes, > 0) times an index in [0, last].
struct Term {
  Wide step = 0, last = 0;
};

// Is target = sum(step_k * x_k) for some x_k in [0, last_k]? Terms sorted by step, largest first.
// Works in the caller's arrays (n terms, n + 1 suffix entries): a check on a call's hot path
// allocates nothing.
class Search {
 public:
  Search(const Term* terms, std::size_t n, Wide* reach, Wide* gcds, std::uint64_t max_steps)
      : terms_(terms), n_(n), reach_(reach), gcd_(gcds), max_steps_(max_steps) {
    reach_[n] = 0;
    gcd_[n] = 0;
    for (std::size_t k = n; k-- > 0;) {
      reach_[k] = reach_[k + 1] + terms_[k].step * terms_[k].last;
      gcd_[k] = gcd(terms_[k].step, gcd_[k + 1]);
    }
  }
  bool gave_up() const { return gave_up_; }

  bool reachable(std::size_t k, Wide rest) {
    if (rest < 0 || rest > reach_[k]) return false;
    if (k == n_) return rest == 0;
    if (rest % gcd_[k] != 0) return false;
    if (++steps_ > max_steps_) {
      gave_up_ = true;
      return false;
    }
    const Wide step = terms_[k].step;
    const Wide after = gcd_[k + 1];  // 0: this is the last term
    if (after == 0) return rest % step == 0 && rest / step <= terms_[k].last;
    // The later terms reach [0, reach_[k+1]] in multiples of `after`: x must leave a remainder
    // there, which bounds it and fixes it modulo after / gcd(step, after).
    const Wide lo = std::max<Wide>(0, (rest - reach_[k + 1] + step - 1) / step);
    const Wide hi = std::min(terms_[k].last, rest / step);
    const Wide h = gcd(step, after);  // divides rest: gcd_[k] does
    const Wide period = after / h;
    const Wide residue = period == 1 ? 0 : mul_mod((rest / h) % period, inverse_mod((step / h) % period, period), period);
    for (Wide x = hi - ((hi - residue) % period + period) % period; x >= lo; x -= period) {
      if (reachable(k + 1, rest - step * x)) return true;
      if (gave_up_) return false;
    }
    return false;
  }

 private:
  const Term* terms_;
  std::size_t n_;
  Wide *reach_, *gcd_;  // per suffix of terms: the largest sum, the gcd of the steps
  std::uint64_t steps_ = 0, max_steps_;
  bool gave_up_ = false;
};

// Appends a field's axes (those with two or more indices and a non-zero stride) as terms.
Term* add_axes(const Field& f, Term* out) {
  const Wide bytes = static_cast<Wide>(size_of(f.dtype()));
  for (std::size_t a = 0; a < f.shape().size(); ++a)
    if (f.shape()[a] > 1 && f.strides()[a] > 0) *out++ = {f.strides()[a] * bytes, f.shape()[a] - 1};
  return out;
}

Wide address(const Field& f) { return static_cast<Wide>(reinterpret_cast<std::uintptr_t>(f.data())); }

// Room for the terms of an equation and its search's suffix sums: on the stack for fields of at
// most FF_MAX_DIMS axes (compiled programs' fields; their checks allocate nothing), on the heap
// for the reference's larger ones.
class Scratch {
 public:
  explicit Scratch(std::size_t most_terms)
      : more_terms_(most_terms > kFixed ? most_terms : 0), more_sums_(most_terms > kFixed ? 2 * (most_terms + 1) : 0) {}
  Term* terms() { return more_terms_.empty() ? fixed_terms_ : more_terms_.data(); }
  Wide* sums() { return more_sums_.empty() ? fixed_sums_ : more_sums_.data(); }

 private:
  static constexpr std::size_t kFixed = 2 * FF_MAX_DIMS + 1;
  Term fixed_terms_[kFixed];
  Wide fixed_sums_[2 * (kFixed + 1)];
  std::vector<Term> more_terms_;
  std::vector<Wide> more_sums_;
};

// Whether target = sum(step * x) over the terms [terms, end), each x in [0, last]. Terms of one
// step add up to one term ([0, m] + [0, n] = [0, m + n]): two views with the same strides leave
// one unknown per axis. Zero-length ones drop out.
Overlap solve(Term* terms, Term* end, Wide target, Wide* sums, std::uint64_t max_steps) {
  std::sort(terms, end, [](const Term& x, const Term& y) { return x.step > y.step; });
  std::size_t n = 0;
  for (const Term* t = terms; t != end; ++t) {
    if (t->last == 0) continue;
    if (n > 0 && terms[n - 1].step == t->step)
      terms[n - 1].last += t->last;
    else
      terms[n++] = *t;
  }
  Search search(terms, n, sums, sums + n + 1, max_steps);
  if (search.reachable(0, target)) return Overlap::shared;
  return search.gave_up() ? Overlap::undecided : Overlap::none;
}

}  // namespace

std::optional<std::int64_t> checked_span_bytes(std::span<const std::int64_t> extents,
                                               std::span<const std::int64_t> strides, std::size_t element_bytes) {
  if (std::find(extents.begin(), extents.end(), 0) != extents.end()) return 0;
  std::int64_t last = 0, step = 0, count = 0, bytes = 0;
  for (std::size_t a = 0; a < extents.size(); ++a)
    if (__builtin_mul_overflow(extents[a] - 1, strides[a], &step) || __builtin_add_overflow(last, step, &last))
      return std::nullopt;
  if (__builtin_add_overflow(last, 1, &count) ||
      __builtin_mul_overflow(count, static_cast<std::int64_t>(element_bytes), &bytes))
    return std::nullopt;
  return bytes;
}

bool spans_overlap(const Field& a, const Field& b) {
  if (a.size() == 0 || b.size() == 0) return false;
  const Wide pa = address(a), pb = address(b);
  return pa < pb + static_cast<Wide>(b.span_bytes()) && pb < pa + static_cast<Wide>(a.span_bytes());
}

Overlap element_overlap(const Field& a, const Field& b, std::uint64_t max_steps) {
  if (!spans_overlap(a, b)) return Overlap::none;
  Scratch scratch(a.shape().size() + b.shape().size() + 1);
  // A byte of both: pa + sum(sa * x) + u = pb + sum(sb * y) + v, with u, v bytes inside an
  // element. Every b index y (and v) becomes last - y, so that all steps are positive:
  // sum(sa * x) + sum(sb * y') + u + v' = pb - pa + sum(sb * last_y) + (element bytes of b - 1).
  Term* terms = scratch.terms();
  Term* b_terms = add_axes(a, terms);
  Term* end = add_axes(b, b_terms);
  Wide target = address(b) - address(a) + static_cast<Wide>(size_of(b.dtype())) - 1;
  for (const Term* t = b_terms; t != end; ++t) target += t->step * t->last;
  *end++ = {1, static_cast<Wide>(size_of(a.dtype()) + size_of(b.dtype())) - 2};  // u + v'
  return solve(terms, end, target, scratch.sums(), max_steps);
}

Overlap internal_overlap(const Field& f, std::uint64_t max_steps) {
  if (f.size() == 0) return Overlap::none;  // no two indices to share an element
  // Two indices x != y share an element when sum(s * d) = 0 for d = x - y, d_a in
  // [-(n_a - 1), n_a - 1], d not all zero (elements of one field meet only where they coincide).
  // An axis of two or more indices and stride 0 is such a d already.
  for (std::size_t a = 0; a < f.shape().size(); ++a)
    if (f.shape()[a] > 1 && f.strides()[a] == 0) return Overlap::shared;
  const std::size_t rank = f.shape().size();
  Scratch axes_scratch(rank), scratch(rank);
  Term* axes = axes_scratch.terms();
  Term* axes_end = add_axes(f, axes);
  // By stride, largest first: d's first non-zero entry, at axis k, may be taken positive (else
  // negate d), d_k = 1 + e_k with e_k in [0, n_k - 2], and each later d_j = e_j - (n_j - 1) with
  // e_j in [0, 2 (n_j - 1)]: s_k e_k + sum(s_j e_j) = sum(s_j (n_j - 1)) - s_k. For nested strides
  // (any dense or padded layout) the right side is negative for every k: no search at all.
  std::sort(axes, axes_end, [](const Term& x, const Term& y) { return x.step > y.step; });
  for (const Term* k = axes; k != axes_end; ++k) {
    Term* terms = scratch.terms();
    Term* end = terms;
    Wide target = -k->step;
    *end++ = {k->step, k->last - 1};
    for (const Term* j = k + 1; j != axes_end; ++j) {
      *end++ = {j->step, 2 * j->last};
      target += j->step * j->last;
    }
    if (target < 0) continue;
    const Overlap o = solve(terms, end, target, scratch.sums(), max_steps);
    if (o != Overlap::none) return o;
  }
  return Overlap::none;
}

}  // namespace fieldflow::ir
