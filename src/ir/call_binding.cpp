#include "ir/call_binding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <limits>

#include "fieldflow/errors.h"
#include "ir/memory_overlap.h"

namespace fieldflow::ir {

namespace {

std::string dim_names(const std::vector<Dimension>& dims) {
  std::string s;
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].name;
  return s;
}

std::string dims_of(const Field& f) { return dim_names(f.dims()); }

std::string_view kind_name(ParamKind k) {
  return k == ParamKind::field ? "a field" : k == ParamKind::scalar ? "a scalar" : "a connectivity table";
}

std::string_view kind_name(Arguments::Entry::Kind k) {
  using K = Arguments::Entry::Kind;
  return k == K::field ? "a field" : k == K::scalar ? "a scalar" : "a connectivity table";
}

ParamKind to_param_kind(Arguments::Entry::Kind k) {
  using K = Arguments::Entry::Kind;
  return k == K::field ? ParamKind::field : k == K::scalar ? ParamKind::scalar : ParamKind::connectivity;
}

Scalar convert_scalar(const Program& p, const Param& prm, Scalar v) {
  const DType want = prm.type.dtype;
  if (v.dtype() == want) return v;
  // Integers convert between widths when the value fits; everything else must match exactly.
  if (is_integral(want) && is_integral(v.dtype())) {
    if (want == DType::int32 && (v.as_int() < std::numeric_limits<std::int32_t>::min() ||
                                 v.as_int() > std::numeric_limits<std::int32_t>::max()))
      throw ArgumentError(fmt::format("program '{}': scalar '{}' expects int32, given {} which does not fit",
                                      p.name, prm.name, v.as_int()));
    return v.cast(want);
  }
  throw ArgumentError(fmt::format("program '{}': scalar '{}' expects {}, given {} ({})", p.name, prm.name,
                                  to_string(want), to_string(v.dtype()), v.to_string()));
}

}  // namespace

void check_table(const Program& p, const Param& prm, const NeighborTable& t, bool check_indices) {
  const Connectivity& c = prm.conn;
  if (t.max_neighbors != c.max_neighbors)
    throw ConnectivityError(fmt::format("program '{}': connectivity '{}' expects {} neighbours per {}, given a "
                                        "table '{}' with {}", p.name, prm.name, c.max_neighbors, c.source.name,
                                        t.name, t.max_neighbors));
  if ((!t.source.empty() && t.source != c.source.name) || (!t.target.empty() && t.target != c.target.name))
    throw ConnectivityError(fmt::format("program '{}': connectivity '{}' maps {} to {}, given table '{}' from {} to {}",
                                        p.name, prm.name, c.source.name, c.target.name, t.name, t.source, t.target));
  if (t.n_source < 0 || t.n_target < 0 ||
      (!t.is_view() && static_cast<std::int64_t>(t.data.size()) != t.n_source * static_cast<std::int64_t>(t.max_neighbors)))
    throw ConnectivityError(fmt::format("program '{}': connectivity '{}' table '{}' should hold {} x {} = {} "
                                        "entries, given {}", p.name, prm.name, t.name, t.n_source, t.max_neighbors,
                                        t.n_source * t.max_neighbors, t.data.size()));
  if (!check_indices) return;
  for (std::int64_t i = 0; i < t.n_source; ++i)
    for (int n = 0; n < t.max_neighbors; ++n) {
      const std::int32_t v = t(i, n);
      if (v != -1 && (v < 0 || v >= t.n_target))
        throw ConnectivityError(fmt::format("program '{}': connectivity '{}' entry ({}, {}) is {}, expected -1 "
                                            "(skipped) or an index in [0, {})", p.name, prm.name, i, n, v, t.n_target));
    }
}

namespace {
// Every table names the sizes of its two locations; all tables of a call must agree on them (a
// location's size sizes the transients over it and bounds the generated loops).
void check_location_sizes_agree(const Program& p, const BoundCall& call) {
  std::map<std::string, std::pair<std::int64_t, std::string>> seen;  // location -> (size, table)
  for (std::size_t i = 0; i < p.params.size(); ++i) {
    if (p.params[i].kind != ParamKind::connectivity) continue;
    const Connectivity& c = p.params[i].conn;
    const NeighborTable& t = *call.tables[i];
    for (const auto& [dim, n] : {std::pair{c.source, t.n_source}, std::pair{c.target, t.n_target}}) {
      auto [it, fresh] = seen.emplace(dim.name, std::pair{n, c.name});
      if (!fresh && it->second.first != n)
        throw ConnectivityError(fmt::format("program '{}': connectivity '{}' says {} has {} elements, but "
                                            "connectivity '{}' says {}", p.name, c.name, dim.name, n,
                                            it->second.second, it->second.first));
    }
  }
}
}  // namespace

