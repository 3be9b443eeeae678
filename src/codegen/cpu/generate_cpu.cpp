// C++/OpenMP code generation. Each kernel becomes one function: OpenMP loop nests (or a column
// group's column loop) around the per-point code the CUDA generator shares (codegen/common).
#include "codegen/cpu/generate_cpu.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <optional>

#include "codegen/common/point_emitter.h"
#include "codegen/common/loop_invariants.h"
#include "fieldflow/errors.h"

namespace fieldflow::codegen {

namespace {

using ir::Expr;
using ir::ExprKind;

// The test a loop with two forms branches on (has_loop_forms finds it).
constexpr const char* vector_form_chosen = "call->loop_form == ff_loop_vector";

// The entry of a kernel or column group `name`, whose work `name`_team runs on every thread of a
// team. Threads start only when there is enough work to pay for waking them (a few
// microseconds); the threshold is a call field (CompileOptions::parallel_threshold), so tests can
// force the parallel path on small sizes with the same module. Below it the team function runs on
// the calling thread without a parallel region: libgomp builds a one-thread team (an allocation
// and a free) for every region, even one whose `if` clause is false, which was about half the
// instructions of a 1-point call. Its orphaned worksharing loops then run every iteration. Called
// from inside the host's own active parallel region, an orphaned loop would bind to the host's
// team, so there a one-thread region is still opened.
std::string dispatcher(const std::string& name, const std::string& bounds, const std::string& work) {
  return fmt::format("static void {0}(const ff_call* call) {{\n{1}"
                     "  const bool spread = {2} > call->parallel_threshold && call->num_threads > 1;\n"
                     "  if (spread || omp_in_parallel()) {{\n"
                     "#pragma omp parallel num_threads(spread ? call->num_threads : 1)\n"
                     "    {0}_team(call);\n"
                     "  }} else {{\n"
                     "    {0}_team(call);\n"
                     "  }}\n}}\n\n",
                     name, bounds, work);
}

// A kernel as OpenMP loop nests around the shared per-point code.
class KernelEmitter : public PointEmitter {
 public:
  KernelEmitter(const ir::Schedule& s, int kidx, Decls& decls) : PointEmitter(s, kidx, decls, cpu_dialect()) {}

  // A standalone kernel: a function that each thread of the team runs (its loops are orphaned
  // worksharing constructs), started by a dispatcher (see dispatcher()). A zero-dimensional
  // kernel computes one value on the calling thread.
  std::string emit() {
    const bool zero_dimensional = k_.kind == ir::KernelKind::pointwise && loop_dims_.empty();
    std::string body = k_.kind == ir::KernelKind::scan ? emit_scan() : emit_pointwise();
    std::string head = fmt::format("// kernel {}: '{}' ({})\nstatic void kernel_{}{}(const ff_call* call) {{\n", kidx_,
                                   k_.name, k_.kind == ir::KernelKind::scan ? "scan" : "pointwise", kidx_,
                                   zero_dimensional ? "" : "_team");
    head += bounds() + empty_return();
    head += d_.text;
    std::string code = head + body + "}\n\n";
    if (!zero_dimensional) code += dispatcher(fmt::format("kernel_{}", kidx_), bounds() + empty_return(), points());
    return code;
  }

  // An empty box along any loop dimension is no work.
  std::string empty_return() const {
    std::string empty;
    for (const auto& d : loop_dims_) empty += fmt::format("{}{} <= {}", empty.empty() ? "" : " || ", hi(d), lo(d));
    return empty.empty() ? "" : fmt::format("  if ({}) return;\n", empty);
  }

