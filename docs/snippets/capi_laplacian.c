#include <stdio.h>

#include "fieldflow/fieldflow.h"

/* The built-in five-point Laplacian on the caller's C arrays, without copies:
 * in[nx+2][ny+2][nk] holds a halo of one point around the nx x ny domain, out[nx][ny][nk].
 * K varies fastest (row-major), so the program is compiled for layout vertical_fastest. */
int laplacian_in_c(int nx, int ny, int nk, double* in, double* out) {
  ff_options options;
  ff_program* program = NULL;
  const int64_t in_shape[3] = {nx + 2, ny + 2, nk}, in_strides[3] = {(ny + 2) * nk, nk, 1};
  const int64_t in_origin[3] = {-1, -1, 0}; /* in[0][0][0] is the point (-1, -1, 0) */
  const int64_t shape[3] = {nx, ny, nk}, strides[3] = {ny * nk, nk, 1};
  int status = ff_options_init(&options);
  options.layout = FF_LAYOUT_VERTICAL_FASTEST;
  if (status == FF_OK) status = ff_program_create("laplacian", &options, &program);
  if (status == FF_OK) status = ff_program_set_field(program, "in", FF_DTYPE_FLOAT64, in, 3, in_shape, in_strides, in_origin);
  if (status == FF_OK) status = ff_program_set_field(program, "out", FF_DTYPE_FLOAT64, out, 3, shape, strides, NULL);
  if (status == FF_OK) status = ff_program_set_int(program, "nx", nx);
  if (status == FF_OK) status = ff_program_set_int(program, "ny", ny);
  if (status == FF_OK) status = ff_program_set_int(program, "nk", nk);
  if (status == FF_OK) status = ff_program_run(program); /* run again as often as needed */
  if (status != FF_OK) fprintf(stderr, "%s: %s\n", ff_status_name(status), ff_last_error());
  ff_program_destroy(program);
  return status;
}
