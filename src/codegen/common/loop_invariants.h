#pragma once
// Loop-invariant statements of a generated loop body: the CPU's vector loops, and a CUDA
// thread's run of levels. The point emitter writes one statement per line, SSA-style
// (`const T v3 = ...;`, `bool ok1 = present2;`, `nb4 = present5 ? nb4 : 0;`), with branches and
// loops as brace blocks. In a mesh kernel most of the body (neighbour-table rows, per-element
// weights, "neighbour present" masks) does not depend on the level, yet it sits inside the level
// loop; GCC hoists only part of it, and the masked accumulations (`acc = ok ? v : acc`) stay even
// on a row whose neighbours are all present.
#include <string>
#include <vector>

namespace fieldflow::codegen {

struct HoistedLoopBody {
  std::string invariant;  // statements to run once before the loop, in their order
  std::string body;       // what stays in the loop
  // The reduction masks (`bool okN`) among the invariant statements: where all of them are true,
  // a copy of the loop with them fixed to true computes the same values without the selects.
  std::vector<std::string> masks;
  // Level-invariant factors whose products reassociate exactly where they are 1 or -1 (an edge
  // orientation): the fast copy of the loop runs `fast_prelude` once, then `fast_body`, in which
  // `(t * a) * b` became `t * ab` with `ab = a * b` from the prelude.
  std::vector<std::string> unit_factors;
  std::vector<std::string> fast_prelude;  // one statement each, without indentation
  std::string fast_body;  // `body` with those products rewritten (the same text if there are none)
};

// Splits `body`, the body of a loop over `loop_var`, into the statements that may run once
// before it and the rest. A statement moves only if it is at the body's top level (not inside a
// branch or a nested loop), declares or assigns one local from operands none of which depends on
// `loop_var` (transitively), and is not a store. Anything the split does not recognise stays,
// and makes every name it may assign count as dependent (those before its first `=`, and those
// a one-line branch assigns inside its braces). The loop must run at least once wherever
// the invariant statements then run (a kernel with an empty box returns before its loops), so
// nothing runs that the loop would not have run, and every value is the one the loop computed.
HoistedLoopBody hoist_loop_invariants(const std::string& body, const std::string& loop_var);

// A local declared by a statement that hoist_loop_invariants moved, and its type as written.
struct HoistedLocal {
  std::string type, name;
};

// The locals that `statements` (lines hoist_loop_invariants moved: declarations and assignments
// of locals) declare and `uses` reads, in order of declaration. A loop nest that runs the hoisted
// statements once per element of a block and the rest per level (a horizontal-fastest mesh
// kernel) keeps these in per-block arrays.
std::vector<HoistedLocal> hoisted_locals_read(const std::string& statements, const std::string& uses);

// `body` without the declarations of locals nothing reads (at the body's top level; repeatedly, so
// a chain that only fed a dead local goes too). The point emitter computes every product it may
// need, and a copy with unit factors folded leaves the unfolded ones unread: the compiler drops
// them, but a block that kept their level-invariant inputs in arrays would fill those for nothing
// and be sized as if they were read.
std::string without_dead_locals(const std::string& body);

// Branches of a vector loop's body on a condition that does not change along the loop: in a
// loop across columns inside a level loop, `if (x_K == 0) {...} else {...}` (a boundary level).
// GCC if-converts such a branch into both sides computed and blended (masked loads included) at
// every level; `fast_body` has those branches' conditions replaced by `false`, so a copy of the
// loop taken where every condition is false (the interior levels) is straight-line code.
// The same for a branch on the loop's own index compared with such a bound (`x_K == nk - 1` in a
// loop along the column): its truth changes only where loop_var + N reaches the bound or passes
// it, so between those `breaks` (and one past each) every such condition is constant, and the
// loop can run piecewise: the fast copy on the pieces where all conditions are false.
struct UnswitchedLoopBody {
  std::vector<std::string> conditions;  // each as written, without its parentheses
  std::vector<std::string> loop_conditions;  // `loop_var OP bound`, `(loop_var + N) OP bound`
  // Per distinct loop condition, the value B of loop_var at which loop_var + N equals the bound
  // (an int64 expression): each condition has one truth value on x < B, at x = B and on x > B.
  std::vector<std::string> breaks;
  std::string fast_body;  // every condition of both kinds replaced by `false`
};

// The top-level `if (C) {` lines of `body` (a loop over `loop_var`) whose C reads no memory (no
// `[`) and no name that the body assigns or declares, nor `loop_var` (conditions); or whose C is
// exactly one comparison (==, !=, <, <=, >, >=) of `loop_var` or `(loop_var +- N)` with a bound
// that is such an expression (loop_conditions).
UnswitchedLoopBody unswitch_invariant_branches(const std::string& body, const std::string& loop_var);

// Sums of two loads from one buffer whose addresses differ in one loop-invariant index: in a
// vertical-fastest mesh kernel, `pp(E2V[0]) + pp(E2V[1])` under V2E reads both ends of each edge
// around a vertex, and every one of those edges ends at the vertex itself. Where one index is
// common to every pair of a group (checked per row: `condition`), a copy of the loop loads that
// column once and each pair's other column once (7 loads instead of 12 for six edges). A sum
// whose second operand was the common column becomes `common + other`: the same value, since
// IEEE addition is commutative (the operand order of a commutative operation is not kept in
// generated code anyway: GCC canonicalises it).
struct SharedColumnBody {
  std::vector<std::string> candidates;  // `const std::int64_t shareN = ...;`: run before the check
  std::string condition;                // every pair of every group holds its shareN; empty: none
  std::vector<std::string> fast_prelude;  // `const std::int64_t shareN_M = ...;`: each pair's other index
  std::string fast_body;                  // the body with those loads and sums rewritten
};

// The groups (two pairs or more) in the top-level statements of `body`, a loop over `loop_var`
// without jumps; a load moves to the first load of its group only if no store comes before the
// group's last load. Each load read by no other statement than its sum.
SharedColumnBody share_common_columns(const std::string& body, const std::string& loop_var);

}  // namespace fieldflow::codegen