  // This kernel inside a column group (fuse_columns): the horizontal loop variables belong to
  // the group; the vertical loop is this kernel's own. With a block (the group takes
  // `column_block` > 1 columns at once), the kernel runs on the block's columns [lo, hi) along
  // `block`: a pointwise kernel column after column, a scan level after level across the
  // block's columns, so their recurrences are independent chains in flight together.
  struct Block {
    Dimension dim;
    std::string lo, hi;
  };
  std::string emit_column(int ind, const std::optional<Block>& block) {
    Dimension kdim;
    for (const auto& d : loop_dims_)
      if (d.kind == DimKind::vertical) kdim = d;
    memo_.assign(1, {});
    const Point p = loop_point();
    // Known once the code that may check something has been generated.
    auto red = [&] { return std::string(uses_error_ ? " reduction(|:err)" : ""); };
    auto columns = [&](int at) { return for_header(var(block->dim), block->lo, block->hi, at); };
    auto column_range = [&] { return LoopRange{var(block->dim), block->lo, block->hi}; };
    const int in = block ? ind + 2 : ind + 1;  // the column's own code
    std::string code = fmt::format("{}{{  // kernel {}: '{}'\n", pad(ind), kidx_, k_.name);
    if (k_.kind == ir::KernelKind::pointwise) {
      std::string inner;
      store_value(p, inner, in + 1);
      const std::string simd = "#pragma omp simd" + red() + "\n";
      if (!block) code += unswitched_loop(simd, range(kdim), inner, in);
      else if (s_.layout == Layout::horizontal_fastest)  // level by level, a vector loop along the block's row
        code += loop(kdim, ind + 1) + unswitched_loop(simd, column_range(), inner, ind + 2) + pad(ind + 1) + "}\n";
      else  // column by column, a vector loop along each column
        code += columns(ind + 1) + unswitched_loop(simd, range(kdim), inner, ind + 2) + pad(ind + 1) + "}\n";
      return code + pad(ind) + "}\n";
    }
    const Expr& scan = *k_.value;
    if (block) carry_index_ = fmt::format("[{} - {}]", var(block->dim), block_start(block->dim));
    // Horizontal-fastest row blocks prefetch the next level's rows chunk by chunk (see below).
    const std::string chunk = block ? "xc_" + sanitize(block->dim.name) : "";
    const std::string prefetch =
        block && s_.layout == Layout::horizontal_fastest ? prefetch_next_level(scan, block->dim, chunk, ind + 3) : "";
    const int chunked = prefetch.empty() ? 0 : 1;
    const std::string body = scan_level(p, in + 1 + chunked);
    std::string rest;  // the chunked sweep's remainder: the body again, its own names
    if (chunked) {
      memo_.assign(1, {});
      rest = scan_level(p, in + 1);
    }
    for (std::size_t c = 0; c < scan.init.size(); ++c) {
      const std::string init = literal(scan.init[c], dialect_);
      if (!block) {
        code += fmt::format("{}{} c{} = {};\n", pad(ind + 1), ctype(scan.init[c].dtype()), c, init);
        continue;
      }
      code += fmt::format("{}{} c{}[{}];\n", pad(ind + 1), ctype(scan.init[c].dtype()), c, k_.column_block);
      code += columns(ind + 1) + fmt::format("{}{} = {};\n{}}}\n", pad(ind + 2), carry(static_cast<int>(c)), init,
                                             pad(ind + 1));
    }
    carry_index_.clear();
    code += fmt::format("{}for (std::int64_t st = 0; st < {} - {}; ++st) {{\n{}{}", pad(ind + 1), hi(kdim), lo(kdim),
                        pad(ind + 2), level(scan));
    if (block && chunked) {
      // Whole chunks loop a constant trip count (no vector prologue or epilogue per chunk: 8%
      // faster than a trip count of min(8, left)); the remainder runs the general body once.
      const std::string whole = "xw_" + sanitize(block->dim.name);
      code += fmt::format("{0}const std::int64_t {1} = {2} + ({3} - {2}) / {4} * {4};\n", pad(ind + 2), whole, block->lo,
                          block->hi, prefetch_chunk);
      code += fmt::format("{0}for (std::int64_t {1} = {2}; {1} < {3}; {1} += {4}) {{\n", pad(ind + 2), chunk, block->lo,
                          whole, prefetch_chunk) +
              prefetch +
              unswitched_loop("#pragma omp simd" + red() + "\n",
                              LoopRange{var(block->dim), chunk, fmt::format("{} + {}", chunk, prefetch_chunk)}, body, ind + 3) +
              pad(ind + 2) + "}\n";
      code += "#pragma omp simd" + red() + "\n" + for_header(var(block->dim), whole, block->hi, ind + 2) +
              rest + pad(ind + 2) + "}\n";
    } else if (block) {
      code += unswitched_loop("#pragma omp simd" + red() + "\n", column_range(), body, ind + 2);
    } else {
      code += body;
    }
    return code + pad(ind + 1) + "}\n" + pad(ind) + "}\n";
  }

  // Horizontal-fastest scans in a row block read, at every level, a stretch of a row of each field
  // (2 KiB at 256 columns); the next level's is a whole plane away, where the hardware
  // prefetchers start over and reach full speed only after several misses. So the sweep runs
  // along the row in chunks of a cache line of doubles and prefetches, before each chunk and for
  // each field it reads, the chunk's row that the next level reads first. The prefetches sit
  // outside the chunk's vector loop, which GCC 12 does not vectorise around a call (one inside
  // cost 3x the instructions). vadv 256x256x80, 2 threads, one process, modules interleaved with
  // the hand-written baseline: 14.3-14.5 ms without, 13.1-13.2 with a prefetch per element
  // (scalar), 11.1-11.2 ms chunked (hand-written 12.0-12.5); whole chunks of exactly 8, 7-8%
  // less again (12.1-12.3 -> 11.3-11.4 ms in other runs). Addresses are formed as integers: a
  // prefetch past a field's end must not be pointer arithmetic outside it (prefetches never
  // fault).
  static constexpr int prefetch_chunk = 8;
  std::string prefetch_next_level(const Expr& scan, const Dimension& along, const std::string& chunk, int ind) {
    // Per field, over its plain reads (loop indices plus constant offsets), the point to prefetch:
    // the furthest level read ahead in the sweep's direction, plus one; the smallest offset along
    // the others; the chunk's start along the block.
    std::map<std::string, Point> ahead;
    for (const ir::Access& a : k_.accesses) {
      if (s_.transient_index(a.buffer) >= 0) continue;  // block buffers: in cache already
      const bool plain = std::all_of(a.dims.begin(), a.dims.end(), [](const ir::DimAccess& d) {
        return d.kind == ir::DimAccess::Kind::loop;
      });
      const bool along_scan = std::any_of(a.dims.begin(), a.dims.end(), [&](const ir::DimAccess& d) {
        return d.dim == scan.dim;
      });
      if (!plain || !along_scan) continue;
      auto [it, first] = ahead.try_emplace(a.buffer, loop_point());
      for (Index& i : it->second)
        for (const ir::DimAccess& d : a.dims) {
          if (!(i.dim == d.dim)) continue;
          const bool sweep = d.dim == scan.dim;
          const std::int64_t o = !sweep ? d.min_offset : scan.forward ? d.max_offset + 1 : d.min_offset - 1;
          i.offset = first ? o : sweep && scan.forward ? std::max(i.offset, o) : std::min(i.offset, o);
        }
    }
    std::string code, unused;
    for (auto& [buffer, q] : ahead) {
      for (Index& i : q)
        if (i.dim == along) i.base = chunk;
      const std::string b = use_buffer(buffer, false);
      code += fmt::format("{}__builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>({}) + "
                          "std::uintptr_t({}) * {}));\n",
                          pad(ind), b, element(buffer, q, unused, ind, false), size_of(buffer_type(buffer).first));
    }
    return code;
  }

  static std::string for_header(const std::string& x, const std::string& from, const std::string& to, int ind) {
    return fmt::format("{0}for (std::int64_t {1} = {2}; {1} < {3}; ++{1}) {{\n", pad(ind), x, from, to);
  }
  std::string loop(const Dimension& d, int ind) const { return for_header(var(d), lo(d), hi(d), ind); }

