// Hand-written baselines of the built-in examples (see baselines.h). Every formula below repeats
// the program's (src/examples/*.cpp) in the same association order; comments name the program.
#include "baselines.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <memory>
#include <new>
#include <type_traits>
#include <vector>

#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"

namespace fieldflow::bench {

namespace {

// A field seen as a flat array: the element at absolute index (a, b, c) sits at
// off + a*s[0] + b*s[1] + c*s[2] (origin folded into off). Unused trailing strides are 0.
template <class T>
struct View {
  T* d = nullptr;
  std::int64_t off = 0;
  std::int64_t s[3] = {0, 0, 0};
  std::int64_t at(std::int64_t a, std::int64_t b = 0, std::int64_t c = 0) const {
    return off + a * s[0] + b * s[1] + c * s[2];
  }
  T* ptr(std::int64_t a, std::int64_t b = 0, std::int64_t c = 0) const { return d + at(a, b, c); }
};

template <class T>
View<T> view(examples::ExampleInstance& inst, const std::string& name, std::size_t rank) {
  auto it = inst.fields.find(name);
  if (it == inst.fields.end()) throw ArgumentError(fmt::format("baseline: instance has no field '{}'", name));
  Field& f = it->second;
  if (f.dims().size() != rank)
    throw ArgumentError(fmt::format("baseline: field '{}' has rank {}, expected {}", name, f.dims().size(), rank));
  View<T> v;
  v.d = f.data_as<std::remove_const_t<T>>();
  for (std::size_t a = 0; a < rank; ++a) {
    v.s[a] = f.strides()[a];
    v.off -= f.origin()[a] * f.strides()[a];
  }
  return v;
}

int int_scalar(const examples::ExampleInstance& inst, const std::string& name) {
  return static_cast<int>(inst.scalars.at(name).as_int());
}
double real_scalar(const examples::ExampleInstance& inst, const std::string& name) {
  return inst.scalars.at(name).as_double();
}
const NeighborTable& table(const examples::ExampleInstance& inst, const std::string& name) {
  if (!inst.mesh) throw ArgumentError("baseline: unstructured instance without a mesh");
  return inst.mesh->table(name);
}

// The layout of the instance's fields with levels, which must all have the same (a baseline's
// loops are written for one).
Layout layout_of(const examples::ExampleInstance& inst) {
  const std::pair<const std::string, Field>* first = nullptr;
  for (const auto& named : inst.fields) {
    const auto& dims = named.second.dims();
    if (std::none_of(dims.begin(), dims.end(), [](const Dimension& d) { return d.kind == DimKind::vertical; })) continue;
    if (!first) first = &named;
    else if (named.second.layout() != first->second.layout())
      throw ArgumentError(fmt::format("baseline: field '{}' is {} but field '{}' is {}; expected one layout", named.first,
                                      to_string(named.second.layout()), first->first, to_string(first->second.layout())));
  }
  return first ? first->second.layout() : inst.fields.begin()->second.layout();
}

// Per-thread scratch of the solvers, allocated when the baseline is bound (never inside the timed
// call) and first touched by the thread that uses it. Each thread's part starts on its own 64-byte
// line and is followed by a 4 KiB gap, as fieldflow's column blocks are: the hardware prefetchers
// of one core then never pull in the lines another core is writing (docs/performance.md, Where the
// time goes, vadv). The timed call runs with threads() threads.
class ThreadScratch {
 public:
  explicit ThreadScratch(std::size_t doubles_per_thread)
      : threads_(omp_get_max_threads()), stride_((doubles_per_thread + 7) / 8 * 8 + 4096 / sizeof(double)) {
    void* p = std::aligned_alloc(64, std::max<std::size_t>(stride_ * threads_, 8) * sizeof(double));
    if (!p) throw std::bad_alloc();
    data_.reset(static_cast<double*>(p));
#pragma omp parallel num_threads(threads_)
    std::fill(of(omp_get_thread_num()), of(omp_get_thread_num()) + stride_, 0.0);
  }
  int threads() const { return threads_; }
  double* of(int thread) const { return data_.get() + stride_ * static_cast<std::size_t>(thread); }

 private:
  struct Free {
    void operator()(double* p) const { std::free(p); }
  };
  int threads_;
  std::size_t stride_;
  std::unique_ptr<double, Free> data_;
};

// Every row of the box [0,nx) x [0,ny) x [0,nk) along its unit-stride dimension (K when
// kfast, else I): body(i, j, k, n) gets the row's first point and its length.
template <class Body>
void for_rows(bool kfast, int nx, int ny, int nk, const Body& body) {
  if (kfast) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int i = 0; i < nx; ++i)
      for (int j = 0; j < ny; ++j) body(i, j, 0, nk);
  } else {
#pragma omp parallel for collapse(2) schedule(static)
    for (int k = 0; k < nk; ++k)
      for (int j = 0; j < ny; ++j) body(0, j, k, nx);
  }
}

struct CartSizes {
  int nx, ny, nk;
  bool kfast;
};
CartSizes cart_sizes(const examples::ExampleInstance& inst) {
  return {int_scalar(inst, "nx"), int_scalar(inst, "ny"), int_scalar(inst, "nk"),
          layout_of(inst) == Layout::vertical_fastest};
}

// The fieldflow Laplacian, -4 in + in(I+1) + in(I-1) + in(J+1) + in(J-1), left to right.
inline double lap(const double* q, std::int64_t dI, std::int64_t dJ) {
  return (((-4.0 * q[0] + q[dI]) + q[-dI]) + q[dJ]) + q[-dJ];
}

// hdiff's limiter: where(flux * gradient > 0, 0, flux). Written as a bit mask (+0.0 has no bits
// set, so the result is the select's bit for bit): with four plain selects in one loop GCC
// threads them into branches and, under the default -ftrapping-math, gives up vectorising.
inline double limited(double flux, double gradient) {
  const std::uint64_t keep = -static_cast<std::uint64_t>(!(flux * gradient > 0.0));
  return std::bit_cast<double>(std::bit_cast<std::uint64_t>(flux) & keep);
}

// ---------------------------------------------------------------------------------------------
std::function<void()> bind_laplacian(examples::ExampleInstance& inst, BaselineForm /*one form*/) {
  const auto in = view<double>(inst, "in", 3);
  const auto out = view<double>(inst, "out", 3);
  const CartSizes n = cart_sizes(inst);
  return [=] {
    const std::int64_t dI = in.s[0], dJ = in.s[1];
    for_rows(n.kfast, n.nx, n.ny, n.nk, [&](int i, int j, int k, int len) {
      const double* __restrict q = in.ptr(i, j, k);
      double* __restrict o = out.ptr(i, j, k);
#pragma omp simd
      for (int x = 0; x < len; ++x) o[x] = lap(q + x, dI, dJ);
    });
  };
}

