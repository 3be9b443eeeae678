#pragma once
// ir::Schedule: what the lowering passes decide, as plain data. Ordered kernels over domains and
// the transients they exchange. Everything here prints, so passes are tested on IR alone, and the
// runtime evaluates it (extents, memory plan) for each call's sizes without re-running passes.
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fieldflow/field.h"
#include "fieldflow/ir.h"
#include "fieldflow/memory.h"

namespace fieldflow::ir {

// An index condition of a concat_where, evaluated at a kernel's loop position.
struct Condition {
  Dimension dim;
  CompareOp cmp = CompareOp::equal;
  SymExpr bound;
  friend bool operator==(const Condition& a, const Condition& b) {
    return a.dim == b.dim && a.cmp == b.cmp && a.bound == b.bound;
  }
};

// One step of a table-indexed read: the index is looked up in `connectivity`, at neighbour slot
// `slot`, or at every slot (-1: a reduction or a local field over the neighbours).
struct TableHop {
  std::string connectivity;
  int slot = -1;
  friend bool operator==(const TableHop&, const TableHop&) = default;
};

// How one read of a buffer indexes one of the buffer's dimensions.
struct DimAccess {
  enum class Kind : std::uint8_t {
    loop,     // the kernel's loop index along `dim` plus an offset in [min_offset, max_offset]
    table,    // an index read from a neighbour table: anywhere in [0, size of dim)
    local,    // neighbour slots [min_offset, max_offset]: all in a reduction, one for a fixed slot
    dynamic,  // loop index plus a data-dependent offset: bounds-checked inside the kernel
  };
  Dimension dim;
  Kind kind = Kind::loop;
  std::int64_t min_offset = 0, max_offset = 0;
  // table: the rows of the first table are the kernel's loop index along `root` plus an offset in
  // [root_min, root_max], then each hop looks up the next index. Empty when the rows are not known
  // from the loop box (a data-dependent source): any index of the dimension may be read.
  std::vector<TableHop> hops;
  Dimension root;
  std::int64_t root_min = 0, root_max = 0;
  // table: concat_where conditions on this dimension (kernel condition index, outcome) that the
  // looked-up index (before the offset) satisfies: the read happens only in those branches, so
  // it touches only the indices they admit (the reference reads nothing elsewhere).
  std::vector<std::pair<int, bool>> value_constraints;
};

// A read of a buffer (a field parameter or a transient) somewhere in a kernel, possibly only in
// the branch of some concat_where conditions (constraints: condition index, required outcome).
struct Access {
  std::string buffer;
  std::vector<DimAccess> dims;
  std::vector<std::pair<int, bool>> constraints;
};

enum class KernelKind : std::uint8_t { pointwise, scan };

struct Kernel {
  std::string name;
  KernelKind kind = KernelKind::pointwise;
  int stmt = -1;                     // the program statement it comes from
  Domain domain;                     // statement kernels (empty for a zero-dimensional output)
  bool extent_from_outputs = false;  // transient producers: loop over what the consumers read
  std::vector<std::string> outputs;  // parameters or transients, one per value element
  ExprPtr value;                     // pointwise: the value; scan: the scan node
  std::vector<Condition> conditions;           // filled by infer_accesses
  std::vector<Access> accesses;                // filled by infer_accesses
  std::vector<std::string> connectivities;     // tables the kernel reads
  bool has_dynamic_shift = false;              // in-kernel bounds checks needed
  // Fixed-index neighbour shifts (E2C[1]) and where their source index comes from: the runtime
  // checks the table rows they read for skip values before running anything.
  struct FixedShift {
    std::string connectivity;
    int index = 0;                            // -1: a local field written outside a reduction
    DimAccess source;                         // loop: rows from the loop box; table: the rows its hops reach
    std::vector<std::pair<int, bool>> constraints;
  };
  std::vector<FixedShift> fixed_shifts;
  int column_group = -1;  // kernels of one group run column by column (see fuse_columns)
  int column_block = 1;   // columns a thread of the group takes at once (its scans interleave them)
  // CUDA: a pointwise kernel that runs inside the level loop of scan kernel `fused_into` (the
  // kernel before it), at each level right after the carry update (fuse_scan_consumers).
  int fused_into = -1;
  bool reads(const std::string& buffer) const;   // some access reads it
  bool writes(const std::string& buffer) const;  // one of the outputs
};

// A read at the point being computed along every dimension (perhaps only in some branches).
bool at_point(const Access& a);

struct Transient {
  std::string name;
  DType dtype = DType::float64;
  std::vector<Dimension> dims;  // canonical order
  Storage storage = Storage::host_heap;
  int producer = -1;            // kernel index
  int first_kernel = -1, last_kernel = -1;  // live range (inclusive), filled by analyze_lifetimes
  std::optional<Dimension> swept;           // scan results: the sweep covers exactly the statement's range
  bool column_local = false;  // lives in its column group only: a block of columns per thread, not a whole field
  int column_block = 1;       // column-local: the columns of that block (its group's column_block)
  bool in_registers = false;  // a scan result read only by its fused consumer: never stored, no bytes
};

struct Schedule {
  Program program;
  Layout layout = Layout::vertical_fastest;
  std::vector<Kernel> kernels;
  std::vector<Transient> transients;
  int transient_index(const std::string& name) const;  // -1 if not a transient
  std::string print() const;
};

// The loop dimensions of a kernel, in canonical order (the order of ff_call::domains).
std::vector<Dimension> kernel_loop_dims(const Schedule& s, const Kernel& k);

// The dimension a buffer has unit stride along under a layout: generated code relies on it and
// the runtime checks it for every field argument.
Dimension unit_stride_dim(const std::vector<Dimension>& canonical_dims, Layout layout);

// The horizontal dimension along which a column group's block of columns runs (fuse_columns):
// in the vertical-fastest layout the innermost horizontal one (the block's columns are
// neighbours in memory), in the horizontal-fastest layout the unit-stride one (a block is a
// stretch of a row, vectorised along it). `dims` in canonical order, with a horizontal one.
Dimension column_block_dim(const std::vector<Dimension>& dims, Layout layout);

// Concrete index boxes for one set of sizes.
struct Box {
  std::vector<Dimension> dims;
  std::vector<std::int64_t> lo, hi;
  int axis(const Dimension& d) const;
  std::int64_t count() const;  // number of points (0 if any range is empty)
  std::string to_string() const;
};

struct ConcreteExtents {
  std::vector<Box> kernel_domains;         // per kernel: the loop box
  std::vector<Box> transient_boxes;        // per transient: the box it must cover
  std::map<std::string, Box> param_reads;  // per field parameter: the box the call reads
  // A table-indexed read, resolved against the tables' contents when a call is bound (without
  // them, the read's box has every index of the dimension: sizes alone say no more).
  struct TablePath {
    std::vector<TableHop> hops;
    std::int64_t row_lo, row_hi;    // rows of the first table
    std::int64_t min_offset, max_offset;  // added to the index the last hop finds
  };
  struct KernelRead {
    std::string param;
    int kernel;
    Box box;
  };
  // The same per kernel, for messages naming the call; what the host checks before a run, so a
  // dim read at a dynamic offset is empty here (the kernel checks those reads).
  std::vector<KernelRead> kernel_reads;
  struct TableRows {
    std::string connectivity;
    int kernel;
    std::int64_t lo, hi;            // rows read (a bounding range); hi < 0: every row
    std::int64_t slot_lo, slot_hi;  // neighbour slots read in those rows
    // Rows reached through other tables: the path that reaches them, so a check can visit exactly
    // those rows (a row inside [lo, hi) that no path reaches is not read).
    std::optional<TablePath> path;
  };
  std::vector<TableRows> table_rows;     // rows read by fixed-index neighbour shifts
};

// Size symbols of a call: int scalar parameters by name, plus "len(<Location>)" for every
// horizontal dimension a neighbour table indexes (from the tables' n_source / n_target).
std::string location_size_symbol(const Dimension& d);

// The bounding range [lo, hi) of the indices a table-indexed read reaches with one call's tables;
// nullopt when it reaches none.
using TableResolver =
    std::function<std::optional<std::pair<std::int64_t, std::int64_t>>(const ConcreteExtents::TablePath&)>;

// Extents for given sizes: walks kernels from last to first, so a transient covers exactly what
// its consumers read (in the branches of concat_where that run), and scan results cover exactly
// their statement's range along the swept dimension. Throws DomainError when a consumer reads a
// scan outside its swept range. Without a resolver, a read through a neighbour table may reach
// any index of its dimension (what memory is sized for: sizes alone say no more); with the call's
// tables, loop boxes and reads shrink to the indices the tables really give, and are subsets of
// the former.
ConcreteExtents compute_extents(const Schedule& s, const std::map<std::string, std::int64_t>& sizes,
                                const TableResolver& resolve = {});

// Elements of one thread's column of a column-local transient (padded to 64 bytes).
std::int64_t column_stride(const Transient& t, const Box& box);
// The columns of a column-local transient's per-thread block: its group's column_block, or fewer
// when the group's columns (the union of its kernels' non-empty boxes along the block's
// dimension, which generated code steps through block by block) are fewer.
std::int64_t block_columns(const Schedule& s, const ConcreteExtents& e, std::size_t transient);

// Elements from one thread's block of a column-local transient to the next thread's: the block
// (block_columns x column_stride) and a 4 KiB gap that no thread touches (none for an empty
// block). Hardware prefetchers run ahead of a thread's accesses within a page (adjacent-line
// pairs, streams); without the gap they pull the first lines of the next thread's block into
// this thread's core while the other core writes them (vadv vertical-fastest, 2 threads, blocks 5,120 bytes apart: 16.8-17.9 ms
// against 13.8-14.9 ms with the gap, hand-written 14.3-14.6 ms in the same runs).
std::int64_t column_thread_stride(const Transient& t, const Box& box, std::int64_t block_columns);

// Bytes of each transient for given extents: dense boxes, or threads x column_thread_stride for
// column-local transients.
std::vector<std::size_t> transient_bytes(const Schedule& s, const ConcreteExtents& e, int threads);

}  // namespace fieldflow::ir
