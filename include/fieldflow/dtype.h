#pragma once
// Element types of fields and scalars.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fieldflow {

enum class DType : std::uint8_t { boolean, int32, int64, float32, float64 };

std::string_view to_string(DType t);
DType parse_dtype(std::string_view name);  // throws DTypeError naming the accepted names
std::size_t size_of(DType t);
bool is_integral(DType t);  // int32, int64
bool is_floating(DType t);  // float32, float64
std::string_view cpp_type_name(DType t);  // "double", "std::int32_t", ...

// Maps C++ types to DType for the typed accessors.
template <class T> struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <> struct dtype_of<std::int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_of<std::int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::float64; };
template <class T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace fieldflow
