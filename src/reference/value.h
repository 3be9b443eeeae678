#pragma once
// Typed scalar arithmetic of the reference executor. Each dtype computes in its own C++ type
// (float32 in float, with std:: math overloads) and shares the integer/min/max helpers of
// fieldflow/abi.h with generated code, so results match compiled code bit for bit.
#include <cmath>
#include <cstdint>
#include <limits>

#include "fieldflow/abi.h"
#include "fieldflow/field.h"
#include "fieldflow/ir.h"

namespace fieldflow::reference {

template <class T> Scalar apply_unary(ir::UnaryOp op, T x) {
  using ir::UnaryOp;
  if constexpr (std::is_same_v<T, bool>) {
    return Scalar(!x);  // only logical_not is typed for bool
  } else if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case UnaryOp::neg: return Scalar(abi::ff_neg(x));
      case UnaryOp::abs: return Scalar(abi::ff_iabs(x));
      default: break;
    }
    return Scalar(x);
  } else {
    switch (op) {
      case UnaryOp::neg: return Scalar(static_cast<T>(-x));
      case UnaryOp::abs: return Scalar(std::abs(x));
      case UnaryOp::sqrt: return Scalar(std::sqrt(x));
      case UnaryOp::exp: return Scalar(std::exp(x));
      case UnaryOp::log: return Scalar(std::log(x));
      case UnaryOp::sin: return Scalar(std::sin(x));
      case UnaryOp::cos: return Scalar(std::cos(x));
      case UnaryOp::tan: return Scalar(std::tan(x));
      case UnaryOp::arcsin: return Scalar(std::asin(x));
      case UnaryOp::arccos: return Scalar(std::acos(x));
      case UnaryOp::arctan: return Scalar(std::atan(x));
      case UnaryOp::sinh: return Scalar(std::sinh(x));
      case UnaryOp::cosh: return Scalar(std::cosh(x));
      case UnaryOp::tanh: return Scalar(std::tanh(x));
      case UnaryOp::floor: return Scalar(std::floor(x));
      case UnaryOp::ceil: return Scalar(std::ceil(x));
      case UnaryOp::trunc: return Scalar(std::trunc(x));
      case UnaryOp::isnan: return Scalar(static_cast<bool>(std::isnan(x)));
      case UnaryOp::isinf: return Scalar(static_cast<bool>(std::isinf(x)));
      case UnaryOp::isfinite: return Scalar(static_cast<bool>(std::isfinite(x)));
      case UnaryOp::cbrt: return Scalar(std::cbrt(x));
      case UnaryOp::gamma: return Scalar(std::tgamma(x));
      case UnaryOp::logical_not: break;
    }
    return Scalar(x);
  }
}

template <class T> Scalar apply_binary(ir::BinaryOp op, T a, T b) {
  using ir::BinaryOp;
  switch (op) {
    case BinaryOp::less: return Scalar(a < b);
    case BinaryOp::less_equal: return Scalar(a <= b);
    case BinaryOp::greater: return Scalar(a > b);
    case BinaryOp::greater_equal: return Scalar(a >= b);
    case BinaryOp::equal: return Scalar(a == b);
    case BinaryOp::not_equal: return Scalar(a != b);
    default: break;
  }
  if constexpr (std::is_same_v<T, bool>) {
    return Scalar(op == BinaryOp::logical_and ? (a && b) : op == BinaryOp::logical_or ? (a || b) : (a != b));
  } else {
    switch (op) {
      case BinaryOp::add:
        if constexpr (std::is_integral_v<T>) return Scalar(abi::ff_iadd(a, b));
        else return Scalar(static_cast<T>(a + b));
      case BinaryOp::sub:
        if constexpr (std::is_integral_v<T>) return Scalar(abi::ff_isub(a, b));
        else return Scalar(static_cast<T>(a - b));
      case BinaryOp::mul:
        if constexpr (std::is_integral_v<T>) return Scalar(abi::ff_imul(a, b));
        else return Scalar(static_cast<T>(a * b));
      case BinaryOp::div:
        return Scalar(abi::ff_div(a, b));
      case BinaryOp::minimum: return Scalar(abi::ff_min(a, b));
      case BinaryOp::maximum: return Scalar(abi::ff_max(a, b));
      case BinaryOp::fmod:
        if constexpr (std::is_floating_point_v<T>) return Scalar(std::fmod(a, b));
        break;
      case BinaryOp::power:
        if constexpr (std::is_floating_point_v<T>) return Scalar(abi::ff_pow(a, b));
        else return Scalar(abi::ff_ipow(a, b));
      case BinaryOp::floor_divide:
        if constexpr (std::is_integral_v<T>) return Scalar(abi::ff_floordiv(a, b));
        break;
      case BinaryOp::mod:
        if constexpr (std::is_integral_v<T>) return Scalar(abi::ff_mod(a, b));
        break;
      default: break;
    }
    return Scalar(a);
  }
}

template <class T> T scalar_as(const Scalar& s);
template <> inline bool scalar_as<bool>(const Scalar& s) { return s.as_int() != 0; }
template <> inline std::int32_t scalar_as<std::int32_t>(const Scalar& s) { return static_cast<std::int32_t>(s.as_int()); }
template <> inline std::int64_t scalar_as<std::int64_t>(const Scalar& s) { return s.as_int(); }
template <> inline float scalar_as<float>(const Scalar& s) { return static_cast<float>(s.as_double()); }
template <> inline double scalar_as<double>(const Scalar& s) { return s.as_double(); }

// Calls f.template operator()<T>() with the C++ type of dtype t.
template <class F> auto dispatch(DType t, F&& f) {
  switch (t) {
    case DType::boolean: return f.template operator()<bool>();
    case DType::int32: return f.template operator()<std::int32_t>();
    case DType::int64: return f.template operator()<std::int64_t>();
    case DType::float32: return f.template operator()<float>();
    case DType::float64: break;
  }
  return f.template operator()<double>();
}

}  // namespace fieldflow::reference