// lap_of_lap: the Laplacian of the Laplacian, the inner one recomputed at the five points from
// cache rather than stored.
std::function<void()> bind_lap_of_lap(examples::ExampleInstance& inst, BaselineForm /*one form*/) {
  const auto in = view<double>(inst, "in", 3);
  const auto out = view<double>(inst, "out", 3);
  const CartSizes n = cart_sizes(inst);
  return [=] {
    const std::int64_t dI = in.s[0], dJ = in.s[1];
    for_rows(n.kfast, n.nx, n.ny, n.nk, [&](int i, int j, int k, int len) {
      const double* __restrict q = in.ptr(i, j, k);
      double* __restrict o = out.ptr(i, j, k);
#pragma omp simd
      for (int x = 0; x < len; ++x) {
        const double* p = q + x;
        o[x] = (((-4.0 * lap(p, dI, dJ) + lap(p + dI, dI, dJ)) + lap(p - dI, dI, dJ)) + lap(p + dJ, dI, dJ)) +
               lap(p - dJ, dI, dJ);
      }
    });
  };
}

// hdiff: one fused pass; lap at the five points, the four limited fluxes, the update.
std::function<void()> bind_hdiff(examples::ExampleInstance& inst, BaselineForm /*one form*/) {
  const auto in = view<double>(inst, "in", 3);
  const auto coeff = view<double>(inst, "coeff", 3);
  const auto out = view<double>(inst, "out", 3);
  const CartSizes n = cart_sizes(inst);
  return [=] {
    const std::int64_t dI = in.s[0], dJ = in.s[1];
    for_rows(n.kfast, n.nx, n.ny, n.nk, [&](int i, int j, int k, int len) {
      const double* __restrict q = in.ptr(i, j, k);
      const double* __restrict c = coeff.ptr(i, j, k);
      double* __restrict o = out.ptr(i, j, k);
#pragma omp simd
      for (int x = 0; x < len; ++x) {
        const double* p = q + x;
        const double lc = lap(p, dI, dJ);
        const double le = lap(p + dI, dI, dJ), lw = lap(p - dI, dI, dJ);
        const double ln = lap(p + dJ, dI, dJ), ls = lap(p - dJ, dI, dJ);
        // Fluxes at (i, j), (i-1, j), (i, j), (i, j-1); counter-gradient ones are limited to 0.
        const double flx = limited(le - lc, p[dI] - p[0]);
        const double flx_w = limited(lc - lw, p[0] - p[-dI]);
        const double fly = limited(ln - lc, p[dJ] - p[0]);
        const double fly_s = limited(lc - ls, p[0] - p[-dJ]);
        o[x] = p[0] - c[x] * (((flx - flx_w) + fly) - fly_s);
      }
    });
  };
}

// ---------------------------------------------------------------------------------------------
// vadv: the Thomas algorithm per column. Coefficients of level k (program order):
//   gav = k == 0 ? 0 : -0.25 (wcon(I+1) + wcon),  gcv = k == nk-1 ? 0 : 0.25 (wcon(I+1,K+1) + wcon(K+1))
//   a = gav/2, c = gcv/2, b = dtr - a - c
//   d = dtr u_pos + utens + utens_stage + [k>0] (-a (u(K-1) - u)) + [k<nk-1] (-c (u(K+1) - u))
// forward  c'_k = c / (b - c'_{k-1} a),  d'_k = (d - d'_{k-1} a) / (b - c'_{k-1} a)
// backward x_k = d'_k - c'_k x_{k+1};  out = dtr (x - u_pos)
struct VadvFields {
  View<const double> us, wc, up, ut, uts;
  View<double> out;
  double dtr;
  int nx, ny, nk;
};

VadvFields vadv_fields(examples::ExampleInstance& inst) {
  VadvFields f;
  f.us = view<const double>(inst, "u_stage", 3);
  f.wc = view<const double>(inst, "wcon", 3);
  f.up = view<const double>(inst, "u_pos", 3);
  f.ut = view<const double>(inst, "utens", 3);
  f.uts = view<const double>(inst, "utens_stage", 3);
  f.out = view<double>(inst, "out", 3);
  f.dtr = real_scalar(inst, "dtr_stage");
  f.nx = int_scalar(inst, "nx");
  f.ny = int_scalar(inst, "ny");
  f.nk = int_scalar(inst, "nk");
  return f;
}

// One level of the forward sweep for one point; pointers at the point's level, dK/dIw the
// K stride of u_stage and the I stride of wcon.
template <bool First, bool Last>
inline void vadv_forward_point(double dtr, const double* us, std::int64_t dK, const double* wc, std::int64_t dIw,
                               std::int64_t dKw, double up, double ut, double uts, double cp_prev,
                               double dp_prev, double& cp, double& dp) {
  const double gav = First ? 0.0 : -0.25 * (wc[dIw] + wc[0]);
  const double gcv = Last ? 0.0 : 0.25 * (wc[dIw + dKw] + wc[dKw]);
  const double a = gav * 0.5, c = gcv * 0.5;
  const double b = (dtr - a) - c;
  const double lower = First ? 0.0 : -a * (us[-dK] - us[0]);
  const double upper = Last ? 0.0 : -c * (us[dK] - us[0]);
  const double d = ((dtr * up + ut) + uts) + (lower + upper);
  const double div = 1.0 / (b - cp_prev * a);
  cp = c * div;
  dp = (d - dp_prev * a) * div;
}

// Vertical-fastest: columns are contiguous, but the solve is a recurrence along them: one
// column alone is bound by the latency of its division chain. So each thread takes blocks of
// B neighbouring columns (same i, consecutive j):
//  1. the coefficients a, b, c, d of each column, vectorised along K (unit stride), into a
//     per-thread buffer laid out [column][level];
//  2. the forward elimination of the B columns side by side, vectorised across columns
//     (B independent division chains in flight);
//  3. the back substitution likewise, then out per column, vectorised along K again.
constexpr int vadv_block = 8;

struct VadvColumnBuffers {
  double *a, *b, *c, *d, *cp, *dp;  // [vadv_block][nk]
};

