// The DSL of include/fieldflow/dsl.h from Python: every operator and builtin is the C++ one, so an
// expression built in Python is typed and checked exactly as in C++ (DimensionError, DTypeError
// at construction). fieldflow/_tracing.py drives it from decorated Python functions.
#include <map>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <nanobind/operators.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "fieldflow/errors.h"

namespace fieldflow::python {

std::string python_type_name(nb::handle value) { return nb::cast<std::string>(nb::str(value.type().attr("__name__"))); }

namespace {

// A numpy scalar (np.float32(1), np.int64(3), np.bool_(True)): an object with a dtype and no
// dimensions. Its dtype's name is one of parse_dtype's names ("bool" aside).
std::optional<DType> numpy_scalar_dtype(nb::handle value) {
  if (!nb::hasattr(value, "dtype") || !nb::hasattr(value, "ndim")) return std::nullopt;
  if (nb::cast<int>(value.attr("ndim")) != 0) return std::nullopt;
  return to_dtype(value.attr("dtype"));
}

Scalar numpy_scalar(nb::handle value, DType t) {
  nb::object item = value.attr("item")();
  switch (t) {
    case DType::boolean: return Scalar(nb::cast<bool>(item));
    case DType::int32: return Scalar(nb::cast<std::int32_t>(item));
    case DType::int64: return Scalar(nb::cast<std::int64_t>(item));
    case DType::float32: return Scalar(static_cast<float>(nb::cast<double>(item)));
    case DType::float64: return Scalar(nb::cast<double>(item));
  }
  throw InternalError("unreachable dtype");
}

std::int64_t python_int(nb::handle value) {
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow != 0)
    throw DTypeError(fmt::format("the integer {} does not fit int64", nb::cast<std::string>(nb::str(value))));
  return v;
}

std::vector<Dimension> to_dims(nb::handle dims) {
  std::vector<Dimension> out;
  for (nb::handle d : dims) {
    if (!nb::isinstance<Dimension>(d))
      throw DimensionError(fmt::format("expected a list of Dimension, given an element of type {}", python_type_name(d)));
    out.push_back(nb::cast<Dimension>(d));
  }
  return out;
}

// Local dimensions of the connectivities built from Python, to find a connectivity from the
// reduction axis GT4Py code names (max_over(x, axis=E2VDim)). C++ offers that only for sums.
std::mutex connectivities_mutex;
std::map<std::string, Connectivity>& connectivities_by_local_dim() {
  static std::map<std::string, Connectivity> map;
  return map;
}

Connectivity connectivity_of_axis(nb::handle axis, const char* reduction) {
  if (nb::isinstance<Connectivity>(axis)) return nb::cast<Connectivity>(axis);
  if (!nb::isinstance<Dimension>(axis))
    throw DimensionError(fmt::format("{}: axis must be a local Dimension or a Connectivity, given {}", reduction,
                                     python_type_name(axis)));
  const Dimension d = nb::cast<Dimension>(axis);
  std::lock_guard lock(connectivities_mutex);
  auto it = connectivities_by_local_dim().find(d.name);
  if (d.kind != DimKind::local || it == connectivities_by_local_dim().end())
    throw DimensionError(fmt::format("{}: axis '{}' is a {} dimension, not the local dimension of a Connectivity",
                                     reduction, d.name, to_string(d.kind)));
  return it->second;
}

IndexCondition compare(const Dimension& d, ir::CompareOp op, nb::handle bound) {
  const Expr b = to_expr(bound);
  switch (op) {
    case ir::CompareOp::less: return d < b;
    case ir::CompareOp::less_equal: return d <= b;
    case ir::CompareOp::greater: return d > b;
    case ir::CompareOp::greater_equal: return d >= b;
    case ir::CompareOp::equal: return d == b;
    case ir::CompareOp::not_equal: return d != b;
  }
  throw InternalError("unreachable comparison");
}

using Binary = Expr (*)(const Expr&, const Expr&);

// Python's a op b and b op a (the reflected form, for 2.0 * f) over any operands to_expr takes.
template <Binary op>
void def_binary(nb::class_<Expr>& cls, const char* name, const char* reflected) {
  cls.def(name, [](const Expr& a, nb::handle b) { return op(a, to_expr(b)); }, nb::is_operator());
  if (reflected != nullptr)
    cls.def(reflected, [](const Expr& a, nb::handle b) { return op(to_expr(b), a); }, nb::is_operator());
}

Expr add(const Expr& a, const Expr& b) { return a + b; }
Expr sub(const Expr& a, const Expr& b) { return a - b; }
Expr mul(const Expr& a, const Expr& b) { return a * b; }
Expr div(const Expr& a, const Expr& b) { return a / b; }
Expr mod(const Expr& a, const Expr& b) { return a % b; }
Expr bit_and(const Expr& a, const Expr& b) { return a & b; }
Expr bit_or(const Expr& a, const Expr& b) { return a | b; }
Expr bit_xor(const Expr& a, const Expr& b) { return a ^ b; }
Expr less(const Expr& a, const Expr& b) { return a < b; }
Expr less_equal(const Expr& a, const Expr& b) { return a <= b; }
Expr greater(const Expr& a, const Expr& b) { return a > b; }
Expr greater_equal(const Expr& a, const Expr& b) { return a >= b; }
Expr equal(const Expr& a, const Expr& b) { return a == b; }
Expr not_equal(const Expr& a, const Expr& b) { return a != b; }

void bind_unary_builtins(nb::module_& m) {
  using Unary = Expr (*)(const Expr&);
  const std::pair<const char*, Unary> builtins[] = {
      {"abs", &fieldflow::abs},       {"sqrt", &fieldflow::sqrt},     {"exp", &fieldflow::exp},
      {"log", &fieldflow::log},       {"sin", &fieldflow::sin},       {"cos", &fieldflow::cos},
      {"tan", &fieldflow::tan},       {"arcsin", &fieldflow::arcsin}, {"arccos", &fieldflow::arccos},
      {"arctan", &fieldflow::arctan}, {"sinh", &fieldflow::sinh},     {"cosh", &fieldflow::cosh},
      {"tanh", &fieldflow::tanh},     {"floor", &fieldflow::floor},   {"ceil", &fieldflow::ceil},
      {"trunc", &fieldflow::trunc},   {"isnan", &fieldflow::isnan},   {"isinf", &fieldflow::isinf},
      {"isfinite", &fieldflow::isfinite}, {"cbrt", &fieldflow::cbrt}, {"gamma", &fieldflow::gamma}};
  for (const auto& [name, fn] : builtins)
    m.def(name, [fn](nb::handle x) { return fn(to_expr(x)); }, nb::arg("x"));
  const std::pair<const char*, Binary> binaries[] = {{"minimum", &fieldflow::minimum},
                                                     {"maximum", &fieldflow::maximum},
                                                     {"fmod", &fieldflow::fmod},
                                                     {"power", &fieldflow::power},
                                                     {"floor_divide", &fieldflow::floor_divide}};
  for (const auto& [name, fn] : binaries)
    m.def(name, [fn](nb::handle a, nb::handle b) { return fn(to_expr(a), to_expr(b)); }, nb::arg("a"), nb::arg("b"));
}

std::vector<Expr> to_exprs(nb::handle values) {
  std::vector<Expr> out;
  for (nb::handle v : values) out.push_back(to_expr(v));
  return out;
}

std::vector<Scalar> to_scalars(nb::handle init) {
  std::vector<Scalar> out;
  if (nb::isinstance<nb::tuple>(init) || nb::isinstance<nb::list>(init)) {
    for (nb::handle v : init) out.push_back(to_scalar(v));
  } else {
    out.push_back(to_scalar(init));
  }
  return out;
}

// A scan body written in Python: body(carry, inputs) -> Expr or tuple of Expr.
ScanBody scan_body(nb::callable body) {
  return [body](const Expr& carry, const std::vector<Expr>& inputs) {
    nb::list args;
    for (const Expr& e : inputs) args.append(nb::cast(e));
    return to_expr(body(nb::cast(carry), args));
  };
}

}  // namespace

