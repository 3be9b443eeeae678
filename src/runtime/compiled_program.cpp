// CompiledProgram: argument binding with a fast path for repeated calls, call-time checks that
// mirror the reference executor, transient memory per mode, and the call into the module.
#include "runtime/compiled_program.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <thread>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include "fieldflow/errors.h"
#include "fieldflow/mesh.h"
#include "fieldflow/reference.h"
#include "ir/field_elements.h"
#include "ir/memory_packing.h"

namespace fieldflow {

std::string_view to_string(Backend b) {
  switch (b) {
    case Backend::reference: return "reference";
    case Backend::cpu: return "cpu";
    case Backend::cuda: return "cuda";
  }
  return "?";
}

std::string_view to_string(LoopForm f) {
  switch (f) {
    case LoopForm::tuned: return "tuned";
    case LoopForm::scalar: return "scalar";
    case LoopForm::vector: return "vector";
  }
  return "?";
}

void check_loop_form(std::string_view program, LoopForm form) {
  if (static_cast<unsigned>(form) > static_cast<unsigned>(LoopForm::vector))
    throw OptionError(fmt::format("program '{}': loop_form {} is not a loop form: expected tuned (0), scalar (1) or "
                                  "vector (2)", program, static_cast<unsigned>(form)));
}

LoopForm parse_loop_form(std::string_view name) {
  if (name == "tuned") return LoopForm::tuned;
  if (name == "scalar") return LoopForm::scalar;
  if (name == "vector") return LoopForm::vector;
  throw OptionError(fmt::format("unknown loop form '{}': expected tuned, scalar or vector", name));
}

Backend parse_backend(std::string_view name) {
  if (name == "reference") return Backend::reference;
  if (name == "cpu") return Backend::cpu;
  if (name == "cuda") return Backend::cuda;
  throw OptionError(fmt::format("unknown backend '{}': expected reference, cpu or cuda", name));
}

Layout default_layout(Backend backend) {
  return backend == Backend::cuda ? Layout::horizontal_fastest : Layout::vertical_fastest;
}

namespace {

// What a binding remembers of a table besides its address: a changed shape or stride means the
// table must be checked again. A fixed-size array, so comparing on the fast path allocates nothing.
std::array<std::int64_t, 6> table_shape(const NeighborTable& t) {
  return {t.n_source, t.n_target, t.max_neighbors, t.source_stride(), t.neighbor_stride(),
          static_cast<std::int64_t>(t.data.size())};
}
bool same_table_shape(const NeighborTable& t, const std::vector<std::int64_t>& remembered) {
  const auto now = table_shape(t);
  return std::equal(now.begin(), now.end(), remembered.begin(), remembered.end());
}

// Location sizes from the neighbour tables; two tables disagreeing on a location is an error.
void add_location_sizes(const ir::Program& p, const std::vector<const NeighborTable*>& tables, SizeMap& sizes) {
  for (std::size_t i = 0; i < p.params.size(); ++i) {
    if (p.params[i].kind != ir::ParamKind::connectivity) continue;
    const Connectivity& c = p.params[i].conn;
    const NeighborTable& t = *tables[i];
    for (const auto& [dim, n] : {std::pair{c.source, t.n_source}, std::pair{c.target, t.n_target}}) {
      sizes.emplace(ir::location_size_symbol(dim), n);  // tables agree: ir::bind_arguments checked it
    }
  }
}

// Generated code assumes outputs do not alias other fields (restrict pointers) nor themselves.
// Whether an output's own elements are distinct depends on its shape and strides only: checked
// when they were bound (`strides_changed`), not when only the memory moved. The checks are the
// reference's (ir/call_binding.h).
void check_output_aliasing(const ir::Program& p, const ir::BoundCall& bound, bool strides_changed) {
  if (strides_changed) ir::check_outputs_distinct(p, bound.fields);
  ir::check_outputs_share_no_memory(p, bound.fields, bound.tables);
}

ff_buffer describe_field(const Field& f, const std::vector<Dimension>& canonical) {
  ff_buffer b{};
  b.data = const_cast<void*>(f.data());
  b.offset = 0;
  for (std::size_t a = 0; a < canonical.size(); ++a) {
    const int axis = f.axis_of(canonical[a]);
    b.strides[a] = f.strides()[axis];
    b.lo[a] = f.origin()[axis];
    b.hi[a] = f.origin()[axis] + f.shape()[axis];
    b.offset -= b.lo[a] * b.strides[a];
  }
  return b;
}


// The output fields of a program some of whose kernels check reads only while running (dynamic
// offsets): such a check can fail after earlier kernels, or earlier points, wrote.
std::vector<Field*> checked_in_kernel_outputs(const ir::Schedule& s, const ir::BoundCall& bound) {
  // Only a dynamic offset is checked while a kernel runs; the table rows that fixed-index
  // neighbour shifts read are checked before anything runs (check_reads). Saving the outputs
  // of a program without dynamic offsets was a full copy of every output per call.
  const bool checks = std::any_of(s.kernels.begin(), s.kernels.end(), [](const ir::Kernel& k) {
    return k.has_dynamic_shift;
  });
  std::vector<Field*> out;
  if (!checks) return out;
  for (const auto& st : s.program.stmts)
    for (const auto& name : st.outputs) {
      Field* f = bound.fields[s.program.index_of(name)];
      if (std::find(out.begin(), out.end(), f) == out.end()) out.push_back(f);
    }
  return out;
}
}  // namespace

SizeMap size_symbols(const ir::Program& program, const Arguments& args) {
  // Only shapes and scalars matter here: fields may be in any memory.
  const ir::BoundCall call = ir::bind_arguments(program, args, false, ir::FieldMemory::host_or_device);
  SizeMap sizes = call.sizes;
  add_location_sizes(program, call.tables, sizes);
  return sizes;
}

CompiledProgram::Impl::Impl(Image img) : image(std::move(img)) {
  mode = image.options.memory.resolved_mode();
  layout = image.options.layout.value_or(default_layout(image.options.backend));
  num_threads = image.options.num_threads > 0 ? image.options.num_threads : omp_get_max_threads();
  start_loop_form(image.options.loop_form);
  memory = std::make_unique<runtime::TransientMemory>(image.program.name, image.options.memory,
                                                       image.options.cuda_pool_release_threshold);
  // Caller memory for the device's transients must be memory its kernels can use (the runner
  // asks the device runtime; the runner outlives `memory`, declared after `image`).
  if (const runtime::DeviceRunner* runner = image.device.get())
    memory->set_memory_check(Device::cuda, [runner](const void* p) { return runner->memory_problem(p); });
  if (compiled()) {
    run = image.entry;
    const std::size_t n = image.program.params.size();
    buffers.assign(n + image.schedule.transients.size(), ff_buffer{});
    tables.assign(n, ff_table{});
    scalars.assign(n, ff_scalar{});
    next_scalars.assign(n, ff_scalar{});
    domains.assign(image.schedule.kernels.size() * 2 * FF_MAX_DIMS, 0);
    for (const auto& prm : image.program.params) param_names.push_back(prm.name);
  }
}

CompiledProgram::Impl::SizedPlan CompiledProgram::Impl::plan_for(const SizeMap& sz) const {
  SizedPlan out;
  if (!compiled()) return out;
  const ir::Schedule& s = image.schedule;
  out.extents = ir::compute_extents(s, sz);
  const auto bytes = ir::transient_bytes(s, out.extents, num_threads);
  std::vector<PlannedTransient> items;
  for (std::size_t t = 0; t < s.transients.size(); ++t) {
    const ir::Transient& tr = s.transients[t];
    items.push_back({tr.name, tr.dtype, device_of(tr.storage), bytes[t], tr.first_kernel, tr.last_kernel, 0});
  }
  out.plan = ir::pack_transients(items);
  for (Device d : {Device::cpu, Device::cuda})
    if (const std::size_t b = out.plan.bytes_on(d); b > 0) out.requirements.push_back({d, b, transient_alignment});
  return out;
}

// Compared with the last bound call: the same arguments (Field and table objects, shapes, origins,
// strides, table entries) need no checks at all; the same ones with fields over other memory (a
// model's time levels, Field::set_view_data) need only the pointers and the aliasing check, which
// allocate nothing; anything else is bound and checked from scratch.
CompiledProgram::Impl::Change CompiledProgram::Impl::what_changed(const Arguments& args) const {
  if (!binding.valid || args.entries().size() != binding.names.size()) return Change::everything;
  Change change = Change::nothing;
  for (std::size_t i = 0; i < binding.names.size(); ++i) {
    const auto& e = args.entries()[i];
    if (e.name != binding.names[i]) return Change::everything;
    const int p = binding.param_of_entry[i];
    if (e.kind == Arguments::Entry::Kind::field) {
      if (e.field != binding.bound.fields[p] || e.field->shape() != binding.shape[p] ||
          e.field->origin() != binding.origin[p] || e.field->strides() != binding.strides[p])
        return Change::everything;
      if (e.field->data() != binding.data[p]) change = Change::field_data;
    } else if (e.kind == Arguments::Entry::Kind::connectivity) {
      // Another table (object, even one at a freed table's address, or entries): checked again
      // (indices, and the reads they resolve).
      if (e.table != binding.bound.tables[p] || e.table->identity() != binding.table_identity[p] ||
          e.table->entries() != binding.data[p] || !same_table_shape(*e.table, binding.shape[p]))
        return Change::everything;
    }
  }
  return change;
}

void CompiledProgram::Impl::rebind_field_data() {
  const ir::Program& p = image.program;
  check_output_aliasing(p, binding.bound, false);
  for (std::size_t i = 0; i < p.params.size(); ++i)
    if (const Field* f = binding.bound.fields[i]; f && f->data() != binding.data[i]) {
      binding.data[i] = f->data();
      buffers[i].data = const_cast<void*>(f->data());
    }
  if (image.device) describe_argument_spans();
}

void CompiledProgram::Impl::describe_argument_spans() {
  const ir::Program& p = image.program;
  field_spans.assign(p.params.size(), {});
  table_spans.assign(p.params.size(), {});
  std::vector<bool> output(p.params.size(), false);
  for (const auto& st : p.stmts)
    for (const auto& name : st.outputs) output[p.index_of(name)] = true;
  for (std::size_t i = 0; i < p.params.size(); ++i) {
    if (const Field* f = binding.bound.fields[i]) {
      const bool on_device = f->device() != Device::cpu;
      const bool checked = std::find(checked_outputs.begin(), checked_outputs.end(), f) != checked_outputs.end();
      field_spans[i] = {f->data(), f->span_bytes(), output[i], on_device, on_device && checked};
      if (output[i] && !ir::elements_fill_span(*f)) field_spans[i].scattered = f;
    }
    if (const NeighborTable* t = binding.bound.tables[i]; t && t->span_bytes() > 0) {
      table_spans[i] = {t->entries(), t->span_bytes()};  // owned or a view: first entry to last
      table_spans[i].identity = t->identity();
    }
  }
}

void CompiledProgram::Impl::bind(const Arguments& args) {
  const ir::Program& p = image.program;
  binding.valid = false;
  ir::BoundCall bound = ir::bind_arguments(p, args, true,
                                           image.device ? ir::FieldMemory::host_or_device : ir::FieldMemory::host);
  ir::check_output_domains(p, bound);
  const std::size_t n = p.params.size();
  // Layout: generated code assumes unit stride along one dimension of every field (none for any).
  for (std::size_t i = 0; i < n && layout != Layout::any; ++i) {
    const Field* f = bound.fields[i];
    if (!f || f->dims().empty()) continue;
    const Dimension unit = ir::unit_stride_dim(p.params[i].type.dims, layout);
    const int axis = f->axis_of(unit);
    if (f->shape()[axis] > 1 && f->strides()[axis] != 1)
      throw LayoutError(fmt::format("program '{}' was compiled for layout {}: field '{}' needs unit stride along {}, "
                                    "given stride {} (create the field with Layout::{}, or compile the program for "
                                    "Layout::any)", p.name, to_string(layout), p.params[i].name,
                                    unit.name, f->strides()[axis], to_string(layout)));
  }
  check_output_aliasing(p, bound, true);
  binding.names.clear();
  binding.param_of_entry.clear();
  binding.data.assign(n, nullptr);
  binding.shape.assign(n, {});
  binding.origin.assign(n, {});
  binding.strides.assign(n, {});
  binding.table_identity.assign(n, 0);
  for (const auto& e : args.entries()) {
    const int i = p.index_of(e.name);
    binding.names.push_back(e.name);
    binding.param_of_entry.push_back(i);
    if (e.kind == Arguments::Entry::Kind::field) {
      binding.data[i] = e.field->data();
      binding.shape[i] = e.field->shape();
      binding.origin[i] = e.field->origin();
      binding.strides[i] = e.field->strides();
      buffers[i] = describe_field(*e.field, p.params[i].type.dims);
    } else if (e.kind == Arguments::Entry::Kind::connectivity) {
      binding.data[i] = e.table->entries();
      binding.table_identity[i] = e.table->identity();
      const auto shape = table_shape(*e.table);
      binding.shape[i].assign(shape.begin(), shape.end());
      tables[i] = {e.table->entries(), e.table->n_source, e.table->source_stride(), e.table->neighbor_stride()};
    }
  }
  SizeMap new_sizes = bound.sizes;
  add_location_sizes(p, bound.tables, new_sizes);
  binding.bound = std::move(bound);
  // Sized again even when the sizes did not change: the loop boxes and the table rows that reads
  // reach come from the entries of this call's tables, which may be other tables of the same shape
  // (fuzz_call_binding: the last table's reach let a read through a missing neighbour pass).
  resize(new_sizes);
  check_reads();
  // Found once per binding, not per call: the fast path allocates nothing.
  checked_outputs = checked_in_kernel_outputs(image.schedule, binding.bound);
  if (image.device) describe_argument_spans();
  binding.valid = true;  // only now: a rejected call must not leave a binding that skips the checks
}

namespace {

// The indices of the last table's target that a path through the bound tables reaches from its
// rows, sorted, each once (the offsets not yet added); empty when it reaches none (no rows, or
// every path meets a missing neighbour, which reductions skip and fixed-index shifts reject
// elsewhere). What a hop reaches is collected from the entries it reads, not marked per declared
// target: a table may declare far more targets than exist in memory (fuzz_c_api, finding 13).
std::vector<std::int64_t> reached_indices(const ir::Program& p, const std::vector<const NeighborTable*>& tables,
                                          const ir::ConcreteExtents::TablePath& path) {
  std::vector<std::int64_t> rows;
  for (std::int64_t r = path.row_lo; r < path.row_hi; ++r) rows.push_back(r);
  std::vector<std::int64_t> reached;
  for (const ir::TableHop& hop : path.hops) {
    const NeighborTable& t = *tables[p.index_of(hop.connectivity)];
    const int slot_lo = hop.slot < 0 ? 0 : hop.slot, slot_hi = hop.slot < 0 ? t.max_neighbors : hop.slot + 1;
    reached.clear();
    for (std::int64_t r : rows) {
      if (r < 0 || r >= t.n_source) continue;
      for (int n = slot_lo; n < slot_hi; ++n)
        if (const std::int32_t v = t(r, n); v >= 0 && v < t.n_target) reached.push_back(v);
    }
    std::sort(reached.begin(), reached.end());
    reached.erase(std::unique(reached.begin(), reached.end()), reached.end());
    rows.swap(reached);
  }
  return rows;
}

// Their bounding range [lo, hi), the offsets added; nullopt when the path reaches none.
std::optional<std::pair<std::int64_t, std::int64_t>> reached_range(const ir::Program& p,
                                                                   const std::vector<const NeighborTable*>& tables,
                                                                   const ir::ConcreteExtents::TablePath& path) {
  const std::vector<std::int64_t> rows = reached_indices(p, tables, path);
  if (rows.empty()) return std::nullopt;
  return std::pair{rows.front() + path.min_offset, rows.back() + 1 + path.max_offset};
}

}  // namespace

void CompiledProgram::Impl::resize(const SizeMap& new_sizes) {
  sized = false;
  // Memory and the layout of transients come from the sizes alone (what workspace_requirements
  // promised); loop boxes and read checks from this call's tables too, so a transient producer
  // computes only what its readers reach through the tables, and reads only what that needs.
  SizedPlan sp = plan_for(new_sizes);
  const ir::Program& program = image.program;
  const auto& tables_of_call = binding.bound.tables;
  ir::ConcreteExtents exact = ir::compute_extents(image.schedule, new_sizes, [&](const ir::ConcreteExtents::TablePath& path) {
    return reached_range(program, tables_of_call, path);
  });
  const ir::Schedule& s = image.schedule;
  // Loop boxes, in each kernel's canonical loop order.
  for (std::size_t k = 0; k < s.kernels.size(); ++k) {
    const auto dims = ir::kernel_loop_dims(s, s.kernels[k]);
    const ir::Box& box = exact.kernel_domains[k];
    for (std::size_t a = 0; a < dims.size(); ++a) {
      const int axis = box.axis(dims[a]);
      domains[k * 2 * FF_MAX_DIMS + 2 * a] = box.lo[axis];
      domains[k * 2 * FF_MAX_DIMS + 2 * a + 1] = std::max(box.lo[axis], box.hi[axis]);
    }
    // Neighbour tables are read at the loop index of their source dimension; a kernel whose box
    // is empty along any axis (no vertical levels, say) reads no table at all.
    for (const auto& cname : s.kernels[k].connectivities) {
      const ir::Param* prm = s.program.find(cname);
      const int axis = box.axis(prm->conn.source);
      if (axis < 0 || box.count() == 0) continue;
      const std::int64_t n = new_sizes.at(ir::location_size_symbol(prm->conn.source));
      if (box.lo[axis] < 0 || box.hi[axis] > n)
        throw DomainError(fmt::format("program '{}', call '{}': reads connectivity '{}' along {} over [{}, {}), outside "
                                      "its table [0, {})", s.program.name, s.program.stmts[s.kernels[k].stmt].op, cname,
                                      prm->conn.source.name, box.lo[axis], box.hi[axis], n));
    }
  }
  // Transient buffers: dense boxes laid out like fields of the compiled layout.
  transient_offsets.assign(s.transients.size(), 0);
  for (const auto& pt : sp.plan.transients)
    transient_offsets[s.transient_index(pt.name)] = pt.offset;
  const std::size_t np = s.program.params.size();
  for (std::size_t t = 0; t < s.transients.size(); ++t) {
    const ir::Box& box = sp.extents.transient_boxes[t];
    ff_buffer b{};
    if (s.transients[t].column_local) {
      // A block of columns per thread (fuse_columns), indexed from the block's first column,
      // level after level, each level the block's stretch of a row, in both layouts: the scans
      // of a group sweep their block's columns side by side level by level, so a level's values
      // are contiguous and their vector loop across the block reads and writes unit stride (in
      // vertical-fastest, column-major blocks of 8 made those loops gathers and scalar stores).
      // One column per thread (no block) is a column. A block holds column_stride levels (the
      // levels rounded up to a cache line's worth); threads' blocks are a page apart
      // (column_thread_stride).
      const ir::Transient& tr = s.transients[t];
      const std::int64_t columns = ir::block_columns(s, sp.extents, t);
      const Dimension along = ir::column_block_dim(box.dims, layout);
      for (std::size_t a = 0; a < box.dims.size(); ++a) {
        b.lo[a] = box.lo[a];
        b.hi[a] = box.hi[a];
        if (box.dims[a].kind == DimKind::vertical) {
          b.strides[a] = columns;
          b.offset = -box.lo[a] * b.strides[a];
        } else if (box.dims[a] == along) {
          b.strides[a] = 1;
        }
      }
      b.thread_stride = ir::column_thread_stride(tr, box, columns);
      buffers[np + t] = b;
      continue;
    }
    std::int64_t stride = 1;
    const std::size_t nd = box.dims.size();
    for (std::size_t i = 0; i < nd; ++i) {
      const std::size_t a = layout == Layout::vertical_fastest ? nd - 1 - i : i;
      b.strides[a] = stride;
      b.lo[a] = box.lo[a];
      b.hi[a] = box.hi[a];
      b.offset -= box.lo[a] * stride;
      stride *= std::max<std::int64_t>(0, box.hi[a] - box.lo[a]);
    }
    buffers[np + t] = b;
  }
  sizes = new_sizes;
  sized_plan = std::move(sp);
  call_extents = std::move(exact);
  sized = true;
}

void CompiledProgram::Impl::check_reads() {
  const ir::Program& p = image.program;
  const ir::Schedule& s = image.schedule;
  // Reads through neighbour tables are checked against the indices the tables really give for the
  // rows the call reads (call_extents), as the reference does point by point. They are checked
  // when a call binds new tables (or sizes), not on every call: tables are the model's static
  // mesh description.
  for (const auto& [name, k, need] : call_extents.kernel_reads) {
    const Field& f = *binding.bound.fields[p.index_of(name)];
    for (std::size_t a = 0; a < need.dims.size(); ++a) {
      if (need.hi[a] <= need.lo[a]) continue;
      const int axis = f.axis_of(need.dims[a]);
      const std::int64_t lo = f.origin()[axis], hi = lo + f.shape()[axis];
      if (need.lo[a] < lo || need.hi[a] > hi)
        throw DomainError(fmt::format("program '{}', call '{}': reads field '{}' at {}={}, outside its extent [{}, {}) "
                                      "(the call reads {} in [{}, {})); the field must cover every point the call reads "
                                      "(domain plus shifts)", p.name, s.program.stmts[s.kernels[k].stmt].op, name,
                                      need.dims[a].name, need.lo[a] < lo ? lo - 1 : hi, lo, hi, need.dims[a].name,
                                      need.lo[a], need.hi[a]));
    }
  }
  // Fixed-index shifts through a skip value fail before anything is written. Rows reached through
  // other tables are checked one by one, as the reference reads them: a row between two reached
  // ones may lack the neighbour.
  for (const auto& rows : call_extents.table_rows) {
    const NeighborTable& t = *binding.bound.tables[p.index_of(rows.connectivity)];
    const ir::Kernel& kernel = s.kernels[rows.kernel];
    const Dimension& source = p.find(rows.connectivity)->conn.source;
    const auto check_row = [&](std::int64_t r) {
      if (r < 0 || r >= t.n_source) return;
      for (std::int64_t n = std::max<std::int64_t>(0, rows.slot_lo); n < std::min<std::int64_t>(rows.slot_hi, t.max_neighbors); ++n) {
        if (t(r, static_cast<int>(n)) >= 0) continue;
        // A stored value is computed over the bounding range of what its readers reach, not
        // point by point as the reference does: a row in that range may be one no reader
        // needs. Say so, since the compiler may store a value the program only named.
        std::string stored;
        if (kernel.extent_from_outputs && !rows.path)
          stored = fmt::format("; the value stored as '{}' is computed over {} [{}, {}), the range its readers reach, so "
                               "every row there needs the neighbour (inlining it would read only the rows reached)",
                               kernel.outputs.front(), source.name, rows.lo, rows.hi);
        throw DomainError(fmt::format("program '{}', call '{}': reads through a missing neighbour: {}[{}] of {} {} is "
                                      "-1 (skipped); only reductions skip missing neighbours{}", p.name,
                                      s.program.stmts[kernel.stmt].op, rows.connectivity, n, source.name, r, stored));
      }
    };
    if (rows.path) {
      for (const std::int64_t r : reached_indices(p, binding.bound.tables, *rows.path))
        for (std::int64_t o = rows.path->min_offset; o <= rows.path->max_offset; ++o) check_row(r + o);
    } else {
      const std::int64_t hi = rows.hi < 0 ? t.n_source : std::min(rows.hi, t.n_source);
      for (std::int64_t r = std::max<std::int64_t>(0, rows.lo); r < hi; ++r) check_row(r);
    }
  }
}

namespace {

// The program was compiled for these values of its static scalars: any other is refused (a
// missing one is reported by binding, like any missing argument).
void check_static_scalars(const ir::Program& p, const std::map<std::string, Scalar>& statics, const Arguments& args) {
  for (const auto& [name, value] : statics) {
    const Arguments::Entry* e = args.find(name);
    if (!e || e->kind != Arguments::Entry::Kind::scalar) continue;
    const DType t = p.find(name)->type.dtype;
    if (!(e->scalar.cast(t) == value.cast(t)))
      throw ArgumentError(fmt::format("program '{}': scalar '{}' is static, compiled for the value {}, given {}; "
                                      "compile another variant with that value", p.name, name,
                                      value.cast(t).to_string(), e->scalar.to_string()));
  }
}

// Copies kept across calls (allocated once, then reused): no system allocation in steady state.
// Element by element, not the span: the bytes between a view's elements may be another field's,
// which another thread may be writing (the other component of an array of structures).
void save_outputs(const std::vector<Field*>& outputs, std::vector<std::vector<std::byte>>& saved) {
  if (saved.size() < outputs.size()) saved.resize(outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    saved[i].resize(outputs[i]->bytes());
    ir::pack_elements(*outputs[i], saved[i].data());
  }
}

void restore_outputs(const std::vector<Field*>& outputs, const std::vector<std::vector<std::byte>>& saved) {
  for (std::size_t i = 0; i < outputs.size(); ++i) ir::unpack_elements(*outputs[i], saved[i].data());
}
}  // namespace

// Serializes the calls (and checks) of one instance. A call made from inside a call of the same
// instance on the same thread (from its external memory allocator, a release action or a memory
// listener) would wait for itself forever: refused.
class CompiledProgram::Impl::CallScope {
 public:
  explicit CallScope(Impl& impl) : id_(impl.calling_thread) {
    if (id_.load(std::memory_order_relaxed) == std::this_thread::get_id())
      throw ConcurrencyError(fmt::format("program '{}' was called again from inside one of its own calls on the "
                                         "same thread (from its external_memory_allocator, a release action or a "
                                         "memory listener); calls of one instance cannot nest", impl.image.program.name));
    lock_ = std::unique_lock<std::mutex>(impl.call_mutex);
    id_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  }
  ~CallScope() { id_.store(std::thread::id(), std::memory_order_relaxed); }
  CallScope(const CallScope&) = delete;
  CallScope& operator=(const CallScope&) = delete;

