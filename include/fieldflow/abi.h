/* The C ABI between fieldflow's runtime and generated program modules (JIT- or AOT-built alike).
 * Deliberately tiny: the JIT compiles it on every cache miss. A module exports
 *   int32_t ff_abi_version(void);              returns FF_ABI_VERSION
 *   int32_t ff_run(const ff_call* call);       runs every kernel in order; 0 or an ff_error code
 * The runtime fills ff_call: one ff_buffer per field parameter (by parameter index) followed by
 * one per transient, tables and scalars by parameter index, and each kernel's loop box.
 * A CUDA module's kernels are __global__ functions taking their parameter words (a struct of
 * ff_word, by value: since ABI 8), then int64_t y0 and int64_t z0, the first rows along y and z of
 * the launch's piece of the grid (since ABI 6), each twice: with 64-bit indexing, and with 32-bit
 * indexing under the name ending in `_i32`, which the runtime launches when ff_fits_32bit_indexing
 * says the call allows it (since ABI 7). A CPU module's element-block loops of horizontal-fastest
 * mesh kernels come in a scalar and a vector form, and ff_call::loop_form picks one (since ABI 9). */
#ifndef FIELDFLOW_ABI_H
#define FIELDFLOW_ABI_H
#if defined(__CUDACC_RTC__)
/* NVRTC (CUDA modules) has no C library headers. The widths are those of every CUDA platform;
 * only the sizes matter to the structs' layout, which the host compiles with the real types. */
typedef int int32_t;
typedef long long int64_t;
namespace std {
typedef ::int32_t int32_t;
typedef ::int64_t int64_t;
}
#else
#include <stdint.h>
#endif
/* The scalar helpers below run in CUDA kernels too (codegen/cuda). */
#if defined(__CUDACC__)
#define FF_HD __host__ __device__
#else
#define FF_HD
#endif

#define FF_ABI_VERSION 9
#define FF_MAX_DIMS 8

typedef struct ff_buffer {
  void* data;
  int64_t offset;                /* element offset of the all-zero index: -sum(origin * stride) */
  int64_t strides[FF_MAX_DIMS];  /* elements, per dimension in canonical order */
  int64_t lo[FF_MAX_DIMS];       /* the index box the buffer covers, for in-kernel checks */
  int64_t hi[FF_MAX_DIMS];
  int64_t thread_stride;         /* column-local transients: elements between threads' blocks of
                                    columns, each laid out level by level (since ABI 5) */
} ff_buffer;

typedef struct ff_table {
  const int32_t* data;     /* entry (i, n) at data[i * source_stride + n * neighbor_stride], -1 = missing */
  int64_t n_source;
  int64_t source_stride;   /* entries; max_neighbors for a row-major (C) table, 1 for Fortran order */
  int64_t neighbor_stride; /* entries; 1 for a row-major table, n_source for Fortran order */
} ff_table;

typedef struct ff_scalar {
  int64_t i; /* bool and integer scalars */
  double f;  /* float scalars */
} ff_scalar;

enum ff_error {
  ff_ok = 0,
  ff_error_dynamic_offset = 1,   /* a dynamic offset (vertical or horizontal) left the field's extent */
  ff_error_missing_neighbor = 2, /* a fixed-index neighbour shift hit a skip value (-1) */
};

/* How a CPU module runs the level loops of its horizontal-fastest element blocks (where elements
 * of one kind run together, their neighbour loads indirect): scalar, or forced into vector form,
 * whose indirect loads become gathers. The results are bit for bit the same (each element's
 * arithmetic is unchanged, and nothing is reduced across elements but error flags); which is faster
 * depends on the machine's gathers and the kernel (the runtime times both: LoopForm::tuned). */
enum ff_loop_form {
  ff_loop_scalar = 0,
  ff_loop_vector = 1,
};

/* One 8-byte word of a CUDA kernel's parameters (since ABI 8): kernels take the values of ff_call
 * they read, word by word, by value (codegen::CudaLaunch::params says which), so a thread reads them from
 * the constant bank instead of loading a descriptor from device memory, and a call uploads none. */