Expr to_expr(nb::handle value) {
  if (nb::isinstance<Expr>(value)) return nb::cast<Expr>(value);
  if (PyBool_Check(value.ptr())) return Expr(value.ptr() == Py_True);
  if (PyLong_Check(value.ptr())) {
    const std::int64_t v = python_int(value);
    if (v >= INT32_MIN && v <= INT32_MAX) return Expr(static_cast<int>(v));
    return Expr(v);
  }
  if (PyFloat_Check(value.ptr())) return Expr(PyFloat_AsDouble(value.ptr()));
  // A Python tuple of expressions is a tuple value (an operator returning `a, b`).
  if (nb::isinstance<nb::tuple>(value)) return make_tuple(to_exprs(value));
  if (std::optional<DType> t = numpy_scalar_dtype(value)) return Expr::literal(numpy_scalar(value, *t));
  throw DTypeError(fmt::format("expected a field expression or a number, given an object of type {}", python_type_name(value)));
}

Scalar to_scalar(nb::handle value) {
  if (PyBool_Check(value.ptr())) return Scalar(value.ptr() == Py_True);
  if (PyLong_Check(value.ptr())) {
    const std::int64_t v = python_int(value);
    if (v >= INT32_MIN && v <= INT32_MAX) return Scalar(static_cast<std::int32_t>(v));
    return Scalar(v);
  }
  if (PyFloat_Check(value.ptr())) return Scalar(PyFloat_AsDouble(value.ptr()));
  if (std::optional<DType> t = numpy_scalar_dtype(value)) return numpy_scalar(value, *t);
  throw DTypeError(fmt::format("expected a number (bool, int, float or a numpy scalar), given an object of type {}",
                               python_type_name(value)));
}