  struct LoopRange {
    std::string var, lo, hi;
  };
  LoopRange range(const Dimension& d) const { return {var(d), lo(d), hi(d)}; }

  // `pragma`, then the loop over `r` (at `ind`) around `body`. Where the body branches on
  // conditions that do not change along the loop (a boundary level, in a loop across columns), a
  // copy for "all of them false" comes first. Where it branches on the loop's own index against
  // such a bound (a boundary level, in a loop along a column), the loop runs piece by piece
  // between the values where a branch may change direction, each piece in the copy for "all
  // false" or the general one (loop_invariants.h).
  std::string unswitched_loop(const std::string& pragma, const LoopRange& r, const std::string& body, int ind) const {
    const UnswitchedLoopBody u = unswitch_invariant_branches(body, r.var);
    const auto plain = [&](const std::string& b, const std::string& from, const std::string& to, int at) {
      return pragma + for_header(r.var, from, to, at) + b + pad(at) + "}\n";
    };
    if (u.conditions.empty() && u.loop_conditions.empty()) return plain(body, r.lo, r.hi, ind);
    if (u.loop_conditions.empty()) {
      std::string none;
      for (const auto& c : u.conditions) none += fmt::format("{}!({})", none.empty() ? "" : " && ", c);
      return versioned(none, "no boundary branch taken", "", plain(u.fast_body, r.lo, r.hi, ind), plain(body, r.lo, r.hi, ind),
                       ind);
    }
    std::string any;
    for (const auto* list : {&u.conditions, &u.loop_conditions})
      for (const auto& c : *list) any += fmt::format("{}({})", any.empty() ? "" : " || ", c);
    std::string code = fmt::format("{0}{{  // piecewise: each branch on {1} keeps its direction within a piece\n"
                                   "{0}  const std::int64_t seg_lo = {2}, seg_hi = {3};\n"
                                   "{0}  for (std::int64_t seg_from = seg_lo; seg_from < seg_hi;) {{\n"
                                   "{0}    std::int64_t seg_to = seg_hi;\n",
                                   pad(ind), r.var, r.lo, r.hi);
    // A piece ends before the next break B or B + 1 (B + 1 written so that it cannot overflow).
    for (const auto& b : u.breaks)
      code += fmt::format("{0}    {{\n"
                          "{0}      const std::int64_t seg_b = {1};\n"
                          "{0}      if (seg_b > seg_from && seg_b < seg_to) seg_to = seg_b;\n"
                          "{0}      if (seg_b >= seg_from && seg_b < seg_to - 1) seg_to = seg_b + 1;\n"
                          "{0}    }}\n",
                          pad(ind), b);
    code += fmt::format("{0}    bool seg_taken;\n"
                        "{0}    {{\n"
                        "{0}      const std::int64_t {1} = seg_from;\n"
                        "{0}      seg_taken = {2};\n"
                        "{0}    }}\n",
                        pad(ind), r.var, any);
    code += versioned("!seg_taken", "no branch taken in this piece", "", plain(u.fast_body, "seg_from", "seg_to", ind + 3),
                      plain(body, "seg_from", "seg_to", ind + 3), ind + 2);
    return code + fmt::format("{0}    seg_from = seg_to;\n{0}  }}\n{0}}}\n", pad(ind));
  }

  // `if (condition) { prelude fast } else { general }` at `ind`: a loop's versions.
  std::string versioned(const std::string& condition, const std::string& comment, const std::string& prelude,
                        const std::string& fast, const std::string& general, int ind) const {
    return fmt::format("{0}if ({1}) {{  // {2}\n{3}{4}{0}}} else {{\n{5}{0}}}\n", pad(ind), condition, comment, prelude, fast,
                       general);
  }