typedef union ff_word {
  void* p;
  int64_t i;
  double f;
} ff_word;

typedef struct ff_call {
  const ff_buffer* buffers;
  const ff_table* tables;
  const ff_scalar* scalars;
  const int64_t* domains; /* per kernel: FF_MAX_DIMS x (lo, hi) over its loop dims, canonical order */
  int32_t* error;         /* first failed in-kernel check (ff_error), written atomically */
  int32_t num_threads;    /* > 0 */
  int64_t parallel_threshold; /* a kernel (or column group) starts threads only above this many points */
  int32_t loop_form;          /* ff_loop_form, CPU modules (since ABI 9) */
} ff_call;

#ifdef __cplusplus
/* Scalar semantics shared by the reference executor and generated code, so both compute the
 * same bits: integer arithmetic wraps, integer division by zero is 0 (no trap inside a model's
 * time loop), minimum/maximum are std::min/std::max (the second operand wins only if strictly
 * smaller/larger, the form compilers turn into min/max instructions). */
namespace fieldflow::abi {
/* Integer +, - and * wrap around (two's complement), as NumPy's and GT4Py's fixed-width integers
 * do, where C++'s signed overflow is undefined behaviour (and lets the optimizer assume it never
 * happens). Computed in the unsigned type of the same width: the same instructions, vectorised
 * alike; the conversion back is modular since C++20. Floats use the plain operators. */
template <int Bytes> struct ff_unsigned_of;
template <> struct ff_unsigned_of<4> { typedef unsigned int type; };
template <> struct ff_unsigned_of<8> { typedef unsigned long long type; };
template <class T> FF_HD inline T ff_iadd(T a, T b) {
  typedef typename ff_unsigned_of<sizeof(T)>::type U;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T> FF_HD inline T ff_isub(T a, T b) {
  typedef typename ff_unsigned_of<sizeof(T)>::type U;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T> FF_HD inline T ff_imul(T a, T b) {
  typedef typename ff_unsigned_of<sizeof(T)>::type U;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}
template <class T> FF_HD inline T ff_neg(T a) {
  if constexpr (static_cast<T>(0.5) == 0) return ff_isub(T(0), a);  // -INT_MIN wraps to INT_MIN
  else return -a;
}
template <class T> FF_HD inline T ff_div(T a, T b) {
  if constexpr (static_cast<T>(0.5) == 0) {  // integers
    if (b == 0) return 0;
    if (b == -1) return ff_neg(a);  // INT_MIN / -1 wraps
    return static_cast<T>(a / b);
  } else {
    return a / b;
  }
}
template <class T> FF_HD inline T ff_min(T a, T b) { return b < a ? b : a; }
template <class T> FF_HD inline T ff_max(T a, T b) { return a < b ? b : a; }
template <class T> FF_HD inline T ff_iabs(T a) { return a < 0 ? ff_neg(a) : a; } /* integers; floats use std::abs */
/* Float to integer (astype): truncation toward zero; NaN gives 0 and values beyond the integer
 * type's range saturate, where a plain cast would be undefined behaviour. */
template <class I, class F> FF_HD inline I ff_to_int(F x) {
  constexpr I lowest = static_cast<I>(static_cast<unsigned long long>(1) << (8 * sizeof(I) - 1));
  constexpr I highest = static_cast<I>(-(lowest + 1));
  constexpr F bound = -static_cast<F>(lowest); /* 2^(bits - 1): exact in float and double */
  if (!(x == x)) return 0;
  if (x >= bound) return highest;
  if (x <= -bound) return lowest;
  return static_cast<I>(x);
}
/* Hides an integer from the optimizer. Compilers fold (double)(int)x into a truncation of x, which
 * keeps the sign of -0.25 where the round trip through the integer gives +0; generated code wraps
 * the integer of such a round trip (only there: it stops vectorisation of the loop around it). */
template <class T> FF_HD inline T ff_opaque(T v) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
  __asm__("" : "+r"(v));
#endif
  return v;
}
/* std::pow with the exponent hidden from constant folding: compilers turn pow(x, 2.0) into x * x
 * and pow(x, 0.5) into sqrt(x), which differ from pow (the reference) by an ulp for some x. pow is
 * a library call either way, so the barrier costs nothing measurable. */
template <class T> FF_HD inline T ff_pow(T a, T b) {
#if defined(__CUDA_ARCH__)
  return static_cast<T>(::pow(a, b)); /* CUDA's pow: not the host's libm, see docs/cuda.md */
#else
#if defined(__GNUC__)
  __asm__("" : "+m"(b));
#endif
  if constexpr (sizeof(T) == sizeof(float)) return __builtin_powf(a, b); /* std::pow's own builtins */
  else return __builtin_pow(a, b);
#endif
}
/* The argument of a libm call (exp, sin, tanh, ...), hidden from the optimizer: GCC folds such calls
 * on constants exactly (MPFR), where libm may be an ulp off, and rewrites some compositions even
 * without -ffast-math (sin(atan(x)) becomes x / sqrt(x * x + 1)). The reference calls libm on each
 * value, so generated code must too. These calls are not vectorised anyway; the barrier is free. */
template <class T> FF_HD inline T ff_libm_arg(T v) {
#if defined(__GNUC__) && !defined(__CUDA_ARCH__)
  __asm__("" : "+m"(v));
#endif
  return v;
}
/* Integer floor division and modulo with Python's (GT4Py's) semantics: the quotient rounds toward
 * minus infinity and the remainder has the sign of the divisor, so a == b * (a // b) + a % b. By
 * zero both give 0, like ff_div; INT_MIN // -1 wraps to INT_MIN and INT_MIN % -1 is 0 (C++'s own
 * INT_MIN % -1 is undefined, hence the early return). */
template <class T> FF_HD inline T ff_floordiv(T a, T b) {
  if (b == 0) return 0;
  if (b == -1) return ff_neg(a);
  const T q = static_cast<T>(a / b), r = static_cast<T>(a % b);
  return (r != 0 && (r < 0) != (b < 0)) ? static_cast<T>(q - 1) : q;
}
template <class T> FF_HD inline T ff_mod(T a, T b) {
  if (b == 0 || b == -1) return 0;
  const T r = static_cast<T>(a % b);
  return (r != 0 && (r < 0) != (b < 0)) ? static_cast<T>(r + b) : r;
}
/* Integer power by squaring; overflow wraps (computed in 64-bit unsigned, whose low bits are the
 * wrapped result for int32 too). A negative exponent gives the integer part of 1 / a^-b, as ff_div
 * would: 1 for a == 1, +-1 for a == -1, 0 otherwise (also for a == 0, "division by zero"). */
template <class T> FF_HD inline T ff_ipow(T a, T b) {
  if (b < 0) return a == 1 ? T(1) : a == -1 ? static_cast<T>((b & 1) ? -1 : 1) : T(0);
  unsigned long long result = 1, base = static_cast<unsigned long long>(a);
  for (unsigned long long e = static_cast<unsigned long long>(b); e != 0; e >>= 1) {
    if (e & 1) result *= base;
    base *= base;
  }
  return static_cast<T>(result);
}
#if !defined(__CUDACC_RTC__)
/* Whether a call's CUDA kernels may run their 32-bit entry points (host code: the CUDA runtime and
 * its emulation). A 64-bit index costs two instructions per add and several per multiply on a GPU,
 * where a stencil's point does little else. With `max_shift` the largest constant offset of any
 * access of the program (CudaLaunch::max_shift), two conditions:
 *  - every kernel's box and every buffer's box within +-2^29 along each dimension: a coordinate, a
 *    box's extent and a thread's point past its box's end (by less than a block or a run of
 *    levels) are then int32 values;
 *  - per buffer, |offset| + sum over its dimensions of (max(|lo|, |hi|) + 2 max_shift) |stride|
 *    below 2^31. Generated code computes an element's offset as a sum of terms `coordinate *
 *    stride` and `shift * stride` (a stencil's row and its shifts), each coordinate within
 *    max_shift of the buffer's box (the point it reads is in the box): every partial sum is then
 *    an int32 value. Signed, so that the compiler may fold a constant shift into a load's
 *    immediate offset (it may not where offsets wrap).
 * Conservative where a bound would need more than 64-bit arithmetic to decide. A dimension with an
 * empty extent is skipped: a buffer with an empty box is never read (nor is one a buffer lacks,
 * whose lo and hi are 0). */
inline bool ff_fits_32bit_indexing(const ff_call* call, int buffers, int kernels, int64_t max_shift) {
  const int64_t box = int64_t(1) << 29, offsets = (int64_t(1) << 31) - 1;
  const auto magnitude = [](int64_t v) { return v < 0 ? -v : v; };
  if (max_shift < 0 || max_shift > box) return false;
  for (int i = 0; i < 2 * FF_MAX_DIMS * kernels; ++i)
    if (call->domains[i] < -box || call->domains[i] > box) return false;
  for (int b = 0; b < buffers; ++b) {
    const ff_buffer* f = &call->buffers[b];
    if (f->offset < -offsets || f->offset > offsets) return false;
    int64_t sum = magnitude(f->offset);
    for (int a = 0; a < FF_MAX_DIMS; ++a) {
      if (f->hi[a] <= f->lo[a]) continue;
      if (f->lo[a] < -box || f->hi[a] > box || f->strides[a] < -offsets || f->strides[a] > offsets) return false;
      const int64_t reach = magnitude(f->lo[a]) > magnitude(f->hi[a]) ? magnitude(f->lo[a]) : magnitude(f->hi[a]);
      sum += (reach + 2 * max_shift) * magnitude(f->strides[a]); /* < 2^31 * 2^31 */
      if (sum > offsets) return false;
    }
  }
  return true;
}
#endif
}  // namespace fieldflow::abi

#if !defined(__CUDACC__)
/* libm for generated CPU code, without <cmath>: parsing <cmath> was half of the compile time of a
 * module (0.28 of about 0.5 s of CPU). Each overload is the compiler builtin that libstdc++'s
 * std:: overload of the same name calls, so the machine code is the same: the builtins of exp, sin,
 * ... are calls of libm's exp, sin, ..., and those of sqrt, floor, fabs, ... single instructions. */
namespace fieldflow::abi::math {
#define FF_MATH_UNARY(name, builtin)                                  \
  inline double name(double x) { return __builtin_##builtin(x); }     \
  inline float name(float x) { return __builtin_##builtin##f(x); }
FF_MATH_UNARY(abs, fabs)
FF_MATH_UNARY(sqrt, sqrt)
FF_MATH_UNARY(cbrt, cbrt)
FF_MATH_UNARY(exp, exp)
FF_MATH_UNARY(log, log)
FF_MATH_UNARY(sin, sin)
FF_MATH_UNARY(cos, cos)
FF_MATH_UNARY(tan, tan)
FF_MATH_UNARY(asin, asin)
FF_MATH_UNARY(acos, acos)
FF_MATH_UNARY(atan, atan)
FF_MATH_UNARY(sinh, sinh)
FF_MATH_UNARY(cosh, cosh)
FF_MATH_UNARY(tanh, tanh)
FF_MATH_UNARY(tgamma, tgamma)
FF_MATH_UNARY(floor, floor)
FF_MATH_UNARY(ceil, ceil)
FF_MATH_UNARY(trunc, trunc)
#undef FF_MATH_UNARY
inline double fmod(double a, double b) { return __builtin_fmod(a, b); }
inline float fmod(float a, float b) { return __builtin_fmodf(a, b); }
template <class T> inline bool isnan(T x) { return __builtin_isnan(x); }
template <class T> inline bool isinf(T x) { return __builtin_isinf(x); }
template <class T> inline bool isfinite(T x) { return __builtin_isfinite(x); }
}  // namespace fieldflow::abi::math
#endif
#endif

#endif /* FIELDFLOW_ABI_H */
