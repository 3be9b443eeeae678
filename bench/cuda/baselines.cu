// Hand-written CUDA versions of the GPU benchmark's programs (hdiff, vadv, nabla4, c2e2co_sum):
// the yardstick of `fieldflow bench --device cuda` (docs/performance.md, GPU). What an
// experienced CUDA programmer writes for the same computation on the same device fields, in the
// GPU's layout (horizontal_fastest: I, or the element index, has unit stride):
//  - one kernel per program, fused: stencils recompute their cheap intermediates from the cache
//    instead of materialising them; the Thomas solver keeps its coefficients in registers and
//    stores only c' (in a scratch array) and d' (in the output, which the back substitution then
//    overwrites in place);
//  - threads along the unit-stride dimension (coalesced), the rest of the box on the grid; 32-bit
//    indexing (the plans check that every field fits); read-only loads through __ldg; neighbour
//    rows read as one 16-byte int4;
//  - unstructured kernels give each thread a short run of levels, so a neighbour row and its
//    weights are loaded once per run rather than once per level.
// Every floating-point operation happens in the order the program states it, and NVRTC compiles
// this file with fieldflow's own options (no FMA contraction, IEEE division): results equal the
// reference bit for bit (tests/bench/test_cuda_baselines.cpp runs these kernels on the host under
// an emulation of the launch grid; tests/cuda/test_cuda_device.cpp on a device).
//
// The file is three things: the parameter structs alone (FF_BASELINE_PARAMS_ONLY, for the host
// code that fills them: cuda_baselines.cpp), the kernels compiled by NVRTC (the build embeds
// this text), and host code under the tests' emulation prelude. So it includes nothing and uses
// no shared memory or barriers (the emulation runs a block's threads one after the other).

// --- parameters: one struct per kernel, passed by value --------------------------------------
// Pointers are at the field's point (0, 0, 0) (origin folded in); strides are in elements.

struct ff_bl_hdiff_params {
  const double* in;  // halo 2: read at i-2..i+2, j-2..j+2
  const double* coeff;
  double* out;
  int nx, ny, nk;
  int in_j, in_k, coeff_j, coeff_k, out_j, out_k;
};

struct ff_bl_vadv_params {
  const double *u_stage, *wcon, *u_pos, *utens, *utens_stage;
  double* out;   // holds d' between the two sweeps
  double* cp;    // scratch: c' of every point, [k][j][i] (nx * ny * nk doubles)
  double dtr;
  int nx, ny, nk;
  int us_j, us_k, w_j, w_k, up_j, up_k, ut_j, ut_k, uts_j, uts_k, out_j, out_k;
};

struct ff_bl_nabla4_params {
  const double *u_vert, *v_vert;  // [Vertex, K]
  const double *tang_u, *tang_v, *norm_u, *norm_v;  // [Edge, 4]
  const double *z_nabla2_e, *inv_vert_vert_length, *inv_primal_edge_length;
  double* out;                    // [Edge, K]
  const int* e2c2v;               // [Edge][4], -1 for a missing neighbour
  int n_edges, nk, levels_per_thread;
  int u_k, v_k, w_slot_tu, w_slot_tv, w_slot_nu, w_slot_nv, z_k, out_k;
};

struct ff_bl_c2e2co_params {
  const double* in;       // [Cell, K]
  const double* weights;  // [Cell, 4]
  double* out;            // [Cell, K]
  const int* c2e2co;      // [Cell][4], -1 for a missing neighbour
  int n_cells, nk, levels_per_thread;
  int in_k, w_slot, out_k;
};

#ifndef FF_BASELINE_PARAMS_ONLY

// --- hdiff -----------------------------------------------------------------------------------
// Thread (i, j) of level k: the Laplacian at the five points of the cross, the four limited
// fluxes around the point, the update. Blocks of 32 x 8 points: a warp reads one 256-byte row.

__device__ __forceinline__ double ff_bl_lap(const double* __restrict__ q, int dJ) {
  // -4 in + in(I+1) + in(I-1) + in(J+1) + in(J-1), left to right
  return (((-4.0 * __ldg(q) + __ldg(q + 1)) + __ldg(q - 1)) + __ldg(q + dJ)) + __ldg(q - dJ);
}

