#pragma once
// What the CPU and GPU halves of the suite share when they register cases (suite.cpp,
// cuda_suite.cpp): the registry entry, the repetition settings, the bytes counter.
#include <benchmark/benchmark.h>

#include <vector>

#include "suite.h"

namespace fieldflow::bench {

// Adds a case to case_registry(); throws Error for a duplicate name.
CaseInfo& add_case(CaseInfo info);

// The suite's repetitions, real time, aggregates and the "min" statistic on a registered case.
benchmark::internal::Benchmark* common(benchmark::internal::Benchmark* b, const SuiteOptions& o);

double min_of(const std::vector<double>& v);

// Google Benchmark's bytes_per_second from the case's bytes per call.
void set_bytes(benchmark::State& st, double bytes);

}  // namespace fieldflow::bench
