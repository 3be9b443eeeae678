#pragma once
// Counts every heap allocation of the process, below fieldflow's own counters: a test executable
// that links tests/support/counting_allocator.cpp replaces the global operator new (all forms) and
// malloc, calloc, realloc and the aligned variants, so what fieldflow, libstdc++, OpenMP or the C
// library allocate is seen. Not under a sanitizer, which brings its own malloc.
namespace fieldflow::testing_support {

long heap_allocations();      // allocations since the process started
long heap_allocated_bytes();  // bytes asked for by them

}  // namespace fieldflow::testing_support
