#pragma once
// Call-time checking of arguments against a program's parameters, shared by the reference
// executor and the compiled runtime so both reject exactly the same calls with the same errors.
#include <map>
#include <string>
#include <vector>

#include "fieldflow/field.h"
#include "fieldflow/ir.h"
#include "fieldflow/mesh.h"

namespace fieldflow::ir {

// Arguments resolved by parameter index.
struct BoundCall {
  std::vector<Field*> fields;                  // field parameters (nullptr elsewhere)
  std::vector<Scalar> scalars;                 // scalar parameters, converted to the declared dtype
  std::vector<const NeighborTable*> tables;    // connectivity parameters
  std::map<std::string, std::int64_t> sizes;   // int scalar values: the program's size symbols
};

// Which memory a call's fields may be in: the reference and the cpu backend read fields on the
// host; a cuda program reads host fields through device copies and device fields in place.
enum class FieldMemory : std::uint8_t { host, host_or_device };

// Missing, extra or mistyped arguments, fields in memory the program cannot read, and neighbour
// tables of the wrong shape. check_table_indices also scans every entry for indices outside
// [0, n_target) other than -1.
BoundCall bind_arguments(const Program& p, const Arguments& args, bool check_table_indices = true,
                         FieldMemory memory = FieldMemory::host);

// The index range of every statement's domain, evaluated for this call.
struct ConcreteRange {
  Dimension dim;
  std::int64_t lo = 0, hi = 0;
};
std::vector<ConcreteRange> evaluate_domain(const Domain& d, const std::map<std::string, std::int64_t>& sizes);

// A statement's range along one dim is [lo, hi) with hi >= lo (DomainError otherwise): an empty
// range is written [x, x), an inverted one is a mistake. Distributed calls cut the ranges to a
// rank's points, so they check the user's ranges with this first.
void check_range_order(const Program& p, const Stmt& st, const ConcreteRange& r);

// Every statement's domain lies inside each of its outputs (DomainError otherwise).
void check_output_domains(const Program& p, const BoundCall& call);

// Every output's elements are distinct (no stride 0, no strides under which indices meet):
// ArgumentError naming the output and its strides otherwise.
void check_output_elements_distinct(const Program& p, const std::string& output, const Field& f);
void check_outputs_distinct(const Program& p, const std::vector<Field*>& fields);

// No output shares memory with another field parameter: generated code assumes outputs alias
// nothing (restrict pointers), and the reference's values would depend on the order it visits
// points in. ArgumentError naming both otherwise. A field updated in place is one in/out
// parameter, not two parameters over one array. Elements count, not spans: views that
// interleave without sharing an element (the components of an array of structures, even and odd
// columns) may both be outputs (ir/memory_overlap.h). Nor does an output share an element with
// the entries of a neighbour table (`tables`: per parameter, nullptr for others).
void check_outputs_share_no_memory(const Program& p, const std::vector<Field*>& fields,
                                   const std::vector<const NeighborTable*>& tables);

// What the reference executor checks before it evaluates anything: the binding, every output
// covering its statements' domains, every output's elements distinct and its memory its own.
BoundCall bind_and_check_outputs(const Program& p, const Arguments& args);

// Full check of one neighbour table against its declared connectivity.
void check_table(const Program& p, const Param& param, const NeighborTable& t, bool check_indices);

}  // namespace fieldflow::ir