DType to_dtype(nb::handle value) {
  if (nb::isinstance<DType>(value)) return nb::cast<DType>(value);
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyBool_Type)) return DType::boolean;
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyLong_Type)) return DType::int32;
  if (value.ptr() == reinterpret_cast<PyObject*>(&PyFloat_Type)) return DType::float64;
  std::string name;
  if (nb::isinstance<nb::str>(value)) {
    name = nb::cast<std::string>(value);
  } else {
    // numpy dtypes and scalar types (np.float32, np.dtype("int32"), an array's .dtype).
    try {
      name = nb::cast<std::string>(nb::str(nb::module_::import_("numpy").attr("dtype")(value).attr("name")));
    } catch (const nb::python_error&) {
      throw DTypeError(fmt::format("expected a dtype (fieldflow.float64, numpy.float32, bool, int, float), given {}",
                                   nb::cast<std::string>(nb::repr(value))));
    }
  }
  return parse_dtype(name);
}

void bind_language(nb::module_& m) {
  nb::enum_<DType>(m, "DType")
      .value("bool", DType::boolean)
      .value("int32", DType::int32)
      .value("int64", DType::int64)
      .value("float32", DType::float32)
      .value("float64", DType::float64);

  nb::enum_<DimKind>(m, "DimKind")
      .value("HORIZONTAL", DimKind::horizontal)
      .value("VERTICAL", DimKind::vertical)
      .value("LOCAL", DimKind::local);

  nb::class_<CartesianOffset>(m, "CartesianOffset")
      .def_ro("dim", &CartesianOffset::dim)
      .def_ro("offset", &CartesianOffset::offset)
      .def("__repr__", [](const CartesianOffset& o) { return fmt::format("{}{:+d}", o.dim.name, o.offset); });
  nb::class_<DynamicOffset>(m, "DynamicOffset");
  nb::class_<NeighborOffset>(m, "NeighborOffset")
      .def("__repr__", [](const NeighborOffset& o) { return fmt::format("{}[{}]", o.conn.name, o.index); });
  nb::class_<LocalSlot>(m, "LocalSlot");

  nb::class_<IndexCondition>(m, "IndexCondition")
      .def("__and__", [](const IndexCondition& a, const IndexCondition& b) { return a & b; })
      .def("__or__", [](const IndexCondition& a, const IndexCondition& b) { return a | b; })
      .def("__invert__", [](const IndexCondition& a) { return ~a; })
      .def("__bool__", [](const IndexCondition&) -> bool {
        throw DTypeError("an index condition (such as K == 0) has no truth value while tracing: "
                         "use it in concat_where(condition, a, b)");
      });

  nb::class_<Dimension>(m, "Dimension")
      .def(nb::init<std::string, DimKind>(), nb::arg("name"), nb::arg("kind") = DimKind::horizontal)
      .def_ro("name", &Dimension::name)
      .def_ro("kind", &Dimension::kind)
      .def("__add__", [](const Dimension& d, std::int64_t k) { return d + k; }, nb::is_operator())
      .def("__sub__", [](const Dimension& d, std::int64_t k) { return d - k; }, nb::is_operator())
      .def("__add__", [](const Dimension& d, const Expr& offset) { return d + offset; }, nb::is_operator())
      // Two dimensions compare as axes; a dimension and a bound make an index condition (K == 0).
      .def("__eq__", [](const Dimension& a, const Dimension& b) { return a == b; }, nb::is_operator())
      .def("__ne__", [](const Dimension& a, const Dimension& b) { return !(a == b); }, nb::is_operator())
      .def("__eq__", [](const Dimension& d, nb::handle b) { return compare(d, ir::CompareOp::equal, b); }, nb::is_operator())
      .def("__ne__", [](const Dimension& d, nb::handle b) { return compare(d, ir::CompareOp::not_equal, b); }, nb::is_operator())
      .def("__lt__", [](const Dimension& d, nb::handle b) { return compare(d, ir::CompareOp::less, b); }, nb::is_operator())
      .def("__le__", [](const Dimension& d, nb::handle b) { return compare(d, ir::CompareOp::less_equal, b); }, nb::is_operator())
      .def("__gt__", [](const Dimension& d, nb::handle b) { return compare(d, ir::CompareOp::greater, b); }, nb::is_operator())
      .def("__ge__", [](const Dimension& d, nb::handle b) { return compare(d, ir::CompareOp::greater_equal, b); }, nb::is_operator())
      .def("__hash__", [](const Dimension& d) { return std::hash<std::string>()(d.name); })
      .def("__repr__", [](const Dimension& d) {
        return d.kind == DimKind::horizontal ? fmt::format("Dimension('{}')", d.name)
                                             : fmt::format("Dimension('{}', kind={})", d.name, to_string(d.kind));
      });

  nb::class_<Connectivity>(m, "Connectivity")
      .def("__init__",
           [](Connectivity* self, std::string name, const Dimension& source, const Dimension& target, int max_neighbors) {
             new (self) Connectivity(make_connectivity(std::move(name), source, target, max_neighbors));
             std::lock_guard lock(connectivities_mutex);
             connectivities_by_local_dim()[self->local.name] = *self;
           },
           nb::arg("name"), nb::kw_only(), nb::arg("source"), nb::arg("target"), nb::arg("max_neighbors"))
      .def_ro("name", &Connectivity::name)
      .def_ro("source", &Connectivity::source)
      .def_ro("target", &Connectivity::target)
      .def_ro("local", &Connectivity::local)
      .def_ro("max_neighbors", &Connectivity::max_neighbors)
      .def("__getitem__", [](const Connectivity& c, int i) { return c[i]; })
      .def("__repr__", [](const Connectivity& c) {
        return fmt::format("Connectivity('{}', source={}, target={}, max_neighbors={})", c.name, c.source.name,
                           c.target.name, c.max_neighbors);
      });
  m.def("slot", &fieldflow::slot, nb::arg("connectivity"), nb::arg("index"));

  nb::class_<Expr> expr(m, "Expr");
  expr.def("__call__", [](const Expr& f, const CartesianOffset& o) { return f(o); })
      .def("__call__", [](const Expr& f, const DynamicOffset& o) { return f(o); })
      .def("__call__", [](const Expr& f, const NeighborOffset& o) { return f(o); })
      .def("__call__", [](const Expr& f, const Connectivity& c) { return f(c); })
      .def("__call__", [](const Expr& f, const LocalSlot& s) { return f(s); })
      .def("__len__", [](const Expr& e) -> std::size_t {
        if (!e.type().is_tuple()) throw nb::type_error("a field expression that is not a tuple has no len()");
        return e.type().elements.size();
      })
      .def("__getitem__", [](const Expr& e, int i) {
        // IndexError past the end lets Python unpack a tuple value: a, b = swap(x, y).
        if (e.type().is_tuple() && (i < 0 || i >= static_cast<int>(e.type().elements.size())))
          throw nb::index_error(fmt::format("tuple index {} out of range", i).c_str());
        return e[i];
      })
      .def("__neg__", [](const Expr& a) { return -a; })
      .def("__pos__", [](const Expr& a) { return +a; })
      .def("__abs__", [](const Expr& a) { return fieldflow::abs(a); })
      .def("__invert__", [](const Expr& a) { return ~a; })
      .def("__bool__", [](const Expr&) -> bool {
        throw DTypeError("a field expression has no truth value while tracing (Python if / and / or / chained "
                         "comparisons): use where(condition, a, b), & and |");
      })
      .def_prop_ro("dtype", [](const Expr& e) { return e.type().dtype; })
      .def_prop_ro("dims", [](const Expr& e) { return e.type().dims; })
      .def_prop_ro("type", [](const Expr& e) { return e.type().to_string(); })
      .def("__repr__", [](const Expr& e) { return fmt::format("Expr({}: {})", ir::print(*e.node()), e.type().to_string()); });
  def_binary<add>(expr, "__add__", "__radd__");
  def_binary<sub>(expr, "__sub__", "__rsub__");
  def_binary<mul>(expr, "__mul__", "__rmul__");
  def_binary<div>(expr, "__truediv__", "__rtruediv__");
  def_binary<floor_divide>(expr, "__floordiv__", "__rfloordiv__");
  def_binary<mod>(expr, "__mod__", "__rmod__");
  def_binary<power>(expr, "__pow__", "__rpow__");
  def_binary<bit_and>(expr, "__and__", "__rand__");
  def_binary<bit_or>(expr, "__or__", "__ror__");
  def_binary<bit_xor>(expr, "__xor__", "__rxor__");
  def_binary<less>(expr, "__lt__", nullptr);
  def_binary<less_equal>(expr, "__le__", nullptr);
  def_binary<greater>(expr, "__gt__", nullptr);
  def_binary<greater_equal>(expr, "__ge__", nullptr);
  def_binary<equal>(expr, "__eq__", nullptr);
  def_binary<not_equal>(expr, "__ne__", nullptr);

  bind_unary_builtins(m);
  m.def("where", [](nb::handle c, nb::handle a, nb::handle b) { return where(to_expr(c), to_expr(a), to_expr(b)); },
        nb::arg("condition"), nb::arg("a"), nb::arg("b"));
  m.def("if_", [](nb::handle c, nb::handle a, nb::handle b) { return if_(to_expr(c), to_expr(a), to_expr(b)); },
        nb::arg("flag"), nb::arg("then_value"), nb::arg("else_value"));
  m.def("concat_where",
        [](const IndexCondition& c, nb::handle a, nb::handle b) { return concat_where(c, to_expr(a), to_expr(b)); },
        nb::arg("condition"), nb::arg("a"), nb::arg("b"));
  m.def("broadcast", [](nb::handle x, nb::handle dims) { return broadcast(to_expr(x), to_dims(dims)); },
        nb::arg("x"), nb::arg("dims"));
  m.def("astype", [](nb::handle x, nb::handle dtype) { return astype(to_expr(x), to_dtype(dtype)); }, nb::arg("x"),
        nb::arg("dtype"));
  m.def("index", &fieldflow::index, nb::arg("dim"));
  m.def("named", [](const std::string& label, nb::handle x) { return named(label, to_expr(x)); });
  m.def("materialize", [](const std::string& label, nb::handle x) { return materialize(label, to_expr(x)); });
  m.def("neighbor_sum", [](nb::handle x, nb::handle axis) {
    // A non-local axis gets the C++ DSL's own error.
    if (nb::isinstance<Dimension>(axis) && nb::cast<Dimension>(axis).kind != DimKind::local)
      return neighbor_sum(to_expr(x), nb::cast<Dimension>(axis));
    return neighbor_sum(to_expr(x), connectivity_of_axis(axis, "neighbor_sum"));
  }, nb::arg("x"), nb::kw_only(), nb::arg("axis"));
  m.def("max_over", [](nb::handle x, nb::handle axis) { return max_over(to_expr(x), connectivity_of_axis(axis, "max_over")); },
        nb::arg("x"), nb::kw_only(), nb::arg("axis"));
  m.def("min_over", [](nb::handle x, nb::handle axis) { return min_over(to_expr(x), connectivity_of_axis(axis, "min_over")); },
        nb::arg("x"), nb::kw_only(), nb::arg("axis"));
  m.def("scan", [](const std::string& name, bool forward, nb::handle init, nb::callable body, nb::handle inputs) {
    const ScanDirection direction = forward ? ScanDirection::forward : ScanDirection::backward;
    if (nb::isinstance<Dimension>(inputs))
      return scan(name, direction, to_scalars(init), scan_body(body), nb::cast<Dimension>(inputs));
    return scan(name, direction, to_scalars(init), scan_body(body), to_exprs(inputs));
  }, nb::arg("name"), nb::arg("forward"), nb::arg("init"), nb::arg("body"), nb::arg("inputs_or_axis"));

  nb::class_<ir::Program>(m, "IRProgram")
      .def_ro("name", &ir::Program::name)
      .def("__str__", [](const ir::Program& p) { return ir::print(p); })
      .def_prop_ro("params", [](const ir::Program& p) {
        std::vector<std::tuple<std::string, std::string, std::string>> out;
        for (const auto& prm : p.params) {
          const char* kind = prm.kind == ir::ParamKind::field ? "field"
                             : prm.kind == ir::ParamKind::scalar ? "scalar" : "connectivity";
          out.emplace_back(prm.name, kind, prm.kind == ir::ParamKind::connectivity ? prm.conn.name : prm.type.to_string());
        }
        return out;
      });

  nb::class_<ProgramBuilder>(m, "ProgramBuilder")
      .def(nb::init<std::string>(), nb::arg("name"))
      .def("field", [](ProgramBuilder& b, const std::string& name, nb::handle dims, nb::handle dtype) {
        return b.field(name, to_dims(dims), to_dtype(dtype));
      })
      .def("scalar", [](ProgramBuilder& b, const std::string& name, nb::handle dtype) { return b.scalar(name, to_dtype(dtype)); })
      .def("tuple_field", [](ProgramBuilder& b, const std::string& name, nb::handle elements) {
        std::vector<ProgramBuilder::FieldSpec> specs;
        for (nb::handle e : elements) specs.push_back({to_dims(e[0]), to_dtype(e[1])});
        return b.tuple_field(name, specs);
      })
      .def("connectivity", &ProgramBuilder::connectivity)
      .def("call", [](ProgramBuilder& b, const std::string& op, nb::handle value, nb::handle outputs, nb::handle domain) {
        std::vector<ProgramBuilder::Bound> bounds;
        for (nb::handle r : domain) bounds.push_back({nb::cast<Dimension>(r[0]), to_expr(r[1]), to_expr(r[2])});
        b.call(op, to_expr(value), to_exprs(outputs), bounds);
      }, nb::arg("op"), nb::arg("value"), nb::arg("outputs"), nb::arg("domain"))
      .def("build", &ProgramBuilder::build);
}

}  // namespace fieldflow::python