BoundCall bind_arguments(const Program& p, const Arguments& args, bool check_table_indices, FieldMemory memory) {
  BoundCall call;
  const std::size_t n = p.params.size();
  call.fields.assign(n, nullptr);
  call.scalars.assign(n, Scalar());
  call.tables.assign(n, nullptr);
  for (const auto& e : args.entries()) {
    const Param* prm = p.find(e.name);
    if (!prm) {
      std::string names;
      for (const auto& q : p.params) names += (names.empty() ? "" : ", ") + q.name;
      throw ArgumentError(fmt::format("program '{}': unexpected argument '{}'; the parameters are: {}", p.name,
                                      e.name, names));
    }
    if (to_param_kind(e.kind) != prm->kind)
      throw ArgumentError(fmt::format("program '{}': argument '{}' expects {}, given {}", p.name, e.name,
                                      kind_name(prm->kind), kind_name(e.kind)));
  }
  for (std::size_t i = 0; i < n; ++i) {
    const Param& prm = p.params[i];
    const Arguments::Entry* e = args.find(prm.name);
    if (!e)
      throw ArgumentError(fmt::format("program '{}': missing argument '{}' ({})", p.name, prm.name,
                                      prm.kind == ParamKind::connectivity ? "connectivity table"
                                                                           : prm.type.to_string()));
    switch (prm.kind) {
      case ParamKind::field: {
        Field& f = *e->field;
        if (f.dtype() != prm.type.dtype)
          throw ArgumentError(fmt::format("program '{}': field '{}' expects dtype {}, given {}", p.name, prm.name,
                                          to_string(prm.type.dtype), to_string(f.dtype())));
        if (canonical_dims(f.dims()) != prm.type.dims || f.dims().size() != prm.type.dims.size())
          throw ArgumentError(fmt::format("program '{}': field '{}' expects dims [{}], given [{}]", p.name, prm.name,
                                          dim_names(prm.type.dims), dims_of(f)));
        if (f.device() != Device::cpu && memory == FieldMemory::host)
          throw ArgumentError(fmt::format("program '{}': field '{}' expects host memory (this backend runs on the "
                                          "host), given a view over {} memory; pass a host field, or compile the "
                                          "program for backend cuda", p.name, prm.name, to_string(f.device())));
        call.fields[i] = &f;
        break;
      }
      case ParamKind::scalar:
        call.scalars[i] = convert_scalar(p, prm, e->scalar);
        if (is_integral(prm.type.dtype)) call.sizes[prm.name] = call.scalars[i].as_int();
        break;
      case ParamKind::connectivity:
        check_table(p, prm, *e->table, check_table_indices);
        call.tables[i] = e->table;
        break;
    }
  }
  check_location_sizes_agree(p, call);
  return call;
}

std::vector<ConcreteRange> evaluate_domain(const Domain& d, const std::map<std::string, std::int64_t>& sizes) {
  std::vector<ConcreteRange> out;
  for (const auto& r : d) out.push_back({r.dim, r.lo.evaluate(sizes), r.hi.evaluate(sizes)});
  return out;
}

void check_output_elements_distinct(const Program& p, const std::string& output, const Field& f) {
  switch (internal_overlap(f)) {
    case Overlap::none: return;
    case Overlap::shared:
      throw ArgumentError(fmt::format("program '{}': output '{}' ({}) has strides [{}] under which several indices "
                                      "share an element; an output needs distinct elements", p.name, output,
                                      f.describe(), fmt::join(f.strides(), ", ")));
    case Overlap::undecided:
      throw ArgumentError(fmt::format("program '{}': output '{}' ({}) has strides [{}] too irregular to show that "
                                      "no two indices share an element; an output needs distinct elements: pass one "
                                      "whose strides each step over the faster axes' extent", p.name, output,
                                      f.describe(), fmt::join(f.strides(), ", ")));
  }
}

void check_outputs_distinct(const Program& p, const std::vector<Field*>& fields) {
  for (const Stmt& st : p.stmts)
    for (const auto& out : st.outputs) check_output_elements_distinct(p, out, *fields[p.index_of(out)]);
}