  std::string emit_pointwise() {
    const auto order = loop_order();
    const int n = static_cast<int>(order.size());
    memo_.assign(1, {});
    std::string inner;
    const Point p = loop_point();
    store_value(p, inner, n + 1);
    // In-kernel checks (dynamic offsets, fixed neighbour shifts) OR their failures into `err`.
    const std::string red = uses_error_ ? " reduction(|:err)" : "";
    const std::string report = uses_error_ ? "if (err) __atomic_fetch_or(call->error, err, __ATOMIC_RELAXED);\n" : "";
    std::string code;
    if (n == 0) {  // a zero-dimensional output: one value, no loop
      code += uses_error_ ? "  std::int32_t err = 0;\n" : "";
      return indent_nested(code + "  {\n" + inner + "  }\n" + (report.empty() ? "" : "  " + report));
    }
    if (n == 1) {
      // This thread's share of the loop: OpenMP's static schedule written out, so that the
      // vector loop reduces failed checks into the thread's own `err` (a worksharing loop may
      // only reduce into a variable shared by the team).
      const Dimension& d = order[0];
      code += uses_error_ ? "  std::int32_t err = 0;\n" : "";
      code += fmt::format("  const std::int64_t n_ = {1} - {0}, nt_ = omp_get_num_threads(), t_ = omp_get_thread_num();\n"
                          "  const std::int64_t q_ = n_ / nt_, r_ = n_ % nt_;\n"
                          "  const std::int64_t b_ = {0} + t_ * q_ + (t_ < r_ ? t_ : r_), e_ = b_ + q_ + (t_ < r_ ? 1 : 0);\n",
                          lo(d), hi(d));
      code += "#pragma omp simd" + red + "\n" +
              fmt::format("  for (std::int64_t {0} = b_; {0} < e_; ++{0}) {{\n", var(d)) + inner + "  }\n" +
              (report.empty() ? "" : "  " + report);
      return indent_nested(code);
    }
    if (auto blocked = element_blocks(order, inner, red, report)) return indent_nested(*blocked);
    code += "  {\n";
    code += uses_error_ ? "    std::int32_t err = 0;\n" : "";
    code += n > 2 ? fmt::format("#pragma omp for collapse({}) schedule(static)\n", n - 1)
                  : std::string("#pragma omp for schedule(static)\n");
    for (int a = 0; a < n - 1; ++a) code += loop(order[a], 2 + a);
    // What does not change along the vector loop runs once before it. Where every neighbour
    // the reductions read is present, a copy of the loop with the masks fixed to true has no
    // selects left; where the orientation-like factors are +-1, a copy has one product less per
    // such term (loop_invariants.h).
    const HoistedLoopBody split = hoist_loop_invariants(inner, var(order[n - 1]));
    const auto vector_loop = [&](const std::string& body, int ind) {
      return unswitched_loop("#pragma omp simd" + red + "\n", range(order[n - 1]), body, ind);
    };
    // Where every pair of loads summed in the body shares one column (the vertex's own, at
    // each end of its edges), a copy loads it once (loop_invariants.h).
    const auto shared_versions = [&](const std::string& body, int ind) {
      const SharedColumnBody shared = share_common_columns(body, var(order[n - 1]));
      if (shared.condition.empty()) return vector_loop(body, ind);
      std::string candidates, others;
      for (const auto& statement : shared.candidates) candidates += pad(ind) + statement + "\n";
      for (const auto& statement : shared.fast_prelude) others += pad(ind + 1) + statement + "\n";
      return candidates + versioned(shared.condition, "one column shared by every pair", others,
                                    vector_loop(shared.fast_body, ind + 1), vector_loop(body, ind + 1), ind);
    };
    const auto unit_versions = [&](const HoistedLoopBody& loop, int ind) {
      if (loop.unit_factors.empty()) return shared_versions(loop.body, ind);
      std::string units, prelude;
      for (const auto& u : loop.unit_factors) units += fmt::format("{0}({1} == 1 || {1} == -1)", units.empty() ? "" : " && ", u);
      for (const auto& statement : loop.fast_prelude) prelude += pad(ind + 1) + statement + "\n";
      return versioned(units, "unit factors", prelude, shared_versions(loop.fast_body, ind + 1), vector_loop(loop.body, ind + 1), ind);
    };
    code += split.invariant;
    if (split.masks.empty()) {
      code += unit_versions(split, n + 1);
    } else {
      // Where every neighbour is present, every element is reached: the copy reads unguarded.
      HoistedLoopBody full = split;
      full.body = unguarded(full.body);
      full.fast_body = unguarded(full.fast_body);
      std::string full_row, fixed;
      for (const auto& m : split.masks) {
        full_row += (full_row.empty() ? "" : " && ") + m;
        fixed += fmt::format("{}{} = true", fixed.empty() ? "" : ", ", m);
      }
      code += versioned(full_row, "every neighbour present", fmt::format("{}  const bool {};\n", pad(n + 1), fixed),
                        unit_versions(full, n + 2), vector_loop(split.body, n + 2), n + 1);
    }
    for (int a = n; a >= 2; --a) code += pad(a) + "}\n";
    code += (report.empty() ? "" : "    " + report) + "  }\n";
    return indent_nested(code);
  }

