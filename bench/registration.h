#pragma once
// What the CPU and GPU halves of the suite share when they register cases (suite.cpp,
// cuda_suite.cpp): the registry entry, the repetition settings, the bytes counter.
#include <benchmark/benchmark.h>

#include <functional>
#include <string>
#include <vector>

#include "fieldflow/compile.h"
#include "suite.h"

namespace fieldflow::bench {

// Adds a case to case_registry(); throws Error for a duplicate name.
CaseInfo& add_case(CaseInfo info);

// The suite's repetitions, real time, aggregates and the "min" statistic on a registered case.
benchmark::internal::Benchmark* common(benchmark::internal::Benchmark* b, const SuiteOptions& o);

double min_of(const std::vector<double>& v);

// Google Benchmark's bytes_per_second from the case's bytes per call.
void set_bytes(benchmark::State& st, double bytes);

// Whether the program keeps transients in this layout on this backend (learnt once, from the
// memory plan of a small instance; compiles the program).
bool has_transients(const std::string& program, Layout layout, Backend backend);

// The cases of one configuration on one backend, named "[device/]program/variant/mode/layout/size":
// its same-bytes copy first, then those of the hand-written version (when `handwritten`) and of
// fieldflow in each memory mode that `selected` takes; a program without transients has one pool
// run standing for all four. Empty when `selected` takes none of the kernels (the program is then
// not compiled); the copy comes along with any of them.
std::vector<CaseInfo> configuration_cases(const KernelConfig& kc, Backend backend, bool handwritten,
                                          const std::function<bool(const std::string&)>& selected);

}  // namespace fieldflow::bench
