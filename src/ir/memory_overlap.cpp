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

}  // namespace

bool spans_overlap(const Field& a, const Field& b) {
  if (a.size() == 0 || b.size() == 0) return false;
  const Wide pa = address(a), pb = address(b);
  return pa < pb + static_cast<Wide>(b.span_bytes()) && pb < pa + static_cast<Wide>(a.span_bytes());
}

Overlap element_overlap(const Field& a, const Field& b, std::uint64_t max_steps) {
  if (!spans_overlap(a, b)) return Overlap::none;
  // Compiled programs' fields have at most FF_MAX_DIMS axes: their terms fit on the stack; the
  // reference's may have more.
  const std::size_t most = a.shape().size() + b.shape().size() + 1;
  constexpr std::size_t kFixed = 2 * FF_MAX_DIMS + 1;
  Term fixed_terms[kFixed];
  Wide fixed_sums[2 * (kFixed + 1)];
  std::vector<Term> more_terms(most > kFixed ? most : 0);
  std::vector<Wide> more_sums(most > kFixed ? 2 * (most + 1) : 0);
  Term* terms = most > kFixed ? more_terms.data() : fixed_terms;
  Wide* sums = most > kFixed ? more_sums.data() : fixed_sums;
  // A byte of both: pa + sum(sa * x) + u = pb + sum(sb * y) + v, with u, v bytes inside an
  // element. Every b index y (and v) becomes last - y, so that all steps are positive:
  // sum(sa * x) + sum(sb * y') + u + v' = pb - pa + sum(sb * last_y) + (element bytes of b - 1).
  Term* b_terms = add_axes(a, terms);
  Term* end = add_axes(b, b_terms);
  Wide target = address(b) - address(a) + static_cast<Wide>(size_of(b.dtype())) - 1;
  for (const Term* t = b_terms; t != end; ++t) target += t->step * t->last;
  *end++ = {1, static_cast<Wide>(size_of(a.dtype()) + size_of(b.dtype())) - 2};  // u + v'
  // Terms of one step add up to one term ([0, m] + [0, n] = [0, m + n]): two views with the
  // same strides leave one unknown per axis. Zero-length ones drop out.
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

}  // namespace fieldflow::ir