  // A horizontal-fastest mesh kernel runs levels outside and elements inside, so at every level
  // it would walk the neighbour tables again (chained ones too), with the stand-ins and masks for
  // missing neighbours and the per-element weights: integer loads and selects at every point, 4-30x
  // its vertical-fastest time (docs/performance.md). Instead the elements run in blocks: per
  // block, what does not depend on the level is computed once per element into small arrays,
  // then the levels run over the block and read it back with unit-stride loads, the way tuned
  // model codes on this layout are written (ICON's nproma blocks; bench/baselines.cpp). Within a
  // block the elements fall into runs by kind: those whose neighbours are all present take the
  // copy of the loop without selects or guards (on a mesh with a boundary every block holds
  // boundary elements), and of those, the ones whose sums of pairs of loads share a column (the
  // vertex's own, at one end of each of its edges: share_common_columns) the copy that loads it
  // once. A block whose unit-like factors are all +-1 takes the copies with those products folded.
  // Empty where nothing worth keeping is level-invariant (no table is read there).
  static constexpr int element_block = 128;
  std::optional<std::string> element_blocks(const std::vector<Dimension>& order, const std::string& inner,
                                            const std::string& red, const std::string& report) {
    if (order.size() != 2 || s_.layout != Layout::horizontal_fastest || order[0].kind != DimKind::vertical ||
        order[1].kind == DimKind::vertical)
      return std::nullopt;
    const Dimension& kdim = order[0];
    const std::string x = var(order[1]);
    const HoistedLoopBody per_element = hoist_loop_invariants(inner, var(kdim));
    if (!reads_a_table(per_element.invariant)) return std::nullopt;
    // The bodies of the loop over the levels of one element, per kind: plain, and with the unit
    // factors folded.
    struct Copies {
      std::string general, full, shared;
    };
    Copies plain{per_element.body, unguarded(per_element.body), ""}, folded{per_element.fast_body, unguarded(per_element.fast_body), ""};
    const SharedColumnBody shared = share_common_columns(plain.full, var(kdim));
    const bool sharing = !shared.condition.empty();
    plain.shared = shared.fast_body;
    folded.shared = folded.full;  // folding changes products, not loads: the same pairs, else no sharing
    if (sharing && !per_element.unit_factors.empty()) {
      const SharedColumnBody s = share_common_columns(folded.full, var(kdim));
      if (s.candidates == shared.candidates && s.fast_prelude == shared.fast_prelude && s.condition == shared.condition)
        folded.shared = s.fast_body;
    }
    // What a copy does not read is neither kept per element nor counted in the block's size.
    for (Copies* c : {&plain, &folded})
      for (std::string* body : {&c->general, &c->full, &c->shared}) *body = without_dead_locals(*body);
    std::string hoisted = per_element.invariant;
    for (const auto& statement : per_element.fast_prelude) hoisted += pad(4) + statement + "\n";
    if (sharing)
      for (const auto* statements : {&shared.candidates, &shared.fast_prelude})
        for (const auto& statement : *statements) hoisted += pad(4) + statement + "\n";
    const auto bytes_of = [](const std::vector<HoistedLocal>& locals) {
      std::size_t bytes = 0;
      for (const auto& l : locals) bytes += l.type == "bool" ? 1 : l.type == "float" || l.type == "std::int32_t" ? 4 : 8;
      return bytes;
    };
    // What one level of a block reads back is what one copy reads: that stays within a 32 KiB L1
    // data cache. Larger blocks pay the vector form's setup per run over more elements and give
    // the level loops longer unit-stride streams (fvm_nabla hf on the torus: 3.3 ms at 32
    // elements, 2.6-3.1 at 64; with the whole-block copy and grouped arrays below, nabla4 hf on
    // the torus 0.90 of the hand-written code at 64 elements, 1.02 at 128, where fvm_nabla on the
    // mesh with a boundary went from 1.17 to 1.04, its blocks of several runs more often;
    // docs/performance.md).
    std::string every_copy;
    std::size_t bytes = 0;
    for (const Copies* c : {&plain, &folded})
      for (const std::string* body : {&c->general, &c->full, &c->shared}) {
        every_copy += *body;
        bytes = std::max(bytes, bytes_of(hoisted_locals_read(hoisted, *body)));
      }
    const std::vector<HoistedLocal> kept = hoisted_locals_read(hoisted, every_copy);
    // The kept values live in one two-dimensional array per type, `blk_g<t>_[value][element]`,
    // not one array each: a level's loop then addresses all of them from a few bases with
    // constant displacements, where 30 separate arrays each took a register of their own and
    // GCC reloaded their addresses from the stack in the vector loop (nabla4 hf on the torus: 47
    // stack accesses per 8 elements against the hand-written loop's 21; docs/performance.md).
    std::vector<std::string> group_types;
    std::map<std::string, std::string> slot;  // local -> its element row, "blk_g<t>_[<i>]"
    std::vector<int> group_sizes;
    for (const auto& l : kept) {
      auto t = std::find(group_types.begin(), group_types.end(), l.type);
      if (t == group_types.end()) {
        group_types.push_back(l.type);
        group_sizes.push_back(0);
        t = group_types.end() - 1;
      }
      const auto g = static_cast<std::size_t>(t - group_types.begin());
      slot[l.name] = fmt::format("blk_g{}_[{}]", g, group_sizes[g]++);
    }
    int block = element_block;
    while (block > 8 && bytes * static_cast<std::size_t>(block) > 32 * 1024) block /= 2;

    std::string all_present, units;
    for (const auto& m : per_element.masks) all_present += " && " + m;
    for (const auto& u : per_element.unit_factors) units += fmt::format(" && ({0} == 1 || {0} == -1)", u);
    // Each element's kind: 0 some neighbour missing, 1 every neighbour present, 2 that and one
    // column shared by every pair.
    const bool kinds = !all_present.empty() || sharing;
    std::string code = "  {\n";
    code += uses_error_ ? "    std::int32_t err = 0;\n" : "";
    code += "#pragma omp for schedule(static)\n";
    code += fmt::format("    for (std::int64_t blk_ = {0}; blk_ < {1}; blk_ += {2}) {{\n"
                        "      const std::int64_t blk_hi_ = {1} - blk_ < {2} ? {1} : blk_ + {2};\n",
                        lo(order[1]), hi(order[1]), block);
    for (std::size_t g = 0; g < group_types.size(); ++g)
      code += fmt::format("      {} blk_g{}_[{}][{}];\n", group_types[g], g, group_sizes[g], block);
    if (kinds) code += fmt::format("      unsigned char blk_kind_[{}];\n", block);
    if (!units.empty()) code += "      bool blk_units_ = true;\n";
    code += for_header(x, "blk_", "blk_hi_", 3) + hoisted;
    for (const auto& l : kept) code += fmt::format("        {}[{} - blk_] = {};\n", slot.at(l.name), x, l.name);
    if (kinds)
      code += fmt::format("        blk_kind_[{} - blk_] = (true{}) ? {} : 0;\n", x, all_present,
                          sharing ? fmt::format("(({}) ? 2 : 1)", shared.condition) : "1");
    if (!units.empty()) code += fmt::format("        blk_units_ = blk_units_{};\n", units);
    code += "      }\n";
    if (kinds)  // the block's runs of elements of one kind
      code += fmt::format("      std::int64_t blk_run_[{0} + 1];\n"
                          "      unsigned char blk_run_kind_[{0}];\n"
                          "      int blk_runs_ = 0;\n"
                          "      for (std::int64_t i_ = blk_; i_ < blk_hi_;) {{\n"
                          "        const unsigned char kind_ = blk_kind_[i_ - blk_];\n"
                          "        blk_run_[blk_runs_] = i_;\n"
                          "        blk_run_kind_[blk_runs_++] = kind_;\n"
                          "        while (i_ < blk_hi_ && blk_kind_[i_ - blk_] == kind_) ++i_;\n"
                          "      }}\n"
                          "      blk_run_[blk_runs_] = blk_hi_;\n",
                          block);
    // A level's loop over elements [from, to) of the block, each element's kept values read back
    // (the masks fixed to true in the copies for elements whose neighbours are all present). A
    // block without runs is one loop, left to simd. The copies that run on the runs come twice,
    // scalar and forced into vector form (ff_call::loop_form picks), because which is faster
    // depends on the machine: the vector form turns their neighbour loads into gathers, and made
    // c2e2co_sum 2x slower on an AMD EPYC with AVX-512 (3.6 ms against 1.7) but every mesh kernel
    // faster on one without (Zen 3, where GCC emulates the gathers with scalar loads and inserts:
    // fvm_nabla 5.6 ms to 2.6, its divisions vectorised; docs/performance.md). The runtime times
    // both per instance (LoopForm::tuned). GCC 12 does not vectorise the general copy even when
    // asked (its guards are bools loaded from the block's arrays, for which it finds no vector mask
    // type), and with those masks widened so that it does, the bounded-mesh kernels were no faster.
    // Which form a loop over elements takes: the one ff_call::loop_form chooses (both copies), or
    // one of them, where the choice was made outside.
    enum class Form { chosen, vector, scalar };
    const auto elements = [&](const std::string& body, bool all_neighbours, const std::string& from,
                              const std::string& to, int ind, Form form) {
      std::string loads;
      for (const auto& l : hoisted_locals_read(hoisted, body)) {
        const bool fixed = all_neighbours && std::count(per_element.masks.begin(), per_element.masks.end(), l.name) > 0;
        loads += fixed ? fmt::format("{}const bool {} = true;\n", pad(ind + 1), l.name)
                       : fmt::format("{}const {} {} = {}[{} - blk_];\n", pad(ind + 1), l.type, l.name, slot.at(l.name), x);
      }
      const HoistedLoopBody level = hoist_loop_invariants(loads + body, x);
      const std::string simd = "#pragma omp simd" + red + "\n";
      const LoopRange range{x, from, to};
      if (!kinds || form == Form::vector) return level.invariant + unswitched_loop(simd, range, level.body, ind);
      if (form == Form::scalar) return level.invariant + unswitched_loop("", range, level.body, ind);
      return level.invariant + versioned(vector_form_chosen, "vector form (gathers)", "",
                                         unswitched_loop(simd, range, level.body, ind + 1),
                                         unswitched_loop("", range, level.body, ind + 1), ind);
    };
    // A block that is one run (every block of a torus; on a mesh with a boundary all but those
    // holding boundary rows) runs its copy over the whole block, the form chosen once outside the
    // levels, so a level's loop is that one loop and nothing else competes for its registers. With
    // the per-element values grouped by type and blocks of 128, this took nabla4 hf on the torus
    // (one thread) from 0.7 of the hand-written code to 1.0, where none of the three alone did
    // (docs/performance.md).
    const auto whole_block = [&](const std::string& body, bool all_neighbours, int ind) {
      const auto in_form = [&](Form form) {
        return loop(kdim, ind + 1) + elements(body, all_neighbours, "blk_", "blk_hi_", ind + 2, form) + pad(ind + 1) + "}\n";
      };
      return versioned(vector_form_chosen, "vector form (gathers)", "", in_form(Form::vector), in_form(Form::scalar), ind);
    };
    const auto levels = [&](const Copies& c, int ind) {
      if (!kinds)
        return loop(kdim, ind) + elements(c.general, false, "blk_", "blk_hi_", ind + 1, Form::chosen) + pad(ind) + "}\n";
      // Blocks of several runs: per level, each run in its kind's copy.
      const auto runs = [&](int at) {
        const std::string from = "blk_run_[run_]", to = "blk_run_[run_ + 1]";
        const int in = at + (sharing ? 3 : 2);
        std::string copies = all_present.empty()
                                 ? elements(c.general, false, from, to, in, Form::chosen)
                                 : versioned("blk_run_kind_[run_] != 0", "every neighbour present", "",
                                             elements(c.full, true, from, to, in + 1, Form::chosen),
                                             elements(c.general, false, from, to, in + 1, Form::chosen), in);
        if (sharing)
          copies = versioned("blk_run_kind_[run_] == 2", "one column shared by every pair", "",
                             elements(c.shared, true, from, to, at + 3, Form::chosen), copies, at + 2);
        return loop(kdim, at) + fmt::format("{0}for (int run_ = 0; run_ < blk_runs_; ++run_) {{\n", pad(at + 1)) + copies +
               pad(at + 1) + "}\n" + pad(at) + "}\n";
      };
      const int at = ind + (sharing ? 2 : 1);
      std::string one_run = all_present.empty() ? whole_block(c.general, false, at) : whole_block(c.full, true, at);
      if (sharing)
        one_run = versioned("blk_run_kind_[0] == 2", "one column shared by every pair", "", whole_block(c.shared, true, at),
                            one_run, ind + 1);
      return versioned(all_present.empty() ? "blk_runs_ == 1" : "blk_runs_ == 1 && blk_run_kind_[0] != 0",
                       "one run: the whole block in one copy", "", one_run, runs(ind + 1), ind);
    };
    if (units.empty())
      code += levels(plain, 3);
    else
      code += versioned("blk_units_", "unit factors in the whole block", "", levels(folded, 4), levels(plain, 4), 3);
    code += "    }\n";
    return code + (report.empty() ? "" : "    " + report) + "  }\n";
  }