// Step 1 for one column: a, b, c, d at every level, the boundary levels peeled.
inline void vadv_coefficients(const VadvFields& f, int i, int j, const VadvColumnBuffers& t, int col) {
  const int nk = f.nk;
  const std::int64_t dIw = f.wc.s[0];
  const double* __restrict us = f.us.ptr(i, j, 0);
  const double* __restrict w0 = f.wc.ptr(i, j, 0);
  const double* __restrict w1 = w0 + dIw;
  const double* __restrict up = f.up.ptr(i, j, 0);
  const double* __restrict ut = f.ut.ptr(i, j, 0);
  const double* __restrict uts = f.uts.ptr(i, j, 0);
  double* __restrict a = t.a + col * nk;
  double* __restrict b = t.b + col * nk;
  double* __restrict c = t.c + col * nk;
  double* __restrict d = t.d + col * nk;
  const double dtr = f.dtr;
  auto level = [&]<bool First, bool Last>(int k) {
    const double gav = First ? 0.0 : -0.25 * (w1[k] + w0[k]);
    const double gcv = Last ? 0.0 : 0.25 * (w1[k + 1] + w0[k + 1]);
    const double ak = gav * 0.5, ck = gcv * 0.5;
    a[k] = ak;
    c[k] = ck;
    b[k] = (dtr - ak) - ck;
    const double lower = First ? 0.0 : -ak * (us[k - 1] - us[k]);
    const double upper = Last ? 0.0 : -ck * (us[k + 1] - us[k]);
    d[k] = ((dtr * up[k] + ut[k]) + uts[k]) + (lower + upper);
  };
  if (nk == 1) {
    level.template operator()<true, true>(0);
    return;
  }
  level.template operator()<true, false>(0);
#pragma omp simd
  for (int k = 1; k < nk - 1; ++k) level.template operator()<false, false>(k);
  level.template operator()<false, true>(nk - 1);
}

// Scratch of one thread: a, b, c, d, c', d' of a block, [column][level] each. Columns past the
// end of the last block keep the benign values they start with (a = c = d = 0, b = 1) or a
// previous block's; they are computed and never stored.
std::shared_ptr<ThreadScratch> vadv_kfast_scratch(int nk) {
  const std::size_t col = static_cast<std::size_t>(nk) * vadv_block;
  auto scratch = std::make_shared<ThreadScratch>(6 * col);
  for (int t = 0; t < scratch->threads(); ++t) std::fill(scratch->of(t) + col, scratch->of(t) + 2 * col, 1.0);
  return scratch;
}

void vadv_kfast(const VadvFields& f, const ThreadScratch& scratch) {
  const int nk = f.nk, B = vadv_block;
  const int nblocks = (f.ny + B - 1) / B;
  const std::size_t col = static_cast<std::size_t>(nk) * B;
#pragma omp parallel num_threads(scratch.threads())
  {
    double* buf = scratch.of(omp_get_thread_num());
    const VadvColumnBuffers t{buf, buf + col, buf + 2 * col, buf + 3 * col, buf + 4 * col, buf + 5 * col};
#pragma omp for collapse(2) schedule(static)
    for (int i = 0; i < f.nx; ++i)
      for (int jb = 0; jb < nblocks; ++jb) {
        const int j0 = jb * B, nb = std::min(B, f.ny - j0);
        for (int jj = 0; jj < nb; ++jj) vadv_coefficients(f, i, j0 + jj, t, jj);
        {
          const double *__restrict a = t.a, *__restrict b = t.b, *__restrict c = t.c, *__restrict d = t.d;
          double *__restrict cp = t.cp, *__restrict dp = t.dp;
          double cprev[vadv_block] = {}, dprev[vadv_block] = {};
          for (int k = 0; k < nk; ++k) {
#pragma omp simd
            for (int jj = 0; jj < B; ++jj) {
              const std::size_t q = static_cast<std::size_t>(jj) * nk + k;
              const double div = 1.0 / (b[q] - cprev[jj] * a[q]);
              cprev[jj] = c[q] * div;
              dprev[jj] = (d[q] - dprev[jj] * a[q]) * div;
              cp[q] = cprev[jj];
              dp[q] = dprev[jj];
            }
          }
          double x[vadv_block] = {};
          for (int k = nk - 1; k >= 0; --k) {
#pragma omp simd
            for (int jj = 0; jj < B; ++jj) {
              const std::size_t q = static_cast<std::size_t>(jj) * nk + k;
              x[jj] = dp[q] - cp[q] * x[jj];
              dp[q] = x[jj];
            }
          }
        }
        const double dtr = f.dtr;
        for (int jj = 0; jj < nb; ++jj) {
          const double* __restrict x = t.dp + jj * nk;
          const double* __restrict up = f.up.ptr(i, j0 + jj, 0);
          double* __restrict o = f.out.ptr(i, j0 + jj, 0);
#pragma omp simd
          for (int k = 0; k < nk; ++k) o[k] = dtr * (x[k] - up[k]);
        }
      }
  }
}

// Horizontal-fastest: rows along I are contiguous. Each thread takes blocks of J rows and
// sweeps the levels with the inner loop over I vectorised; c' and d' of the block (nk x rows x
// nx) stay in a per-thread buffer (L2-sized), so only inputs and the output touch memory. Two
// rows per block make each level's reads 4 KB contiguous chunks, which the prefetchers follow
// better than 2 KB ones a whole level (512 KB) apart.
template <bool First, bool Last>
inline void vadv_ifast_level(const VadvFields& f, int j, int k, double* __restrict cp_row,
                             const double* __restrict cp_prev, double* __restrict dp_row,
                             const double* __restrict dp_prev) {
  const double* __restrict us = f.us.ptr(0, j, k);
  const double* __restrict wc = f.wc.ptr(0, j, k);
  const double* __restrict up = f.up.ptr(0, j, k);
  const double* __restrict ut = f.ut.ptr(0, j, k);
  const double* __restrict uts = f.uts.ptr(0, j, k);
  const std::int64_t dK = f.us.s[2], dKw = f.wc.s[2];
  const double dtr = f.dtr;
#pragma omp simd
  for (int x = 0; x < f.nx; ++x)
    vadv_forward_point<First, Last>(dtr, us + x, dK, wc + x, 1, dKw, up[x], ut[x], uts[x], First ? 0.0 : cp_prev[x],
                                    First ? 0.0 : dp_prev[x], cp_row[x], dp_row[x]);
}