// where(flux * gradient > 0, 0, flux)
__device__ __forceinline__ double ff_bl_limited(double flux, double gradient) {
  return flux * gradient > 0.0 ? 0.0 : flux;
}

extern "C" __global__ void __launch_bounds__(256) ff_bl_hdiff(const ff_bl_hdiff_params p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y * blockDim.y + threadIdx.y;
  const int k = blockIdx.z;
  if (i >= p.nx || j >= p.ny) return;
  const int dJ = p.in_j;
  const double* __restrict__ q = p.in + (i + j * dJ + k * p.in_k);
  const double lc = ff_bl_lap(q, dJ);
  const double le = ff_bl_lap(q + 1, dJ), lw = ff_bl_lap(q - 1, dJ);
  const double ln = ff_bl_lap(q + dJ, dJ), ls = ff_bl_lap(q - dJ, dJ);
  const double c = __ldg(q);
  const double flx = ff_bl_limited(le - lc, __ldg(q + 1) - c);
  const double flx_w = ff_bl_limited(lc - lw, c - __ldg(q - 1));
  const double fly = ff_bl_limited(ln - lc, __ldg(q + dJ) - c);
  const double fly_s = ff_bl_limited(lc - ls, c - __ldg(q - dJ));
  const double cf = __ldg(p.coeff + (i + j * p.coeff_j + k * p.coeff_k));
  p.out[i + j * p.out_j + k * p.out_k] = c - cf * (((flx - flx_w) + fly) - fly_s);
}

// --- vadv ------------------------------------------------------------------------------------
// One thread per column (i, j), threads along I. Forward sweep: the coefficients of level k from
// a window of u_stage and wcon kept in registers (each value is loaded once), c' into the scratch
// array, d' into out. Back substitution: x_k = d'_k - c'_k x_{k+1}, out = dtr (x - u_pos).
//   gav = k == 0 ? 0 : -0.25 (wcon(I+1) + wcon),  gcv = k == nk-1 ? 0 : 0.25 (wcon(I+1,K+1) + wcon(K+1))
//   a = gav/2, c = gcv/2, b = dtr - a - c
//   d = dtr u_pos + utens + utens_stage + [k>0] (-a (u(K-1) - u)) + [k<nk-1] (-c (u(K+1) - u))
//   c'_k = c / (b - c'_{k-1} a),  d'_k = (d - d'_{k-1} a) / (b - c'_{k-1} a)

extern "C" __global__ void __launch_bounds__(64) ff_bl_vadv(const ff_bl_vadv_params p) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  const int j = blockIdx.y;
  if (i >= p.nx) return;
  const int nk = p.nk;
  const double dtr = p.dtr;
  const double* __restrict__ us = p.u_stage + (i + j * p.us_j);
  const double* __restrict__ w = p.wcon + (i + j * p.w_j);
  const double* __restrict__ up = p.u_pos + (i + j * p.up_j);
  const double* __restrict__ ut = p.utens + (i + j * p.ut_j);
  const double* __restrict__ uts = p.utens_stage + (i + j * p.uts_j);
  double* __restrict__ out = p.out + (i + j * p.out_j);
  double* __restrict__ cp = p.cp + (i + j * p.nx);
  const int cp_k = p.nx * p.ny;
  double u_prev = 0.0, u_here = __ldg(us);
  double w0 = __ldg(w), w1 = __ldg(w + 1);  // wcon(I) and wcon(I+1) at the current level
  double cp_prev = 0.0, dp_prev = 0.0;
  for (int k = 0; k < nk; ++k) {
    const bool first = k == 0, last = k == nk - 1;
    const double u_next = last ? 0.0 : __ldg(us + (k + 1) * p.us_k);
    const double w0_next = last ? 0.0 : __ldg(w + (k + 1) * p.w_k);
    const double w1_next = last ? 0.0 : __ldg(w + (k + 1) * p.w_k + 1);
    const double gav = first ? 0.0 : -0.25 * (w1 + w0);
    const double gcv = last ? 0.0 : 0.25 * (w1_next + w0_next);
    const double a = gav * 0.5, c = gcv * 0.5;
    const double b = (dtr - a) - c;
    const double lower = first ? 0.0 : -a * (u_prev - u_here);
    const double upper = last ? 0.0 : -c * (u_next - u_here);
    const double d = ((dtr * __ldg(up + k * p.up_k) + __ldg(ut + k * p.ut_k)) + __ldg(uts + k * p.uts_k)) +
                     (lower + upper);
    const double div = 1.0 / (b - cp_prev * a);
    cp_prev = c * div;
    dp_prev = (d - dp_prev * a) * div;
    cp[k * cp_k] = cp_prev;
    out[k * p.out_k] = dp_prev;
    u_prev = u_here;
    u_here = u_next;
    w0 = w0_next;
    w1 = w1_next;
  }
  double x = 0.0;
  for (int k = nk - 1; k >= 0; --k) {
    x = out[k * p.out_k] - cp[k * cp_k] * x;
    out[k * p.out_k] = dtr * (x - __ldg(up + k * p.up_k));
  }
}