  // Whether `code` loads from a neighbour table: indexes one of the pointers use_table declared.
  bool reads_a_table(const std::string& code) const {
    const auto identifier_char = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
    for (const std::string& table : d_.tables)
      for (std::size_t at = code.find(table + "["); at != std::string::npos; at = code.find(table + "[", at + 1))
        if (at == 0 || !identifier_char(code[at - 1])) return true;
    return false;
  }

  std::string emit_scan() {
    const Expr& scan = *k_.value;
    const Dimension kdim = scan.dim;
    std::vector<Dimension> horizontal;
    for (const auto& d : loop_order())
      if (!(d == kdim)) horizontal.push_back(d);
    const int nc = static_cast<int>(scan.init.size());
    const int h = static_cast<int>(horizontal.size());
    const bool vertical_inner = s_.layout == Layout::vertical_fastest;
    const std::string level_line = level(scan);
    memo_.assign(1, {});
    const Point p = loop_point();
    const int ind = vertical_inner ? h + 3 : h + 4;
    const std::string body = scan_level(p, ind);
    std::string code = "  {\n";
    code += uses_error_ ? "    std::int32_t err = 0;\n" : "";
    if (vertical_inner) {
      // Column by column: the carry stays in registers along the sequential vertical sweep.
      if (h > 0) {
        code += h > 1 ? fmt::format("#pragma omp for collapse({}) schedule(static)\n", h) : "#pragma omp for schedule(static)\n";
        for (int a = 0; a < h; ++a) code += loop(horizontal[a], 2 + a);
      } else {
        code += "#pragma omp single\n    {\n";
      }
      for (int c = 0; c < nc; ++c)
        code += fmt::format("{}{} c{} = {};\n", pad(h + 2), ctype(scan.init[c].dtype()), c, literal(scan.init[c], dialect_));
      code += fmt::format("{}for (std::int64_t st = 0; st < {} - {}; ++st) {{\n{}{}", pad(h + 2), hi(kdim), lo(kdim),
                          pad(h + 3), level_line);
      code += body + pad(h + 2) + "}\n";
      for (int a = h + 1; a >= 2; --a) code += pad(a) + "}\n";
      if (h == 0) code += "    }\n";
    } else {
      // Level by level, each vectorised over the horizontal: the carry is the previous level of
      // the output itself. Static schedules give every thread the same columns at every level,
      // so no barrier is needed between levels.
      code += fmt::format("    for (std::int64_t st = 0; st < {} - {}; ++st) {{\n      {}", hi(kdim), lo(kdim), level_line);
      if (h == 0) code += "#pragma omp single\n      {\n";
      // A worksharing loop cannot reduce into the thread's private `err`: no simd when checking.
      else if (h == 1) code += uses_error_ ? "#pragma omp for schedule(static) nowait\n" : "#pragma omp for simd schedule(static) nowait\n";
      else code += fmt::format("#pragma omp for collapse({}) schedule(static) nowait\n", h - 1);
      for (int a = 0; a < h; ++a) {
        if (h > 1 && a == h - 1) code += std::string("#pragma omp simd") + (uses_error_ ? " reduction(|:err)" : "") + "\n";
        code += loop(horizontal[a], 3 + a);
      }
      Point prev = p;
      for (auto& i : prev)
        if (i.dim == kdim) i.offset = scan.forward ? -1 : 1;
      std::string carry_in;
      for (int c = 0; c < nc; ++c) {
        const std::string b = use_buffer(k_.outputs[c], true);
        carry_in += fmt::format("{}{} c{} = st == 0 ? {} : {}[{}];\n", pad(ind), ctype(scan.init[c].dtype()), c,
                                literal(scan.init[c], dialect_), b, element(k_.outputs[c], prev, carry_in, ind, false));
      }
      code += carry_in + body;
      for (int a = h + 2; a >= 3; --a) code += pad(a) + "}\n";
      if (h == 0) code += "      }\n";
      code += "    }\n";
    }
    code += uses_error_ ? "    if (err) __atomic_fetch_or(call->error, err, __ATOMIC_RELAXED);\n  }\n" : "  }\n";
    return indent_nested(code);
  }