 private:
  std::atomic<std::thread::id>& id_;
  std::unique_lock<std::mutex> lock_;
};

void CompiledProgram::Impl::checked_prepare_call(const Arguments& args) {
  try {
    prepare_call(args);
  } catch (...) {
    // Validate aside, then commit: whatever a rejected call changed (binding, sizes, boxes) is
    // forgotten, so the next call is bound and checked from scratch.
    binding.valid = false;
    sized = false;
    throw;
  }
}

void CompiledProgram::Impl::check(const Arguments& args) {
  CallScope scope(*this);
  check_static_scalars(image.program, image.options.static_scalars, args);
  if (compiled()) {
    checked_prepare_call(args);
  } else {
    ir::verify(image.program);
    ir::bind_and_check_outputs(image.program, args);
  }
}

void CompiledProgram::Impl::call(const Arguments& args, const CallOptions& options) {
  if (options.cuda_stream && image.options.backend != Backend::cuda)
    throw OptionError(fmt::format("program '{}': CallOptions::cuda_stream is for backend cuda, this program was "
                                  "compiled for backend {}", image.program.name, to_string(image.options.backend)));
  CallScope scope(*this);
  check_static_scalars(image.program, image.options.static_scalars, args);
  if (!compiled()) {
    auto lease = memory->begin_call({});
    run_reference(image.program, args);
    return;
  }
  checked_prepare_call(args);
  if (image.device) image.device->check_caller();
  void* stream = options.cuda_stream ? options.cuda_stream : image.device ? image.device->stream() : nullptr;
  auto lease = memory->begin_call(sized_plan.requirements, stream);
  const ir::Program& p = image.program;
  const std::size_t np = p.params.size();
  const ir::Schedule& s = image.schedule;
  for (std::size_t t = 0; t < transient_offsets.size(); ++t)
    buffers[np + t].data = static_cast<std::byte*>(lease.base(device_of(s.transients[t].storage))) + transient_offsets[t];
  std::int32_t error = 0;
  // While tuning, the forms take turns (LoopForm).
  const LoopForm form = loop_form.load(std::memory_order_relaxed);
  const bool vector = form == LoopForm::vector || (form == LoopForm::tuned && loop_form_calls % 2 == 0);
  const ff_call c{buffers.data(), tables.data(), scalars.data(), domains.data(), &error, num_threads,
                  image.options.parallel_threshold, vector ? ff_loop_vector : ff_loop_scalar};
  if (image.device) {
    // Outputs come back only from a call without failed checks: nothing to save or restore.
    error = image.device->run(c, {&param_names, &field_spans, &table_spans, stream});
  } else {
    save_outputs(checked_outputs, saved_outputs);
    run_in_loop_form(c);
    if (error) restore_outputs(checked_outputs, saved_outputs);
  }
  if (error & ff_error_dynamic_offset)
    throw DomainError(fmt::format("program '{}': a dynamic offset read outside a field's extent; no "
                                  "argument was changed", p.name));
  if (error & ff_error_missing_neighbor)
    throw DomainError(fmt::format("program '{}': reads through a missing neighbour (-1) with a fixed-index shift; "
                                  "only reductions skip missing neighbours", p.name));
}

// Runs the module; while tuning the loop form (LoopForm::tuned), times the call. The first call
// is a warm-up (pages of transients and outputs touched for the first time, cold caches), not
// counted; after loop_form_samples timed calls per form the faster form stays.
std::int32_t CompiledProgram::Impl::run_in_loop_form(const ff_call& c) {
  if (loop_form.load(std::memory_order_relaxed) != LoopForm::tuned) return run(&c);
  const auto start = std::chrono::steady_clock::now();
  const std::int32_t status = run(&c);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int timed = loop_form_calls++;  // 0: the warm-up
  double& best = loop_form_best[c.loop_form == ff_loop_vector ? 1 : 0];
  if (timed > 0) best = std::min(best, seconds);
  if (loop_form_calls == 1 + 2 * loop_form_samples)
    loop_form.store(loop_form_best[1] < loop_form_best[0] ? LoopForm::vector : LoopForm::scalar, std::memory_order_relaxed);
  return status;
}

void CompiledProgram::Impl::start_loop_form(LoopForm asked) {
  check_loop_form(image.program.name, asked);
  // A module with one form has nothing to time.
  loop_form.store(asked == LoopForm::tuned && !image.loop_forms ? LoopForm::scalar : asked, std::memory_order_relaxed);
  loop_form_calls = 0;
  loop_form_best[0] = loop_form_best[1] = HUGE_VAL;
}

void CompiledProgram::Impl::set_loop_form(LoopForm asked) {
  CallScope scope(*this);  // the tuning state belongs to the calls
  start_loop_form(asked);
}

// Binds and checks a call's arguments (the fast path skips what did not change since the last
// call) and moves its scalars into place; throws before anything runs.
void CompiledProgram::Impl::prepare_call(const Arguments& args) {
  const ir::Program& p = image.program;
  switch (what_changed(args)) {
    case Change::nothing: break;
    case Change::field_data: rebind_field_data(); break;
    case Change::everything: bind(args); break;
  }
  // Scalars may change between calls; sizes (and the plan) only when an int scalar changed.
  bool sizes_changed = false;
  for (std::size_t a = 0; a < args.entries().size(); ++a) {
    const auto& e = args.entries()[a];
    if (e.kind != Arguments::Entry::Kind::scalar) continue;
    const int i = binding.param_of_entry[a];  // same order as the bound call: no name lookup
    const DType want = p.params[i].type.dtype;
    if (e.scalar.dtype() != want && !(is_integral(want) && is_integral(e.scalar.dtype()))) {
      binding.valid = false;
      bind(args);  // reports the mistyped scalar with the reference's message
    }
    ff_scalar v{is_floating(want) ? 0 : e.scalar.as_int(), is_floating(want) ? e.scalar.as_double() : 0.0};
    if (is_integral(want) && (v.i != scalars[i].i || !sized)) sizes_changed = true;
    next_scalars[i] = v;
  }
  if (sizes_changed) {
    SizeMap new_sizes = sizes;
    for (std::size_t i = 0; i < p.params.size(); ++i)
      if (p.params[i].kind == ir::ParamKind::scalar && is_integral(p.params[i].type.dtype))
        new_sizes[p.params[i].name] = next_scalars[i].i;
    if (new_sizes != sizes) {
      binding.bound.sizes = new_sizes;
      ir::check_output_domains(p, binding.bound);
      resize(new_sizes);
      check_reads();
    }
  }
  scalars.swap(next_scalars);
}

CompiledProgram::CompiledProgram(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
CompiledProgram::CompiledProgram(CompiledProgram&&) noexcept = default;
CompiledProgram& CompiledProgram::operator=(CompiledProgram&&) noexcept = default;
CompiledProgram::~CompiledProgram() = default;

void CompiledProgram::operator()(const Arguments& args) { impl_->call(args); }
void CompiledProgram::operator()(const Arguments& args, const CallOptions& call) { impl_->call(args, call); }
void CompiledProgram::check(const Arguments& args) { impl_->check(args); }
const ir::Program& CompiledProgram::program() const { return impl_->image.program; }
Backend CompiledProgram::backend() const { return impl_->image.options.backend; }
Layout CompiledProgram::layout() const { return impl_->layout; }
TransientMemoryMode CompiledProgram::memory_mode() const { return impl_->mode; }
LoopForm CompiledProgram::loop_form() const { return impl_->loop_form.load(std::memory_order_relaxed); }
void CompiledProgram::set_loop_form(LoopForm form) { impl_->set_loop_form(form); }

std::vector<WorkspaceRequirement> CompiledProgram::workspace_requirements(const SizeMap& sizes) const {
  return impl_->plan_for(sizes).requirements;
}

void CompiledProgram::prepare(const SizeMap& sizes) {
  // Persistent and external memory is obtained now, on the calling thread's current device,
  // which must be the program's (as for a call).
  if (impl_->image.device) impl_->image.device->check_caller();
  impl_->memory->prepare(impl_->plan_for(sizes).requirements);
}
void CompiledProgram::set_external_workspace(Device device, Workspace workspace) {
  impl_->memory->set_external_workspace(device, std::move(workspace));
}

MemoryPlan CompiledProgram::memory_plan(const SizeMap& sizes) const { return impl_->plan_for(sizes).plan; }
MemoryStats CompiledProgram::memory_stats() const { return impl_->memory->stats(); }
const std::string& CompiledProgram::generated_source() const { return impl_->image.source; }
std::string CompiledProgram::schedule_text() const {
  return impl_->compiled() ? impl_->image.schedule.print() : ir::print(impl_->image.program);
}
double CompiledProgram::compile_seconds() const { return impl_->image.compile_seconds; }
bool CompiledProgram::cache_hit() const { return impl_->image.cache_hit; }

}  // namespace fieldflow