// --- nabla4 ----------------------------------------------------------------------------------
// Thread e of a run of levels: the edge's four E2C2V vertices (one int4), its sixteen weights and
// two lengths stay in registers across the run. Per level, with missing neighbours skipped:
//   tang = sum_q u(q) tang_u(q) + v(q) tang_v(q),  norm likewise;  twice = 2 z_nabla2_e
//   out = 4 ((norm - twice) inv_vert_vert_length^2 + (tang - twice) inv_primal_edge_length^2)

extern "C" __global__ void __launch_bounds__(128) ff_bl_nabla4(const ff_bl_nabla4_params p) {
  const int e = blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= p.n_edges) return;
  const int k0 = blockIdx.y * p.levels_per_thread;
  const int k1 = min(k0 + p.levels_per_thread, p.nk);
  const int4 row = __ldg(reinterpret_cast<const int4*>(p.e2c2v) + e);
  const int vx[4] = {row.x, row.y, row.z, row.w};
  double tu[4], tv[4], nu[4], nv[4];
  for (int q = 0; q < 4; ++q) {
    tu[q] = __ldg(p.tang_u + (e + q * p.w_slot_tu));
    tv[q] = __ldg(p.tang_v + (e + q * p.w_slot_tv));
    nu[q] = __ldg(p.norm_u + (e + q * p.w_slot_nu));
    nv[q] = __ldg(p.norm_v + (e + q * p.w_slot_nv));
  }
  const double l1 = __ldg(p.inv_vert_vert_length + e), l2 = __ldg(p.inv_primal_edge_length + e);
  const double vvl2 = l1 * l1, pel2 = l2 * l2;
  for (int k = k0; k < k1; ++k) {
    double tang = 0.0, norm = 0.0;
    for (int q = 0; q < 4; ++q) {
      if (vx[q] < 0) continue;
      const double u = __ldg(p.u_vert + (vx[q] + k * p.u_k)), v = __ldg(p.v_vert + (vx[q] + k * p.v_k));
      tang = tang + (u * tu[q] + v * tv[q]);
      norm = norm + (u * nu[q] + v * nv[q]);
    }
    const double twice = 2.0 * __ldg(p.z_nabla2_e + (e + k * p.z_k));
    p.out[e + k * p.out_k] = 4.0 * ((norm - twice) * vvl2 + (tang - twice) * pel2);
  }
}

// --- c2e2co_sum ------------------------------------------------------------------------------
// Thread c of a run of levels: out = sum over C2E2CO (the cell first) of in(neighbour) weights,
// missing neighbours skipped, the row and its four weights loaded once per run.

extern "C" __global__ void __launch_bounds__(128) ff_bl_c2e2co_sum(const ff_bl_c2e2co_params p) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= p.n_cells) return;
  const int k0 = blockIdx.y * p.levels_per_thread;
  const int k1 = min(k0 + p.levels_per_thread, p.nk);
  const int4 row = __ldg(reinterpret_cast<const int4*>(p.c2e2co) + c);
  const int nb[4] = {row.x, row.y, row.z, row.w};
  double wt[4];
  for (int q = 0; q < 4; ++q) wt[q] = __ldg(p.weights + (c + q * p.w_slot));
  for (int k = k0; k < k1; ++k) {
    double acc = 0.0;
    for (int q = 0; q < 4; ++q)
      if (nb[q] >= 0) acc = acc + __ldg(p.in + (nb[q] + k * p.in_k)) * wt[q];
    p.out[c + k * p.out_k] = acc;
  }
}

#endif  // FF_BASELINE_PARAMS_ONLY