  static std::string indent_nested(const std::string& code) {
    std::string out;
    for (std::size_t pos = 0; pos < code.size();) {
      const std::size_t nl = code.find('\n', pos);
      const std::string line = code.substr(pos, nl - pos);
      out += (line.rfind("#pragma", 0) == 0 ? "" : "  ") + line + "\n";
      pos = nl == std::string::npos ? code.size() : nl + 1;
    }
    return out;
  }
};

// Kernels [first, last] of a column group: each thread takes a block of whole columns (one
// column, or column_block of them along ir::column_block_dim) and runs every kernel of the group
// on it before the next, so column-local transients fit in one block per thread.
// The statement kernels of a group share one horizontal box (fuse_columns checks it), but a
// transient producer covers what its readers need, which may be more or less than that box when
// a reader is outside the group. So the columns loop over the union of the kernels' boxes, and
// each kernel runs only on the columns of its own box.
std::string emit_column_group(const ir::Schedule& s, int first, int last) {
  Decls d;
  std::vector<std::unique_ptr<KernelEmitter>> kernels;
  for (int k = first; k <= last; ++k) kernels.push_back(std::make_unique<KernelEmitter>(s, k, d));
  std::vector<Dimension> horizontal;
  for (const auto& dim : ir::kernel_loop_dims(s, s.kernels[first]))
    if (dim.kind != DimKind::vertical) horizontal.push_back(dim);
  const int h = static_cast<int>(horizontal.size());
  // A block of columns runs along one horizontal dimension (fuse_columns sizes it): the group's
  // innermost loop steps over the blocks, the others over single columns.
  const int block = s.kernels[first].column_block;
  const Dimension along = ir::column_block_dim(horizontal, s.layout);
  if (block > 1) {
    std::stable_partition(horizontal.begin(), horizontal.end(), [&](const Dimension& d) { return !(d == along); });
  }
  const std::string in_column = pad_text(h + 2);
  std::string columns;
  for (std::size_t kk = 0; kk < kernels.size(); ++kk) {
    auto& k = kernels[kk];
    std::string inside;
    for (const auto& dim : horizontal) {
      if (block > 1 && dim == along) continue;
      inside += fmt::format("{}{} >= {} && {} < {}", inside.empty() ? "" : " && ", KernelEmitter::var(dim), k->lo(dim),
                            KernelEmitter::var(dim), k->hi(dim));
    }
    if (block == 1) {
      columns += fmt::format("{}if ({}) {{\n", in_column, inside) + k->emit_column(h + 3, std::nullopt) + in_column + "}\n";
      continue;
    }
    // The block's columns inside this kernel's box.
    const int kidx = first + static_cast<int>(kk);
    const std::string lo = fmt::format("blo_k{}", kidx), hi = fmt::format("bhi_k{}", kidx);
    const std::string start = KernelEmitter::block_start(along);
    columns += fmt::format("{0}const std::int64_t {1} = fieldflow::abi::ff_max({3}, {4}), {2} = "
                           "fieldflow::abi::ff_min({3} + {5}, {6});\n",
                           in_column, lo, hi, start, k->lo(along), block, k->hi(along));
    inside += fmt::format("{}{} < {}", inside.empty() ? "" : " && ", lo, hi);
    columns += fmt::format("{}if ({}) {{\n", in_column, inside);
    if (s.kernels[kidx].kind == ir::KernelKind::scan && s.layout == Layout::vertical_fastest) {
      // A whole block (every block but a remainder) runs a copy whose loop across the block has
      // the constant trip count `block`: GCC unrolls it, and the scan's carries, `c0[block]`
      // indexed by constants, stay in registers from level to level instead of making a store
      // and a reload part of every level's dependency chain.
      const std::string whole = fmt::format("{} + {}", start, block);
      const std::string fast = k->emit_column(h + 4, KernelEmitter::Block{along, start, whole});
      const std::string general = k->emit_column(h + 4, KernelEmitter::Block{along, lo, hi});  // after `fast`: fresh names
      columns += k->versioned(fmt::format("{} == {} && {} == {}", lo, start, hi, whole), "a whole block", "", fast, general, h + 3);
    } else {
      columns += k->emit_column(h + 3, KernelEmitter::Block{along, lo, hi});
    }
    columns += in_column + "}\n";
  }
  bool err = false;
  for (auto& k : kernels) err |= k->uses_error();
  std::string bounds;
  for (auto& k : kernels) bounds += k->bounds();
  std::string work = "std::int64_t(0)";
  for (auto& k : kernels) work += " + " + k->points();
  std::string code = fmt::format("// kernels {}..{}: column group\nstatic void group_{}_team(const ff_call* call) {{\n",
                                 first, last, first);
  code += bounds + d.text;
  // The union of the non-empty kernel boxes (an empty box must not widen it).
  for (const auto& dim : horizontal) {
    const std::string v = KernelEmitter::var(dim);
    code += fmt::format("  std::int64_t lo_g_{0} = std::numeric_limits<std::int64_t>::max(), hi_g_{0} = "
                        "std::numeric_limits<std::int64_t>::min();\n", v);
    for (auto& k : kernels)
      code += fmt::format("  if ({0} > 0) {{ lo_g_{1} = fieldflow::abi::ff_min(lo_g_{1}, {2}); hi_g_{1} = "
                          "fieldflow::abi::ff_max(hi_g_{1}, {3}); }}\n",
                          k->points(), v, k->lo(dim), k->hi(dim));
  }
  code += fmt::format("  if ({} == 0) return;\n", work);
  code += "  {\n    const std::int64_t tid = omp_get_thread_num();\n";
  code += d.column_locals;
  code += err ? "    std::int32_t err = 0;\n" : "";
  code += fmt::format("#pragma omp for collapse({}) schedule(static)\n", h);
  for (int a = 0; a < h; ++a) {
    if (block > 1 && a == h - 1) {  // a block's first column; each kernel cuts the block at its box's end
      code += fmt::format("{0}for (std::int64_t {1} = lo_g_{2}; {1} < hi_g_{2}; {1} += {3}) {{\n", pad_text(2 + a),
                          KernelEmitter::block_start(along), KernelEmitter::var(along), block);
      continue;
    }
    code += fmt::format("{0}for (std::int64_t {1} = lo_g_{1}; {1} < hi_g_{1}; ++{1}) {{\n", pad_text(2 + a),
                        KernelEmitter::var(horizontal[a]));
  }
  code += columns;
  for (int a = h - 1; a >= 0; --a) code += pad_text(2 + a) + "}\n";
  code += err ? "    if (err) __atomic_fetch_or(call->error, err, __ATOMIC_RELAXED);\n" : "";
  code += "  }\n}\n\n";
  return code + dispatcher(fmt::format("group_{}", first), bounds + fmt::format("  if ({} == 0) return;\n", work), work);
}

}  // namespace

std::string generate_cpu_source(const ir::Schedule& s, const CpuCodegenOptions& options) {
  const std::string& prefix = options.symbol_prefix;
  const bool identifier = !prefix.empty() && !std::isdigit(static_cast<unsigned char>(prefix[0])) &&
                          sanitize(prefix) == prefix;
  FIELDFLOW_ASSERT(identifier, "symbol prefix '" + prefix + "' does not start a C identifier");
  std::string src = fmt::format(
      "// Generated by fieldflow from program '{}' (layout {}). Do not edit.\n"
      "#include <fieldflow/abi.h>\n#include <omp.h>\n#include <cstdint>\n#include <limits>\n\n"
      "namespace {{\n\n",
      s.program.name, to_string(s.layout));
  std::string calls;
  for (std::size_t k = 0; k < s.kernels.size();) {
    // Scan consumers are fused on the GPU only (fuse_scan_consumers): the CPU keeps them in cache.
    FIELDFLOW_ASSERT(s.kernels[k].fused_into < 0, "a kernel fused into a scan in a schedule lowered for the CPU");
    if (s.kernels[k].column_group < 0) {
      Decls d;
      src += KernelEmitter(s, static_cast<int>(k), d).emit();
      calls += fmt::format("  kernel_{}(call);\n  if (*call->error) return *call->error;\n", k);
      ++k;
      continue;
    }
    std::size_t last = k;
    while (last + 1 < s.kernels.size() && s.kernels[last + 1].column_group == s.kernels[k].column_group) ++last;
    src += emit_column_group(s, static_cast<int>(k), static_cast<int>(last));
    calls += fmt::format("  group_{}(call);\n  if (*call->error) return *call->error;\n", k);
    k = last + 1;
  }
  src += fmt::format("}}  // namespace\n\nextern \"C\" std::int32_t {}abi_version(void) {{ return FF_ABI_VERSION; }}\n\n",
                     prefix);
  src += fmt::format("extern \"C\" std::int32_t {}run(const ff_call* call) {{\n", prefix) + calls;
  src += "  return *call->error;\n}\n";
  return src;
}

bool has_loop_forms(const std::string& source) { return source.find(vector_form_chosen) != std::string::npos; }

}  // namespace fieldflow::codegen