constexpr int vadv_rows = 2;  // J rows swept together: 2 KB contiguous chunks -> 4 KB per level

// Scratch of one thread: c' and d' of a block [level][row of the block][i], then x [row][i].
std::size_t vadv_ifast_scratch(int nx, int nk) {
  return (2 * static_cast<std::size_t>(nk) + 1) * vadv_rows * static_cast<std::size_t>(nx);
}

void vadv_ifast(const VadvFields& f, const ThreadScratch& scratch) {
  const std::size_t row = static_cast<std::size_t>(f.nx), R = vadv_rows;
  const int nblocks = (f.ny + vadv_rows - 1) / vadv_rows;
#pragma omp parallel num_threads(scratch.threads())
  {
    double* buf = scratch.of(omp_get_thread_num());
    double* __restrict cp = buf;
    double* __restrict dp = buf + row * R * f.nk;
    double* __restrict xr = buf + 2 * row * R * f.nk;
    auto at = [&](int k, int r) { return (static_cast<std::size_t>(k) * R + r) * row; };
#pragma omp for schedule(static)
    for (int jb = 0; jb < nblocks; ++jb) {
      const int j0 = jb * vadv_rows, nb = std::min(vadv_rows, f.ny - j0);
      for (int k = 0; k < f.nk; ++k)
        for (int r = 0; r < nb; ++r) {
          const int j = j0 + r;
          double* c = cp + at(k, r);
          double* d = dp + at(k, r);
          if (k == 0 && f.nk == 1)
            vadv_ifast_level<true, true>(f, j, k, c, nullptr, d, nullptr);
          else if (k == 0)
            vadv_ifast_level<true, false>(f, j, k, c, nullptr, d, nullptr);
          else if (k == f.nk - 1)
            vadv_ifast_level<false, true>(f, j, k, c, cp + at(k - 1, r), d, dp + at(k - 1, r));
          else
            vadv_ifast_level<false, false>(f, j, k, c, cp + at(k - 1, r), d, dp + at(k - 1, r));
        }
      std::fill(xr, xr + row * R, 0.0);
      for (int k = f.nk - 1; k >= 0; --k)
        for (int r = 0; r < nb; ++r) {
          const double* __restrict c = cp + at(k, r);
          const double* __restrict d = dp + at(k, r);
          double* __restrict x = xr + r * row;
          const double* __restrict up = f.up.ptr(0, j0 + r, k);
          double* __restrict o = f.out.ptr(0, j0 + r, k);
          const double dtr = f.dtr;
#pragma omp simd
          for (int i = 0; i < f.nx; ++i) {
            const double v = d[i] - c[i] * x[i];
            x[i] = v;
            o[i] = dtr * (v - up[i]);
          }
        }
    }
  }
}

std::function<void()> bind_vadv(examples::ExampleInstance& inst, BaselineForm /*one form*/) {
  const VadvFields f = vadv_fields(inst);
  if (layout_of(inst) == Layout::vertical_fastest) {
    auto scratch = vadv_kfast_scratch(f.nk);
    return [f, scratch] { vadv_kfast(f, *scratch); };
  }
  auto scratch = std::make_shared<ThreadScratch>(vadv_ifast_scratch(f.nx, f.nk));
  return [f, scratch] { vadv_ifast(f, *scratch); };
}

// ---------------------------------------------------------------------------------------------
std::function<void()> bind_vertical_interp(examples::ExampleInstance& inst, BaselineForm /*one form*/) {
  const auto in = view<double>(inst, "in", 3);
  const auto out = view<double>(inst, "out", 3);
  const CartSizes n = cart_sizes(inst);
  return [=] {
    const std::int64_t dK = in.s[2];
    for_rows(n.kfast, n.nx, n.ny, n.nk, [&](int i, int j, int k, int len) {
      const double* __restrict q = in.ptr(i, j, k);
      double* __restrict o = out.ptr(i, j, k);
#pragma omp simd
      for (int x = 0; x < len; ++x) o[x] = 0.5 * (q[x] + q[x + dK]);
    });
  };
}

std::function<void()> bind_masked_update(examples::ExampleInstance& inst, BaselineForm /*one form*/) {
  const auto a = view<double>(inst, "a", 3), b = view<double>(inst, "b", 3);
  const auto ta = view<const double>(inst, "ta", 3), tb = view<const double>(inst, "tb", 3);
  const auto mask = view<const bool>(inst, "mask", 3);
  const double dt = real_scalar(inst, "dt");
  const CartSizes n = cart_sizes(inst);
  return [=] {
    for_rows(n.kfast, n.nx, n.ny, n.nk, [&](int i, int j, int k, int len) {
      double* __restrict pa = a.ptr(i, j, k);
      double* __restrict pb = b.ptr(i, j, k);
      const double* __restrict pta = ta.ptr(i, j, k);
      const double* __restrict ptb = tb.ptr(i, j, k);
      const bool* __restrict m = mask.ptr(i, j, k);
#pragma omp simd
      for (int x = 0; x < len; ++x) {
        const double va = pa[x], vb = pb[x];
        pa[x] = m[x] ? va + dt * pta[x] : va;
        pb[x] = m[x] ? vb + dt * ptb[x] : vb;
      }
    });
  };
}

// ---------------------------------------------------------------------------------------------
// Unstructured kernels. Vertical-fastest: one element per outer iteration; its neighbours'
// columns are gathered as pointers once, then the sum runs over K, unit stride, vectorised.
// Missing neighbours (-1) are dropped from the list, so the sums keep their order.
// Horizontal-fastest, as tuned model codes on this layout are written (ICON's nproma blocks):
// elements in blocks of mesh_block; per block, what does not change along K (neighbour indices,
// through chained tables, and coefficients) is gathered once into small arrays, then each level
// runs over the block with unit-stride loads of those arrays and one load per neighbour value.
// Recomputing the table walks per level (the plain way) costs integer loads at every point. A
// missing neighbour's slot reads a stand-in element and its term is not taken (a select: every
// block of a bounded mesh has boundary rows, at both ends of each row); blocks without missing
// neighbours run without the selects. As written, a level loop is forced into vector form (`omp
// simd`, so its loads become gathers) only where that measured faster on an AMD EPYC with
// AVX-512 (`fieldflow bench`, 100x100 meshes x 80 levels, 2 threads, medians of 7): fvm_nabla
// (1.7 ms against 2.9 scalar: its divisions vectorise) and the select loops of diffusion_chain
// (2.6-2.8 against 3.1-3.3); elsewhere GCC's cost model decides and keeps them scalar, because
// gathers were slow there: c2e2co_sum 2.0 ms against 2.9 forced, diffusion_chain's full blocks
// 2.2-2.3 against 2.7-3.3, nabla4 8.0 against 8.3. On an AMD EPYC without AVX-512 (Zen 3, where
// GCC emulates gathers) forcing those too was faster (torus: nabla4 9.1 -> 6.8 ms, c2e2co_sum 2.5
// -> 1.9, diffusion_chain 3.1 -> 2.3), so they come in both forms and the faster is kept when
// bound (BaselineForm, in_form). Level by level without blocks, scalar (the table read at every
// point, each level's plane streamed whole), c2e2co_sum took 3.6-4.0 ms against 1.7-2.1.

