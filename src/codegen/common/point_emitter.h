#pragma once
// What the CPU and CUDA generators share: the C++ text of one kernel's value at one evaluation
// point (field reads with their index arithmetic, neighbour-table lookups, reductions, scans'
// level bodies, stores), the declarations of the buffers, tables and scalars it reads from ff_call,
// and the scalar semantics of fieldflow/abi.h. A generator derives from PointEmitter and adds only
// its loop structure (OpenMP loop nests, or a CUDA thread grid), so both compute the same values
// with the same operations: the reference executor is the oracle of both.
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "ir/schedule.h"

namespace fieldflow::codegen {

// Where the two targets' C++ dialects differ. Everything else of the per-point text is one code.
struct Dialect {
  std::string math = "fieldflow::abi::math::";  // prefix of libm functions (sqrt, exp, fmod, isnan, ...)
  std::string limits = "std::numeric_limits";   // numeric_limits template
  std::string restrict_qualifier = "__restrict";
  bool read_only_tables = false;                // neighbour tables loaded through __ldg (GPU read-only path)
  // When set, a class template that stands for the buffers' pointers, made from the pointer and
  // the buffer's index: the host emulation of CUDA kernels checks every load and store through it
  // (cuda_race_check_dialect). Empty: restrict-qualified raw pointers.
  std::string checked_buffer;
  // The types of a point's coordinates (loop variables, boxes) and of element offsets into a
  // buffer (its offset, strides, rows). 64-bit on the CPU. CUDA kernels are templates over both
  // (`ff_index`, `ff_offset`), instantiated with 64-bit and with 32-bit integers, and the runtime
  // launches the 32-bit kernel when a call's boxes and buffers fit (fieldflow/abi.h,
  // ff_fits_32bit_indexing, given max_shift()). Neighbour-table lookups stay 64-bit.
  std::string index_type = "std::int64_t";
  std::string offset_type = "std::int64_t";
  // Whether kernels read what they need of ff_call from their parameter words (CallWord; CUDA:
  // by value, from the constant bank) rather than through the `call` pointer (the CPU).
  bool parameter_words = false;
};
const Dialect& cpu_dialect();
const Dialect& cuda_dialect();
// The CUDA dialect with every buffer access going through `ff_checked` (driver/cuda_build.cpp's
// emulation prelude defines it): what the host emulation runs, to find threads of one launch that
// touch the same element.
const Dialect& cuda_race_check_dialect();

std::string ctype(DType t);
std::string pad_text(int ind);
std::string sanitize(const std::string& s);
std::string literal(const Scalar& v, const Dialect& dialect);

// One coordinate of an evaluation point in generated code: `base + offset` along `dim`.
struct Index {
  Dimension dim;
  std::string base;
  std::int64_t offset = 0;
  bool dynamic = false;  // bounds-checked at the load
  std::string str() const;
};
using Point = std::vector<Index>;
std::string point_key(const Point& p);
const Index* find(const Point& p, const Dimension& d);

// One value of ff_call a kernel reads: a kernel box's bound (`index` into ff_call::domains), a
// buffer's data, offset, stride, or box bound along dimension `slot`, a table's data or strides, a
// scalar (integer or float), the error flag.
struct CallWord {
  enum class Kind {
    domain, buffer_data, buffer_offset, buffer_stride, buffer_lo, buffer_hi, table_data, table_source_stride,
    table_neighbor_stride, scalar_i, scalar_f, error
  };
  Kind kind = Kind::domain;
  int index = 0;
  int slot = 0;
  bool operator==(const CallWord&) const = default;
};
// The C++ expression of the word in a function that has `const ff_call* call`
// (`call->buffers[2].strides[1]`): what CPU kernels read, and how the CUDA emulation fills a
// kernel's words.
std::string call_word_source(const CallWord& w);
// The member of ff_word holding it: p, i or f.
char word_member(const CallWord& w);

// Declarations at the top of a generated function, shared by the kernels it contains.
struct Decls {
  std::string text;
  std::map<std::string, bool> declared;
  std::set<std::string> tables;  // the pointers use_table declared (to neighbour tables)
  std::string column_locals;  // per-thread block pointers, declared inside the parallel region
  std::vector<CallWord> words;  // Dialect::parameter_words: the function's parameter words, in order
};

// Emits the per-point code of kernel `kidx` of a schedule. Values are SSA-style locals, one per
// (node, evaluation point), so a value read at one point several times is computed once, and a
// value read at several points (shifts, neighbours) is recomputed at each: the transients the
// passes selected are the only intermediates that go through memory. Failed in-kernel checks
// (dynamic offsets) are ORed into a local `std::int32_t err` the generator declares and reports.
class PointEmitter {
 public:
  PointEmitter(const ir::Schedule& s, int kidx, Decls& decls, const Dialect& dialect);

  // This kernel's loop bounds, read from ff_call::domains, and its number of points (points()).
  std::string bounds();
  std::string points() const;
  bool uses_error() const { return uses_error_; }
  // The largest constant offset along any dimension of any buffer access emitted so far: what
  // bounds a stencil's coordinates beyond the boxes of the buffers it reads (32-bit indexing).
  std::int64_t max_shift() const { return max_shift_; }
  std::string lo(const Dimension& d) const;
  std::string hi(const Dimension& d) const;
  static std::string var(const Dimension& d);
  // The variable holding the first column of a column group's current block along d.
  static std::string block_start(const Dimension& d);