namespace {
// An output written over a neighbour table the call reads would change the neighbours while the
// kernels follow them: compiled code would read through whatever the output wrote there, and the
// reference's result would depend on the order it visits points in. Spans first (no allocation:
// the steady-state call path runs this); where they meet, the entries as an int32 field over the
// table's source and local dimensions, element by element (a table may interleave with an array
// it shares no entry with).
void check_output_shares_no_table(const Program& p, const std::string& out, const Field& of, const Param& prm,
                                  const NeighborTable& t) {
  if (of.size() == 0 || t.n_source == 0 || t.max_neighbors == 0) return;
  const auto address = [](const void* x) { return reinterpret_cast<std::uintptr_t>(x); };
  const std::uintptr_t o = address(of.data()), e = address(t.entries());
  if (!(o < e + t.span_bytes() && e < o + of.span_bytes())) return;
  const Field entries = Field::view(const_cast<std::int32_t*>(t.entries()), {prm.conn.source, prm.conn.local}, DType::int32,
                                    {t.n_source, t.max_neighbors}, {t.source_stride(), t.neighbor_stride()});
  if (element_overlap(of, entries) == Overlap::none) return;
  throw ArgumentError(fmt::format("program '{}': output '{}' ({}) shares memory with the entries of neighbour table "
                                  "'{}'; an output may not be written over a table the call reads", p.name, out,
                                  of.describe(), prm.name));
}
}  // namespace

void check_outputs_share_no_memory(const Program& p, const std::vector<Field*>& fields,
                                   const std::vector<const NeighborTable*>& tables) {
  for (const auto& st : p.stmts)
    for (const auto& out : st.outputs) {
      const int o = p.index_of(out);
      const Field& of = *fields[o];
      for (std::size_t i = 0; i < tables.size(); ++i)
        if (tables[i]) check_output_shares_no_table(p, out, of, p.params[i], *tables[i]);
      for (std::size_t i = 0; i < fields.size(); ++i) {
        if (static_cast<int>(i) == o || !fields[i]) continue;
        const Field& other = *fields[i];
        const std::string& name = p.params[i].name;
        switch (element_overlap(of, other)) {
          case Overlap::none: break;
          case Overlap::shared:
            throw ArgumentError(fmt::format("program '{}': output '{}' and argument '{}' share memory; pass one field "
                                            "as an in/out argument instead", p.name, out, name));
          case Overlap::undecided:
            throw ArgumentError(fmt::format(
                "program '{}': output '{}' ({}, strides [{}]) and argument '{}' ({}, strides [{}]) may share memory: "
                "their spans meet and their strides are too irregular to show that no element does; pass arrays "
                "whose spans do not meet", p.name, out, of.describe(), fmt::join(of.strides(), ", "), name,
                other.describe(), fmt::join(other.strides(), ", ")));
        }
      }
    }
}

BoundCall bind_and_check_outputs(const Program& p, const Arguments& args) {
  BoundCall call = bind_arguments(p, args);
  check_output_domains(p, call);
  // As the compiled runtime does: an output written through stride 0, or over another
  // argument's memory, would have no defined value.
  check_outputs_distinct(p, call.fields);
  check_outputs_share_no_memory(p, call.fields, call.tables);
  return call;
}

void check_range_order(const Program& p, const Stmt& st, const ConcreteRange& r) {
  if (r.hi < r.lo)
    throw DomainError(fmt::format("program '{}', call '{}': domain along {} is [{}, {}), an empty range "
                                  "must have hi >= lo", p.name, st.op, r.dim.name, r.lo, r.hi));
}

void check_output_domains(const Program& p, const BoundCall& call) {
  for (const Stmt& st : p.stmts) {
    const auto ranges = evaluate_domain(st.domain, call.sizes);
    for (const auto& out : st.outputs) {
      const Field& f = *call.fields[p.index_of(out)];
      for (const auto& r : ranges) {
        check_range_order(p, st, r);
        const int a = f.axis_of(r.dim);
        const std::int64_t flo = f.origin()[a], fhi = flo + f.shape()[a];
        if (r.hi > r.lo && (r.lo < flo || r.hi > fhi))
          throw DomainError(fmt::format("program '{}', call '{}': domain along {} is [{}, {}) but output '{}' "
                                        "covers only [{}, {})", p.name, st.op, r.dim.name, r.lo, r.hi, out, flo, fhi));
      }
    }
  }
}

}  // namespace fieldflow::ir
