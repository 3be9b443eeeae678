#pragma once
// The C side of the C API tests (c_driver.c, compiled as C99): scenarios written in plain C, run
// by test_capi.cpp, which checks their results against the C++ reference executor.
#include <stddef.h>
#include <stdint.h>

#include "fieldflow/fieldflow.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hdiff (CPU backend, layout vertical_fastest) on C row-major arrays whose K rows are padded to
 * nk + pad elements: in[nx+4][ny+4][nk+pad] (halo 2, origin -2, -2, 0), coeff and out
 * [nx][ny][nk+pad]. Transient memory: a workspace the C code allocates with aligned_alloc after
 * querying it. Runs `steps` times. Returns the first failing status (message: ff_last_error()). */
int c_hdiff(int nx, int ny, int nk, int pad, double* in, double* coeff, double* out, int steps,
            ff_memory_stats* stats);

/* c2e2co_sum on the torus mesh mx x my with nk levels, Fortran order (horizontal_fastest):
 * in(n_cells, nk), weights(n_cells, 4), out(n_cells, nk); the C2E2CO table comes from
 * ff_mesh_table in C order [n_cells][4]. */
int c_c2e2co_sum(int mx, int my, int nk, double* in, double* weights, double* out);

/* Statuses of ff_program_run on a handle after ff_program_destroy, of a second destroy, of a run on
 * NULL and on a pointer no ff_program_create returned. */
void c_invalid_handles(int* run_destroyed, int* destroy_twice, int* run_null, int* run_bogus, int* set_destroyed);

/* A C allocator for the tests: user_data points to a c_allocator_state. mode 0 returns NULL,
 * mode 1 a block 8 bytes off the requested alignment, mode 2 a good block. c_release frees
 * what c_allocate obtained and counts the calls. */
typedef struct c_allocator_state {
  int mode;
  int allocations, releases;
  size_t last_bytes;
  void* block; /* what posix_memalign returned, freed by c_release */
} c_allocator_state;
void* c_allocate(void* user_data, int device, size_t bytes, size_t alignment, const char* program);
void c_release(void* user_data, int device, void* pointer, size_t bytes);

#ifdef __cplusplus
}
#endif