struct MeshSizes {
  int n, nk;
  bool kfast;
};
MeshSizes mesh_sizes(const examples::ExampleInstance& inst, const std::string& n_name) {
  return {int_scalar(inst, n_name), int_scalar(inst, "nk"), layout_of(inst) == Layout::vertical_fastest};
}

constexpr int mesh_block = 128;

// Calls block(first, count) for the blocks of [0, n), spread over the threads.
template <class Block>
void for_each_block(int n, const Block& block) {
  const int blocks = (n + mesh_block - 1) / mesh_block;
#pragma omp parallel for schedule(static)
  for (int b = 0; b < blocks; ++b) block(b * mesh_block, std::min(mesh_block, n - b * mesh_block));
}

// A level's loop over the elements [0, count) of a block, in one of the two forms (BaselineForm):
// as written (the compiler's cost model decides; every loop that measured faster forced is forced
// in both forms), or forced into vector form, its neighbour loads gathers.
template <bool Vector, class Body>
inline void block_elements(int count, const Body& body) {
  if constexpr (Vector) {
#pragma omp simd
    for (int i = 0; i < count; ++i) body(i);
  } else {
    for (int i = 0; i < count; ++i) body(i);
  }
}

// The baseline `run(std::bool_constant<vector>)` in the form asked; tuned: after a warm-up call
// of each, both forms run three times, alternately, and the one whose fastest call was faster
// stays (the fastest: the call a shared machine disturbed least).
template <class Run>
std::function<void()> in_form(BaselineForm form, const Run& run) {
  const auto as_written = [run] { run(std::false_type{}); };
  const auto vector = [run] { run(std::true_type{}); };
  if (form == BaselineForm::as_written) return as_written;
  if (form == BaselineForm::vector) return vector;
  const auto seconds = [](const auto& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  as_written();
  vector();
  double best_as_written = seconds(as_written), best_vector = seconds(vector);
  for (int r = 1; r < 3; ++r) {
    best_as_written = std::min(best_as_written, seconds(as_written));
    best_vector = std::min(best_vector, seconds(vector));
  }
  if (best_vector < best_as_written) return vector;
  return as_written;
}

// The mesh baselines walk a field with levels as contiguous columns (vertical-fastest) or, in
// their blocks, as contiguous planes of one level (horizontal-fastest), as make_instance builds
// them: a field whose stride along the layout's fastest dim is not 1 (a view with other strides)
// is refused when bound, not read at the wrong points.
template <class T>
void require_unit_stride(const View<T>& v, const MeshSizes& n, const char* program, const char* field) {
  const int fastest = n.kfast ? 1 : 0;
  if (v.s[fastest] != 1)
    throw ArgumentError(fmt::format("baseline {}: field '{}' has {} stride {}, expected 1 ({})", program, field,
                                    n.kfast ? "vertical" : "horizontal", v.s[fastest],
                                    n.kfast ? "vertical_fastest" : "horizontal_fastest"));
}

// fvm_nabla: zavg = 0.5 (pp(E2V[0]) + pp(E2V[1])) per edge; pnabla_x = sum_V2E(zavg S_x sign) / vol.
// Vertical-fastest, fused: the edge average is computed inside the vertex loop (no edge array),
// and since every edge of V2E(v) has v as one end, the sum reads v's own column once plus one
// column per neighbour vertex (7 streams instead of 12; a + b == b + a). The row's coefficients
// are hoisted out of the level loop and folded: (zavg S) sign == zavg (S sign) bit for bit,
// because multiplying by an orientation sign of +-1 is exact (checked when bound). The 0.5 stays
// with the sum: 0.5 (a + b) is inexact where a + b is a subnormal with an odd last bit, so folding
// it into the weight would change those results (tests/bench: FvmNablaIsExactWhereEdgeSumsAreSubnormal).
std::function<void()> bind_fvm_nabla(examples::ExampleInstance& inst, BaselineForm /*every loop forced: one form*/) {
  const auto pp = view<const double>(inst, "pp", 2);
  const auto sx = view<const double>(inst, "S_x", 1), sy = view<const double>(inst, "S_y", 1);
  const auto sign = view<const double>(inst, "sign", 2);
  const auto vol = view<const double>(inst, "vol", 1);
  const auto px = view<double>(inst, "pnabla_x", 2), py = view<double>(inst, "pnabla_y", 2);
  const std::int32_t* e2v = table(inst, "E2V").data.data();
  const std::int32_t* v2e = table(inst, "V2E").data.data();
  const MeshSizes n = mesh_sizes(inst, "n_vertices");
  for (int v = 0; v < n.n; ++v)
    for (int q = 0; q < 6; ++q) {
      const std::int32_t e = v2e[v * 6 + q];
      if (e < 0) continue;
      if (e2v[2 * e] != v && e2v[2 * e + 1] != v)
        throw ArgumentError(fmt::format("baseline fvm_nabla: edge {} of V2E({}) does not end at vertex {}", e, v, v));
      const double s = sign.d[sign.at(v, q)];
      if (s != 1.0 && s != -1.0)
        throw ArgumentError(fmt::format("baseline fvm_nabla: sign({}, {}) = {}, expected an orientation +-1", v, q, s));
    }
  require_unit_stride(pp, n, "fvm_nabla", "pp");
  require_unit_stride(px, n, "fvm_nabla", "pnabla_x");
  require_unit_stride(py, n, "fvm_nabla", "pnabla_y");
  if (n.kfast) {
    return [=] {
#pragma omp parallel for schedule(static)
      for (int v = 0; v < n.n; ++v) {
        const double* nb[6];
        double cx[6], cy[6];
        int m = 0;
        for (int q = 0; q < 6; ++q) {
          const std::int32_t e = v2e[v * 6 + q];
          if (e < 0) continue;
          const std::int32_t a = e2v[2 * e], b = e2v[2 * e + 1];
          nb[m] = pp.ptr(a == v ? b : a, 0);
          const double s = sign.d[sign.at(v, q)];
          cx[m] = sx.d[sx.at(e)] * s;
          cy[m] = sy.d[sy.at(e)] * s;
          ++m;
        }
        const double w = vol.d[vol.at(v)];
        const double* __restrict self = pp.ptr(v, 0);
        double* __restrict ox = px.ptr(v, 0);
        double* __restrict oy = py.ptr(v, 0);
        if (m == 6) {
          const double *__restrict p0 = nb[0], *__restrict p1 = nb[1], *__restrict p2 = nb[2];
          const double *__restrict p3 = nb[3], *__restrict p4 = nb[4], *__restrict p5 = nb[5];
#pragma omp simd
          for (int k = 0; k < n.nk; ++k) {
            const double c = self[k];
            const double z0 = 0.5 * (c + p0[k]), z1 = 0.5 * (c + p1[k]), z2 = 0.5 * (c + p2[k]);
            const double z3 = 0.5 * (c + p3[k]), z4 = 0.5 * (c + p4[k]), z5 = 0.5 * (c + p5[k]);
            ox[k] = ((((((0.0 + z0 * cx[0]) + z1 * cx[1]) + z2 * cx[2]) + z3 * cx[3]) + z4 * cx[4]) + z5 * cx[5]) / w;
            oy[k] = ((((((0.0 + z0 * cy[0]) + z1 * cy[1]) + z2 * cy[2]) + z3 * cy[3]) + z4 * cy[4]) + z5 * cy[5]) / w;
          }
        } else {
          for (int k = 0; k < n.nk; ++k) {
            double ax = 0.0, ay = 0.0;
            for (int q = 0; q < m; ++q) {
              const double z = 0.5 * (self[k] + nb[q][k]);
              ax += z * cx[q];
              ay += z * cy[q];
            }
            ox[k] = ax / w;
            oy[k] = ay / w;
          }
        }
      }
    };
  }
  // Per block: each slot's far vertex (the vertex itself where the edge is missing) and folded weights.
  return [=] {
    for_each_block(n.n, [&](int first, int count) {
      std::int32_t far[6][mesh_block];
      bool has[6][mesh_block];
      double cx[6][mesh_block], cy[6][mesh_block], w[mesh_block];
      bool full = true;
      for (int i = 0; i < count; ++i) {
        const int v = first + i;
        for (int q = 0; q < 6; ++q) {
          const std::int32_t e = v2e[v * 6 + q];
          has[q][i] = e >= 0;
          full &= has[q][i];
          far[q][i] = e < 0 ? v : e2v[2 * e] == v ? e2v[2 * e + 1] : e2v[2 * e];
          const double s = sign.d[sign.at(v, q)];
          cx[q][i] = e < 0 ? 0.0 : sx.d[sx.at(e)] * s;
          cy[q][i] = e < 0 ? 0.0 : sy.d[sy.at(e)] * s;
        }
        w[i] = vol.d[vol.at(v)];
      }
      for (int k = 0; k < n.nk; ++k) {
        const double* __restrict p = pp.ptr(0, k);
        double* __restrict ox = px.ptr(first, k);
        double* __restrict oy = py.ptr(first, k);
        if (full) {
#pragma omp simd
          for (int i = 0; i < count; ++i) {
            const double c = p[first + i];
            const double z0 = 0.5 * (c + p[far[0][i]]), z1 = 0.5 * (c + p[far[1][i]]), z2 = 0.5 * (c + p[far[2][i]]);
            const double z3 = 0.5 * (c + p[far[3][i]]), z4 = 0.5 * (c + p[far[4][i]]), z5 = 0.5 * (c + p[far[5][i]]);
            ox[i] = ((((((0.0 + z0 * cx[0][i]) + z1 * cx[1][i]) + z2 * cx[2][i]) + z3 * cx[3][i]) + z4 * cx[4][i]) +
                     z5 * cx[5][i]) / w[i];
            oy[i] = ((((((0.0 + z0 * cy[0][i]) + z1 * cy[1][i]) + z2 * cy[2][i]) + z3 * cy[3][i]) + z4 * cy[4][i]) +
                     z5 * cy[5][i]) / w[i];
          }
        } else {
#pragma omp simd
          for (int i = 0; i < count; ++i) {
            double ax = 0.0, ay = 0.0;
#pragma GCC unroll 6
            for (int q = 0; q < 6; ++q) {
              const double z = 0.5 * (p[first + i] + p[far[q][i]]);
              ax = has[q][i] ? ax + z * cx[q][i] : ax;
              ay = has[q][i] ? ay + z * cy[q][i] : ay;
            }
            ox[i] = ax / w[i];
            oy[i] = ay / w[i];
          }
        }
      }
    });
  };
}

// nabla4: per edge, weighted sums of the four E2C2V vertices' (u, v); see the program.
std::function<void()> bind_nabla4(examples::ExampleInstance& inst, BaselineForm form) {
  const auto uv = view<const double>(inst, "u_vert", 2), vv = view<const double>(inst, "v_vert", 2);
  const auto twu = view<const double>(inst, "tang_weight_u", 2), twv = view<const double>(inst, "tang_weight_v", 2);
  const auto nwu = view<const double>(inst, "norm_weight_u", 2), nwv = view<const double>(inst, "norm_weight_v", 2);
  const auto ze = view<const double>(inst, "z_nabla2_e", 2);
  const auto ivvl = view<const double>(inst, "inv_vert_vert_length", 1);
  const auto ipel = view<const double>(inst, "inv_primal_edge_length", 1);
  const auto out = view<double>(inst, "z_nabla4_e2", 2);
  const std::int32_t* e2c2v = table(inst, "E2C2V").data.data();
  const MeshSizes n = mesh_sizes(inst, "n_edges");
  require_unit_stride(uv, n, "nabla4", "u_vert");
  require_unit_stride(vv, n, "nabla4", "v_vert");
  require_unit_stride(ze, n, "nabla4", "z_nabla2_e");
  require_unit_stride(out, n, "nabla4", "z_nabla4_e2");
  if (n.kfast)
    return [=] {
#pragma omp parallel for schedule(static)
      for (int e = 0; e < n.n; ++e) {
        const double* pu[4];
        const double* pv[4];
        double tu[4], tv[4], nu[4], nv[4];
        int m = 0;
        for (int q = 0; q < 4; ++q) {
          const std::int32_t vx = e2c2v[e * 4 + q];
          if (vx < 0) continue;
          pu[m] = uv.ptr(vx, 0);
          pv[m] = vv.ptr(vx, 0);
          tu[m] = twu.d[twu.at(e, q)];
          tv[m] = twv.d[twv.at(e, q)];
          nu[m] = nwu.d[nwu.at(e, q)];
          nv[m] = nwv.d[nwv.at(e, q)];
          ++m;
        }
        const double l1 = ivvl.d[ivvl.at(e)], l2 = ipel.d[ipel.at(e)];
        const double vvl2 = l1 * l1, pel2 = l2 * l2;
        const double* __restrict z = ze.ptr(e, 0);
        double* __restrict o = out.ptr(e, 0);
        auto body = [&](int k, int count) {
          double tang = 0.0, norm = 0.0;
          for (int q = 0; q < count; ++q) {
            const double u = pu[q][k], v = pv[q][k];
            tang += u * tu[q] + v * tv[q];
            norm += u * nu[q] + v * nv[q];
          }
          const double twice = 2.0 * z[k];
          return 4.0 * ((norm - twice) * vvl2 + (tang - twice) * pel2);
        };
        if (m == 4) {
#pragma omp simd
          for (int k = 0; k < n.nk; ++k) o[k] = body(k, 4);
        } else {
          for (int k = 0; k < n.nk; ++k) o[k] = body(k, m);
        }
      }
    };
  return in_form(form, [=](auto vector_form) {
    constexpr bool vector = decltype(vector_form)::value;
    for_each_block(n.n, [&](int first, int count) {
      std::int32_t at[4][mesh_block];
      bool has[4][mesh_block];
      double tu[4][mesh_block], tv[4][mesh_block], nu[4][mesh_block], nv[4][mesh_block];
      double vvl2[mesh_block], pel2[mesh_block];
      bool full = true;
      for (int i = 0; i < count; ++i) {
        const int e = first + i;
        for (int q = 0; q < 4; ++q) {
          const std::int32_t vx = e2c2v[e * 4 + q];
          has[q][i] = vx >= 0;
          full &= has[q][i];
          at[q][i] = vx < 0 ? 0 : vx;  // a stand-in vertex
          tu[q][i] = twu.d[twu.at(e, q)];
          tv[q][i] = twv.d[twv.at(e, q)];
          nu[q][i] = nwu.d[nwu.at(e, q)];
          nv[q][i] = nwv.d[nwv.at(e, q)];
        }
        const double l1 = ivvl.d[ivvl.at(e)], l2 = ipel.d[ipel.at(e)];
        vvl2[i] = l1 * l1;
        pel2[i] = l2 * l2;
      }
      for (int k = 0; k < n.nk; ++k) {
        const double* __restrict pu = uv.ptr(0, k);
        const double* __restrict pv = vv.ptr(0, k);
        const double* __restrict z = ze.ptr(first, k);
        double* __restrict o = out.ptr(first, k);
        auto body = [&](int i, bool select) {
          double tang = 0.0, norm = 0.0;
#pragma GCC unroll 4
          for (int q = 0; q < 4; ++q) {
            const double u = pu[at[q][i]], v = pv[at[q][i]];
            const bool take = !select || has[q][i];
            tang = take ? tang + (u * tu[q][i] + v * tv[q][i]) : tang;
            norm = take ? norm + (u * nu[q][i] + v * nv[q][i]) : norm;
          }
          const double twice = 2.0 * z[i];
          return 4.0 * ((norm - twice) * vvl2[i] + (tang - twice) * pel2[i]);
        };
        if (full)
          block_elements<vector>(count, [&](int i) { o[i] = body(i, false); });
        else
          block_elements<vector>(count, [&](int i) { o[i] = body(i, true); });
      }
    });
  });
}

// c2e2co_sum: out = sum over C2E2CO (self first) of in(neighbour) * weights.
std::function<void()> bind_c2e2co_sum(examples::ExampleInstance& inst, BaselineForm form) {
  const auto in = view<const double>(inst, "in", 2);
  const auto w = view<const double>(inst, "weights", 2);
  const auto out = view<double>(inst, "out", 2);
  const std::int32_t* c2e2co = table(inst, "C2E2CO").data.data();
  const MeshSizes n = mesh_sizes(inst, "n_cells");
  require_unit_stride(in, n, "c2e2co_sum", "in");
  require_unit_stride(out, n, "c2e2co_sum", "out");
  if (n.kfast)
    return [=] {
#pragma omp parallel for schedule(static)
      for (int c = 0; c < n.n; ++c) {
        const double* p[4];
        double wt[4];
        int m = 0;
        for (int q = 0; q < 4; ++q) {
          const std::int32_t nb = c2e2co[c * 4 + q];
          if (nb < 0) continue;
          p[m] = in.ptr(nb, 0);
          wt[m] = w.d[w.at(c, q)];
          ++m;
        }
        double* __restrict o = out.ptr(c, 0);
        if (m == 4) {
          const double *__restrict p0 = p[0], *__restrict p1 = p[1], *__restrict p2 = p[2], *__restrict p3 = p[3];
#pragma omp simd
          for (int k = 0; k < n.nk; ++k) o[k] = (((0.0 + p0[k] * wt[0]) + p1[k] * wt[1]) + p2[k] * wt[2]) + p3[k] * wt[3];
        } else {
          for (int k = 0; k < n.nk; ++k) {
            double acc = 0.0;
            for (int q = 0; q < m; ++q) acc += p[q][k] * wt[q];
            o[k] = acc;
          }
        }
      }
    };
  return in_form(form, [=](auto vector_form) {
    constexpr bool vector = decltype(vector_form)::value;
    for_each_block(n.n, [&](int first, int count) {
      std::int32_t at[4][mesh_block];
      bool has[4][mesh_block];
      double wt[4][mesh_block];
      bool full = true;
      for (int i = 0; i < count; ++i)
        for (int q = 0; q < 4; ++q) {
          const std::int32_t nb = c2e2co[(first + i) * 4 + q];
          has[q][i] = nb >= 0;
          full &= has[q][i];
          at[q][i] = nb < 0 ? first + i : nb;
          wt[q][i] = w.d[w.at(first + i, q)];
        }
      for (int k = 0; k < n.nk; ++k) {
        const double* __restrict p = in.ptr(0, k);
        double* __restrict o = out.ptr(first, k);
        if (full) {
          block_elements<vector>(count, [&](int i) {
            o[i] = (((0.0 + p[at[0][i]] * wt[0][i]) + p[at[1][i]] * wt[1][i]) + p[at[2][i]] * wt[2][i]) +
                   p[at[3][i]] * wt[3][i];
          });
        } else {
          block_elements<vector>(count, [&](int i) {
            double acc = 0.0;
#pragma GCC unroll 4
            for (int q = 0; q < 4; ++q) acc = has[q][i] ? acc + p[at[q][i]] * wt[q][i] : acc;
            o[i] = acc;
          });
        }
      }
    });
  });
}

// diffusion_chain: out = u + dt * sum_V2E(((u(E2V[1]) - u(E2V[0])) inv_len) sign), the edge
// gradient recomputed per vertex (it is two loads and a subtraction: cheaper than a round trip).
std::function<void()> bind_diffusion_chain(examples::ExampleInstance& inst, BaselineForm form) {
  const auto u = view<const double>(inst, "u", 2);
  const auto inv_len = view<const double>(inst, "inv_len", 1);
  const auto sign = view<const double>(inst, "sign", 2);
  const auto out = view<double>(inst, "out", 2);
  const double dt = real_scalar(inst, "dt");
  const std::int32_t* e2v = table(inst, "E2V").data.data();
  const std::int32_t* v2e = table(inst, "V2E").data.data();
  const MeshSizes n = mesh_sizes(inst, "n_vertices");
  require_unit_stride(u, n, "diffusion_chain", "u");
  require_unit_stride(out, n, "diffusion_chain", "out");
  if (n.kfast)
    return [=] {
#pragma omp parallel for schedule(static)
      for (int v = 0; v < n.n; ++v) {
        const double* p0[6];
        const double* p1[6];
        double wt[6], sg[6];
        int m = 0;
        for (int q = 0; q < 6; ++q) {
          const std::int32_t e = v2e[v * 6 + q];
          if (e < 0) continue;
          p0[m] = u.ptr(e2v[2 * e], 0);
          p1[m] = u.ptr(e2v[2 * e + 1], 0);
          wt[m] = inv_len.d[inv_len.at(e)];
          sg[m] = sign.d[sign.at(v, q)];
          ++m;
        }
        const double* __restrict self = u.ptr(v, 0);
        double* __restrict o = out.ptr(v, 0);
        if (m == 6) {
#pragma omp simd
          for (int k = 0; k < n.nk; ++k) {
            double acc = 0.0;
#pragma GCC unroll 6
            for (int q = 0; q < 6; ++q) acc += ((p1[q][k] - p0[q][k]) * wt[q]) * sg[q];
            o[k] = self[k] + dt * acc;
          }
        } else {
          for (int k = 0; k < n.nk; ++k) {
            double acc = 0.0;
            for (int q = 0; q < m; ++q) acc += ((p1[q][k] - p0[q][k]) * wt[q]) * sg[q];
            o[k] = self[k] + dt * acc;
          }
        }
      }
    };
  // Per block: each slot's two vertices (the vertex itself where the edge is missing) and weights.
  return in_form(form, [=](auto vector_form) {
    constexpr bool vector = decltype(vector_form)::value;
    for_each_block(n.n, [&](int first, int count) {
      std::int32_t a0[6][mesh_block], a1[6][mesh_block];
      bool has[6][mesh_block];
      double wt[6][mesh_block], sg[6][mesh_block];
      bool full = true;
      for (int i = 0; i < count; ++i) {
        const int v = first + i;
        for (int q = 0; q < 6; ++q) {
          const std::int32_t e = v2e[v * 6 + q];
          has[q][i] = e >= 0;
          full &= has[q][i];
          a0[q][i] = e < 0 ? v : e2v[2 * e];
          a1[q][i] = e < 0 ? v : e2v[2 * e + 1];
          wt[q][i] = e < 0 ? 0.0 : inv_len.d[inv_len.at(e)];
          sg[q][i] = sign.d[sign.at(v, q)];
        }
      }
      for (int k = 0; k < n.nk; ++k) {
        const double* __restrict p = u.ptr(0, k);
        double* __restrict o = out.ptr(first, k);
        if (full) {
          block_elements<vector>(count, [&](int i) {
            double acc = 0.0;
#pragma GCC unroll 6
            for (int q = 0; q < 6; ++q) acc += ((p[a1[q][i]] - p[a0[q][i]]) * wt[q][i]) * sg[q][i];
            o[i] = p[first + i] + dt * acc;
          });
        } else {
#pragma omp simd
          for (int i = 0; i < count; ++i) {
            double acc = 0.0;
#pragma GCC unroll 6
            for (int q = 0; q < 6; ++q) acc = has[q][i] ? acc + ((p[a1[q][i]] - p[a0[q][i]]) * wt[q][i]) * sg[q][i] : acc;
            o[i] = p[first + i] + dt * acc;
          }
        }
      }
    });
  });
}

using Binder = std::function<void()> (*)(examples::ExampleInstance&, BaselineForm);

struct Entry {
  const char* name;
  Binder bind;
};
constexpr Entry entries[] = {
    {"laplacian", bind_laplacian},   {"lap_of_lap", bind_lap_of_lap},       {"hdiff", bind_hdiff},
    {"vadv", bind_vadv},             {"fvm_nabla", bind_fvm_nabla},         {"nabla4", bind_nabla4},
    {"c2e2co_sum", bind_c2e2co_sum}, {"vertical_interp", bind_vertical_interp},
    {"masked_update", bind_masked_update}, {"diffusion_chain", bind_diffusion_chain},
};

}  // namespace

bool has_baseline(const std::string& program, Layout /*layout*/) {
  for (const auto& e : entries)
    if (program == e.name) return true;  // every baseline handles both layouts
  return false;
}

std::function<void()> bind_baseline(const std::string& program, examples::ExampleInstance& inst, BaselineForm form) {
  if (inst.fields.empty()) throw ArgumentError(fmt::format("baseline {}: the instance has no fields", program));
  for (const auto& e : entries)
    if (program == e.name) return e.bind(inst, form);
  throw ArgumentError(fmt::format("no hand-written baseline for program '{}'", program));
}

void copy_kernel(const double* in, double* out, std::int64_t n) {
  const double* __restrict src = in;
  double* __restrict dst = out;
#pragma omp parallel for simd schedule(static)
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
}

}  // namespace fieldflow::bench
