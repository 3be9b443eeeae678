/* C99 scenarios for the C API tests (see c_driver.h). Deliberately plain C: what a C host writes. */
#define _POSIX_C_SOURCE 200112L /* posix_memalign: C99 has no aligned allocation */
#include "c_driver.h"

#include <stdlib.h>
#include <string.h>


int c_hdiff(int nx, int ny, int nk, int pad, double* in, double* coeff, double* out, int steps,
            ff_memory_stats* stats) {
  ff_options options;
  ff_program* program = NULL;
  void* workspace = NULL;
  int status = ff_options_init(&options);
  if (status != FF_OK) return status;
  options.layout = FF_LAYOUT_VERTICAL_FASTEST;
  options.memory_mode = FF_MEMORY_EXTERNAL;
  status = ff_program_create("hdiff", &options, &program);
  if (status != FF_OK) return status;
  {
    const int64_t row = nk + pad;
    const int64_t in_shape[3] = {nx + 4, ny + 4, nk};
    const int64_t in_strides[3] = {(ny + 4) * row, row, 1};
    const int64_t in_origin[3] = {-2, -2, 0};
    const int64_t shape[3] = {nx, ny, nk};
    const int64_t strides[3] = {ny * row, row, 1};
    const char* names[3] = {"nx", "ny", "nk"};
    const int64_t values[3] = {nx, ny, nk};
    size_t bytes = 0, alignment = 0;
    int step;
    if ((status = ff_program_set_field(program, "in", FF_DTYPE_FLOAT64, in, 3, in_shape, in_strides, in_origin)) ||
        (status = ff_program_set_field(program, "coeff", FF_DTYPE_FLOAT64, coeff, 3, shape, strides, NULL)) ||
        (status = ff_program_set_field(program, "out", FF_DTYPE_FLOAT64, out, 3, shape, strides, NULL)) ||
        (status = ff_program_set_int(program, "nx", nx)) || (status = ff_program_set_int(program, "ny", ny)) ||
        (status = ff_program_set_int(program, "nk", nk)) ||
        (status = ff_program_workspace_query(program, FF_DEVICE_CPU, 3, names, values, &bytes, &alignment)))
      goto done;
    if (bytes > 0) {
      /* aligned_alloc wants a multiple of the alignment */
      if (posix_memalign(&workspace, alignment, bytes) != 0) {
        status = FF_ERROR_OUT_OF_MEMORY;
        goto done;
      }
      if ((status = ff_program_set_workspace(program, FF_DEVICE_CPU, workspace, bytes))) goto done;
    }
    for (step = 0; step < steps; ++step)
      if ((status = ff_program_run(program))) goto done;
    status = ff_program_memory_stats(program, stats);
  }
done:
  ff_program_destroy(program);
  free(workspace);
  return status;
}

int c_c2e2co_sum(int mx, int my, int nk, double* in, double* weights, double* out) {
  ff_options options;
  ff_program* program = NULL;
  int32_t* table = NULL;
  int64_t n_vertices = 0, n_edges = 0, n_cells = 0;
  int status = ff_options_init(&options);
  if (status != FF_OK) return status;
  options.layout = FF_LAYOUT_HORIZONTAL_FASTEST;
  if ((status = ff_mesh_sizes("torus", mx, my, &n_vertices, &n_edges, &n_cells))) return status;
  table = (int32_t*)malloc(sizeof(int32_t) * (size_t)n_cells * 4);
  if ((status = ff_mesh_table("torus", mx, my, "C2E2CO", table, n_cells, 4, 4, 1))) goto done;
  if ((status = ff_program_create("c2e2co_sum", &options, &program))) goto done;
  {
    const int64_t level_shape[2] = {n_cells, nk}, level_strides[2] = {1, n_cells};
    const int64_t weight_shape[2] = {n_cells, 4}, weight_strides[2] = {1, n_cells};
    if ((status = ff_program_set_field(program, "in", FF_DTYPE_FLOAT64, in, 2, level_shape, level_strides, NULL)) ||
        (status = ff_program_set_field(program, "weights", FF_DTYPE_FLOAT64, weights, 2, weight_shape, weight_strides,
                                       NULL)) ||
        (status = ff_program_set_field(program, "out", FF_DTYPE_FLOAT64, out, 2, level_shape, level_strides, NULL)) ||
        (status = ff_program_set_table(program, "C2E2CO", table, n_cells, n_cells, 4, 4, 1)) ||
        (status = ff_program_set_int(program, "n_cells", n_cells)) ||
        (status = ff_program_set_int(program, "nk", nk)))
      goto done;
    status = ff_program_run(program);
  }
done:
  ff_program_destroy(program);
  free(table);
  return status;
}

void c_invalid_handles(int* run_destroyed, int* destroy_twice, int* run_null, int* run_bogus, int* set_destroyed) {
  ff_program* program = NULL;
  ff_program* bogus = (ff_program*)(uintptr_t)0x7ffd1234;
  int status = ff_program_create("laplacian", NULL, &program);
  *run_destroyed = *destroy_twice = *set_destroyed = status;
  if (status == FF_OK) {
    ff_program_destroy(program);
    *run_destroyed = ff_program_run(program);
    *set_destroyed = ff_program_set_int(program, "nx", 4);
    *destroy_twice = ff_program_destroy(program);
  }
  *run_null = ff_program_run(NULL);
  *run_bogus = ff_program_run(bogus);
}

/* ---- allocators ------------------------------------------------------------------------------ */

void* c_allocate(void* user_data, int device, size_t bytes, size_t alignment, const char* program) {
  c_allocator_state* c = (c_allocator_state*)user_data;
  (void)device;
  (void)program;
  c->allocations += 1;
  c->last_bytes = bytes;
  if (c->mode == 0) return NULL;
  if (posix_memalign(&c->block, alignment, bytes + alignment) != 0) return NULL;
  return c->mode == 1 ? (char*)c->block + 8 : c->block; /* mode 1: aligned for doubles, not to 256 bytes */
}

void c_release(void* user_data, int device, void* pointer, size_t bytes) {
  c_allocator_state* c = (c_allocator_state*)user_data;
  (void)device;
  (void)pointer;
  (void)bytes;
  free(c->block);
  c->block = NULL;
  c->releases += 1;
}