 protected:
  // The scan's current level along its dimension at step `st` (forward or backward).
  std::string level(const ir::Expr& scan) const;
  // One level of a scan at one column: the inputs, the carry update (carry c0.. in registers)
  // and the stores.
  std::string scan_level(const Point& p, int ind);
  bool column_local(const std::string& name) const;
  bool in_registers(const std::string& name) const;
  // Whether this kernel reads `name` at an offset along a dimension other than `unit`, its
  // unit-stride one.
  bool read_across_rows(const std::string& name, const Dimension& unit) const;
  Dimension unit_dim(const std::string& name, const std::vector<Dimension>& dims) const;
  // Column-local buffers of a group that takes blocks of columns: the axis (canonical dims) the
  // block's columns follow one another along, or -1 (one column per thread).
  int column_block_axis(const std::string& name) const;
  // Carry component c of a scan: `c0`, or `c0[x - xb]` for a column of a block.
  std::string carry(int c) const;
  int buffer_index(const std::string& name) const;
  std::pair<DType, std::vector<Dimension>> buffer_type(const std::string& name) const;
  std::string use_buffer(const std::string& name, bool write);
  std::string use_table(const Connectivity& c);
  std::string use_scalar(const std::string& name);
  // The expression reading word w: through `call`, or the function's parameter word (`ff_p.w[3].i`,
  // added to Decls::words the first time).
  std::string word(const CallWord& w);
  std::string sym(const ir::SymExpr& e);
  std::string sym_op(const ir::SymOp& op);
  // The index of `name` at p in its buffer. With row_local, for a buffer this kernel reads across
  // rows, the coordinates away from the unit-stride dimension go into a `row` local declared in
  // `code` (once per scope). An index at a dynamic offset is checked against the buffer's box
  // in `code`; `in_box` (required then) gets the flag that it is inside, which must guard the load.
  std::string element(const std::string& name, const Point& p, std::string& code, int ind, bool row_local = true,
                      std::string* in_box = nullptr);
  static std::string pad(int ind) { return pad_text(ind); }
  std::string fresh(const char* prefix);
  // The flag under which every index of p is an element the call reaches (empty: always), and a
  // load read only under such a flag (point_emitter.cpp).
  std::string reached_at(const Point& p, std::string& code, int ind);
  std::string guarded(const std::string& reached, const std::string& load, const std::string& otherwise);

 public:
  // `body` with every guarded load read unguarded: for a copy of a loop that runs only where
  // every neighbour the reductions read is present, so that every element is reached.
  std::string unguarded(std::string body) const;

 protected:
  std::string lookup(const std::string& key) const;
  std::string gen(const ir::Expr& e, const Point& p, int comp, std::string& code, int ind);
  std::string define(DType t, const std::string& expr, std::string& code, int ind);
  std::string gen_uncached(const ir::Expr& e, const Point& p, int comp, std::string& code, int ind);
  void mask_sparse_read(const std::string& name, const Point& p, std::string& code, int ind);
  // What a -1 entry means where it is read: an error (fixed-index shift), a neighbour the enclosing
  // reduction skips (local shift), or nothing yet (the reduction's own row, checked by the caller).
  enum class Missing { error, skip, unchecked };
  std::string neighbor(const Connectivity& c, const std::string& src, const std::string& slot, Missing missing,
                       std::string& code, int ind);
  std::string present_test(const std::string& nb) const;
  std::string in_bounds_neighbor(const Connectivity& c, const std::string& src, const std::string& slot,
                                 const std::string& nb, std::string& code, int ind);
  std::string present_in_row(const Connectivity& c, const std::string& src, std::string& code, int ind);
  std::string table_entry(const std::string& table, const std::string& index) const;
  std::string reduce(const ir::Expr& e, const Point& p, std::string& code, int ind);
  std::string unary(const ir::Expr& e, const std::string& a) const;
  std::string binary(const ir::Expr& e, const std::string& a, const std::string& b) const;
  static std::string arithmetic(ir::BinaryOp op, DType t, const std::string& a, const std::string& b);
  Point loop_point() const;
  // Loop order, slowest first: the unit-stride dimension of the layout last.
  std::vector<Dimension> loop_order() const;
  // Stores values[c] to output c at p (outputs kept in registers are not stored).
  void store_all(const std::vector<std::string>& values, const Point& p, std::string& code, int ind);
  // A pointwise kernel's value at p, each component stored to its output.
  void store_value(const Point& p, std::string& code, int ind);

  const ir::Schedule& s_;
  const ir::Kernel& k_;
  int kidx_;
  Decls& d_;
  const Dialect& dialect_;
  std::vector<Dimension> loop_dims_;
  std::vector<std::map<std::string, std::string>> memo_;
  std::vector<Dimension> reducing_;  // local dimensions of the reductions being generated
  std::vector<std::string> reduce_ok_;  // their "neighbour present" flags (branch-free form), or empty
  std::vector<Connectivity> reducing_conn_;  // their connectivities
  std::vector<std::string> reduce_src_;      // their source element index, or empty (shifted elsewhere)
  int counter_ = 0;
  bool uses_error_ = false;
  std::int64_t max_shift_ = 0;
  std::string carry_index_;  // subscript of the carries (a block's column), or empty
  // Buffers whose value at this kernel's loop point is a local: the carries of the scan this
  // kernel is fused into (fuse_scan_consumers). Read nowhere else.
  std::map<std::string, std::string> registers_;
  std::vector<std::pair<std::string, std::string>> guarded_loads_;  // (guarded, plain) values
};

}  // namespace fieldflow::codegen
