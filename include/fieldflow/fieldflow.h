/* fieldflow's C API: compiled stencil programs behind opaque handles, for C and Fortran hosts.
 * Plain C99: no C++ in this header; the Fortran module `fieldflow` (src/fortran/fieldflow.f90)
 * binds every function here with ISO_C_BINDING interface blocks. User guide: docs/host.md.
 *
 * Conventions (like SQLite or the CUDA runtime):
 *  - every function returns an ff_status: FF_OK (0) or an error code; one code per kind of
 *    fieldflow::Error, so a host can branch on the kind. The message of the most recent failed
 *    call on the calling thread is ff_last_error(); it names the program, the argument and what
 *    was expected and given, like the C++ exceptions it comes from. No exception ever leaves a
 *    function of this API, and a rejected call changes nothing (the handle keeps its old state).
 *  - handles are opaque ids, not pointers into fieldflow's memory: a destroyed, never-created or
 *    NULL handle makes every function return FF_ERROR_INVALID_HANDLE (never a crash).
 *  - indices (parameters, dimensions) are 0-based; shapes, strides and origins are int64_t arrays
 *    with one entry per dimension of the parameter, in the order ff_program_param_dim reports.
 *  - strides count elements, not bytes, and may describe any order and padding (C row-major,
 *    Fortran column-major, padded rows); the compiled program needs stride 1 along the dimension
 *    its layout makes unit-stride (FF_LAYOUT_*; FF_LAYOUT_ANY accepts any), otherwise FF_ERROR_LAYOUT
 *    at the run.
 *  - an origin is the absolute index of the first element (data[0]) along each dimension; the
 *    programs write their domain [0, n) and read halos at negative indices. NULL means zeros.
 *
 * Memory: fields and tables are views over the caller's arrays (no copy, no ownership): the
 * caller keeps them alive and unchanged in shape until they are set again or the handle is
 * destroyed. Transient memory follows ff_options.memory_mode (design §3, docs/memory.md). In
 * FF_MEMORY_EXTERNAL mode the host supplies it in one of two ways:
 *  - an allocator, given at creation in ff_options (allocate / release / allocator_user_data): it
 *    is called once per handle and device when sizes are first known, and again only when a
 *    later run needs more (after the old block's release ran); release runs when the handle is
 *    destroyed;
 *  - a caller-owned workspace per device, set after creation with ff_program_set_workspace
 *    (sized with ff_program_workspace_query) and before the first run that needs it. One buffer
 *    may be shared by several handles that run one after another. It is installed once and used
 *    for every run; setting another one replaces it from the next run on.
 * Calls on one handle are serialised; use one handle per thread to run in parallel. */
#ifndef FIELDFLOW_FIELDFLOW_H
#define FIELDFLOW_FIELDFLOW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- status codes ------------------------------------------------------------------------- */
typedef int ff_status;
enum {
  FF_OK = 0,
  FF_ERROR_INVALID_HANDLE = 1, /* NULL, never created or already destroyed handle */
  FF_ERROR_INVALID_VALUE = 2,  /* misuse of this API: NULL output pointer, unknown enum value, bad index */
  /* one per fieldflow::Error subclass (include/fieldflow/errors.h) */
  FF_ERROR_DIMENSION = 3,
  FF_ERROR_DTYPE = 4,
  FF_ERROR_PROGRAM = 5,
  FF_ERROR_ARGUMENT = 6,     /* missing / wrongly typed / aliasing argument, bad view */
  FF_ERROR_DOMAIN = 7,       /* a view smaller than the domain plus halo */
  FF_ERROR_CONNECTIVITY = 8, /* neighbour table of the wrong shape or with out-of-range entries */
  FF_ERROR_LAYOUT = 9,       /* a view's unit-stride dimension differs from the compiled layout */
  FF_ERROR_OPTION = 10,
  FF_ERROR_COMPILE = 11,
  FF_ERROR_CACHE = 12,
  FF_ERROR_STORAGE = 13,
  FF_ERROR_WORKSPACE = 14,   /* external memory missing, too small, NULL or misaligned */
  FF_ERROR_ALLOCATION = 15,
  FF_ERROR_CONCURRENCY = 16,
  FF_ERROR_INTERNAL = 17,    /* a bug in fieldflow */
  FF_ERROR_OUT_OF_MEMORY = 18,
  FF_ERROR_UNKNOWN = 19,     /* anything else thrown below this API (e.g. by a C++ allocator) */
  FF_ERROR_BACKEND_UNAVAILABLE = 20, /* FF_BACKEND_CUDA without the toolkit built in or a usable device */
  FF_ERROR_CUDA = 21         /* a CUDA API call failed: the message names it and CUDA's error */
};

/* The message of the most recent failed call on this thread ("" if none). Valid until the next
 * failing call on the same thread. Successful calls leave it unchanged. */
const char* ff_last_error(void);
/* The name of a status code, e.g. "FF_ERROR_LAYOUT" ("FF_UNKNOWN_STATUS" for other values). */
const char* ff_status_name(ff_status status);

/* ---- enumerations ------------------------------------------------------------------------- */
/* FF_BACKEND_CUDA (docs/cuda.md): the handle's fields are device memory (cudaMalloc, CUDA Fortran
 * `device` arrays, OpenACC `host_data use_device`), read and written in place; tables are host
 * memory, copied to the device when set. */
enum { FF_BACKEND_CPU = 0, FF_BACKEND_REFERENCE = 1, FF_BACKEND_CUDA = 2 };
/* Which dimension has stride 1. vertical_fastest: K unit-stride (C arrays [I][J][K], Fortran
 * (K, I, J)); horizontal_fastest: the first horizontal dimension unit-stride (C [K][J][I],
 * Fortran (I, J, K), ICON's (nproma, nlev)); any: every stride read at run time, any order
 * accepted (slower: no unit-stride vector loads). */
/* FF_LAYOUT_DEFAULT: the backend's (vertical_fastest on the host, horizontal_fastest on cuda; an
 * ahead-of-time program's: its library's). */
enum { FF_LAYOUT_DEFAULT = -1, FF_LAYOUT_VERTICAL_FASTEST = 0, FF_LAYOUT_HORIZONTAL_FASTEST = 1, FF_LAYOUT_ANY = 2 };
/* FF_MEMORY_DEFAULT: pool, or external when an allocator is given. */
enum {
  FF_MEMORY_DEFAULT = -1,
  FF_MEMORY_SCOPED = 0,
  FF_MEMORY_PERSISTENT = 1,
  FF_MEMORY_POOL = 2,
  FF_MEMORY_EXTERNAL = 3
};
enum { FF_DEVICE_CPU = 0, FF_DEVICE_CUDA = 1 };
enum { FF_DTYPE_BOOL = 0, FF_DTYPE_INT32 = 1, FF_DTYPE_INT64 = 2, FF_DTYPE_FLOAT32 = 3, FF_DTYPE_FLOAT64 = 4 };
enum { FF_PARAM_FIELD = 0, FF_PARAM_SCALAR = 1, FF_PARAM_CONNECTIVITY = 2 };
enum { FF_DIM_HORIZONTAL = 0, FF_DIM_VERTICAL = 1, FF_DIM_LOCAL = 2 };

/* ---- options ------------------------------------------------------------------------------ */
/* An external-memory allocator: returns a block of at least `bytes` bytes on `device`, aligned to
 * `alignment` (256), or NULL on failure (the run then fails with FF_ERROR_WORKSPACE). `program`
 * names the asking program (valid during the call only). */
typedef void* (*ff_allocate_fn)(void* user_data, int device, size_t bytes, size_t alignment, const char* program);
/* Gives back a block ff_allocate_fn returned (when the handle is destroyed, when a run needs a
 * larger block, or when fieldflow rejected the block as misaligned). */
typedef void (*ff_release_fn)(void* user_data, int device, void* pointer, size_t bytes);

typedef struct ff_options {
  int32_t backend;            /* FF_BACKEND_* (default CPU) */
  int32_t layout;             /* FF_LAYOUT_* (default DEFAULT) */
  int32_t memory_mode;        /* FF_MEMORY_* (default DEFAULT) */
  int32_t num_threads;        /* 0: OpenMP's default */
  int64_t parallel_threshold; /* kernels with at most this many points run on the calling thread */
  const char* cache_dir;      /* NULL: FIELDFLOW_CACHE_DIR, else ~/.cache/fieldflow; copied */
  ff_allocate_fn allocate;    /* external memory allocator, or NULL */
  ff_release_fn release;      /* may be NULL: blocks are then never given back */
  void* allocator_user_data;  /* passed to allocate and release unchanged */
} ff_options;

/* Fills *options with the defaults above (parallel_threshold as CompileOptions: 16384). */
ff_status ff_options_init(ff_options* options);

/* ---- program handles ---------------------------------------------------------------------- */
typedef struct ff_program ff_program; /* opaque; never dereferenced by the caller */

/* JIT-compiles the built-in example program `example_name` (see ff_example_count/ff_example_name;
 * e.g. "hdiff", "vadv", "fvm_nabla") with `options` (NULL: defaults) through the on-disk cache.
 * On failure *program is set to NULL. */
ff_status ff_program_create(const char* example_name, const ff_options* options, ff_program** program);
/* A handle over one program of an ahead-of-time library (include/fieldflow/aot.h): `aot` is what
 * the program's generated header returns (fieldflow_aot_<library>_<program>()). No compiler, cache
 * directory or dlopen is involved. options->layout must be DEFAULT or the library's, the backend the
 * library's: CPU, or CUDA for a library generated with BACKEND cuda, whose kernels are embedded
 * (FF_ERROR_OPTION naming both otherwise); memory options, threads and threshold are free. Same
 * C ABI and bitwise the same results as the JIT-compiled program. */
struct ff_aot_program;
ff_status ff_program_create_aot(const struct ff_aot_program* aot, const ff_options* options, ff_program** program);
/* Destroys the handle: releases persistent memory and runs the allocator's release for its blocks.
 * Destroying NULL is FF_OK; destroying a destroyed handle is FF_ERROR_INVALID_HANDLE. A run in
 * progress on another thread finishes first; the program goes when it returns. */
ff_status ff_program_destroy(ff_program* program);

/* Built-in example programs: count and name by index (the name is a static string). */
ff_status ff_example_count(int* count);
ff_status ff_example_name(int index, const char** name);

/* ---- introspection ------------------------------------------------------------------------ */
typedef struct ff_param_info {
  const char* name; /* valid while the handle lives */
  int32_t kind;     /* FF_PARAM_* */
  int32_t dtype;    /* FF_DTYPE_* (connectivities: INT32) */
  int32_t rank;     /* fields: number of dimensions; scalars 0; connectivities 2 */
  int32_t is_output;/* 1 when a statement of the program writes the field */
} ff_param_info;

ff_status ff_program_name(const ff_program* program, const char** name); /* valid while the handle lives */
ff_status ff_program_param_count(const ff_program* program, int* count);
/* Index of a parameter by name; FF_ERROR_ARGUMENT naming the valid ones if there is none. */
ff_status ff_program_param_index(const ff_program* program, const char* name, int* index);
ff_status ff_program_param_info(const ff_program* program, int index, ff_param_info* info);
/* Dimension `axis` of field parameter `index`, in the order shapes and strides are given:
 * its name ("I", "Edge", "K", "V2EDim", ...) and kind (FF_DIM_*). Connectivities have the
 * dimensions (source location, local dimension of the connectivity). */
ff_status ff_program_param_dim(const ff_program* program, int index, int axis, const char** name, int* kind);

/* ---- arguments ---------------------------------------------------------------------------- */
/* A field argument as a view over caller memory: `rank` must be the parameter's rank and
 * `dtype` its dtype (FF_DTYPE_BOOL: 1-byte booleans, Fortran logical(c_bool)). shape, strides and
 * origin (NULL: zeros) have `rank` entries each. The view is checked here (NULL data with
 * non-zero size, misalignment for the dtype, negative strides, ...) and against the other
 * arguments at the run (layout, aliasing outputs, extent smaller than domain + halo).
 * Setting a parameter again with the same shape, strides and origin only moves the view to the
 * new data (no allocation). */
ff_status ff_program_set_field(ff_program* program, const char* name, int dtype, void* data, int rank,
                               const int64_t* shape, const int64_t* strides, const int64_t* origin);
ff_status ff_program_set_field_at(ff_program* program, int index, int dtype, void* data, int rank,
                                  const int64_t* shape, const int64_t* strides, const int64_t* origin);
/* Scalars: int64 values for int32/int64 parameters (FF_ERROR_ARGUMENT when the value does not fit),
 * doubles for float32/float64 parameters (rounded to float for float32), 0/1 for bool ones. */
ff_status ff_program_set_int(ff_program* program, const char* name, int64_t value);
ff_status ff_program_set_int_at(ff_program* program, int index, int64_t value);
ff_status ff_program_set_real(ff_program* program, const char* name, double value);
ff_status ff_program_set_real_at(ff_program* program, int index, double value);
ff_status ff_program_set_bool(ff_program* program, const char* name, int value);
ff_status ff_program_set_bool_at(ff_program* program, int index, int value);
/* A neighbour table as a view over caller int32 memory: n_source rows of max_neighbors entries
 * (which must equal the connectivity's), entry (i, n) at data[i * source_stride + n *
 * neighbor_stride], -1 = missing neighbour, others in [0, n_target). C order
 * [n_source][max_neighbors]: strides (max_neighbors, 1); Fortran (n_source, max_neighbors):
 * (1, n_source). Entries are range-checked (FF_ERROR_CONNECTIVITY before anything is written) at
 * the first run with the table, and again only after a rejected run or when a different table
 * (pointer, shape or strides) was set; setting the same table again does nothing. The mesh is
 * static model data: a host that rewrites entries in place must set the table from another array
 * to have them checked again. */
ff_status ff_program_set_table(ff_program* program, const char* name, const int32_t* data, int64_t n_source,
                               int64_t n_target, int max_neighbors, int64_t source_stride, int64_t neighbor_stride);
ff_status ff_program_set_table_at(ff_program* program, int index, const int32_t* data, int64_t n_source,
                                  int64_t n_target, int max_neighbors, int64_t source_stride,
                                  int64_t neighbor_stride);

/* ---- transient memory --------------------------------------------------------------------- */
/* Bytes and alignment of transient memory the program needs on `device` for given sizes, before
 * any run: `names[i]` = `values[i]` for i < count, the program's size symbols: its int scalar
 * parameters ("nx", "nk", ...) and "len(<Location>)" for mesh locations ("len(Vertex)", the
 * tables' n_source / n_target). bytes is 0 when nothing is needed on that device. */
ff_status ff_program_workspace_query(const ff_program* program, int device, int count, const char* const* names,
                                     const int64_t* values, size_t* bytes, size_t* alignment);
/* The same for the sizes the arguments set so far imply (every argument must be set). */
ff_status ff_program_workspace_for_arguments(const ff_program* program, int device, size_t* bytes,
                                             size_t* alignment);
/* Installs a caller-owned workspace for `device` (FF_MEMORY_EXTERNAL handles created without an
 * allocator; FF_ERROR_OPTION otherwise). Validated at the next run that needs memory: not NULL,
 * at least the queried bytes, base aligned to the queried alignment (FF_ERROR_WORKSPACE naming
 * required and given bytes otherwise; nothing runs and a later run retries). Never freed by
 * fieldflow; several handles may share it if they run one after another. */
ff_status ff_program_set_workspace(ff_program* program, int device, void* pointer, size_t bytes);

typedef struct ff_memory_stats {
  uint64_t calls;
  uint64_t allocator_calls;     /* allocate invocations */
  uint64_t workspace_installs;  /* external memory validated and installed */
  uint64_t system_allocations;  /* heap allocations for transients through fieldflow's route */
  uint64_t system_frees;
  uint64_t pool_hits;
  uint64_t pool_misses;
  uint64_t release_actions;     /* release invocations */
  uint64_t bytes_installed;     /* bytes held for transients right now */
  uint64_t last_call_system_allocations;
} ff_memory_stats;
ff_status ff_program_memory_stats(const ff_program* program, ff_memory_stats* stats);

/* ---- running ------------------------------------------------------------------------------ */
/* Runs the program once on the arguments set so far (all must be set). Checks everything before
 * anything is written: on an error status no argument was changed. A FF_BACKEND_CUDA run
 * synchronises its stream before returning. */
ff_status ff_program_run(ff_program* program);
/* FF_BACKEND_CUDA handles: the stream (a cudaStream_t) of the following runs' launches, copies and
 * stream-ordered allocations; NULL: the handle's own stream (ordered after the legacy default
 * stream's work, docs/cuda.md). FF_ERROR_OPTION for a
 * non-NULL stream on a handle of another backend. */
ff_status ff_program_set_cuda_stream(ff_program* program, void* stream);

/* The loop form of the CPU backend's horizontal-fastest mesh blocks (docs/performance.md, "Two loop
 * forms"): the same bits either way, the faster depends on the machine and the kernel. A new
 * handle is TUNED: its first runs time both forms, then it keeps the faster, and
 * ff_program_loop_form reports SCALAR or VECTOR. Setting SCALAR or VECTOR pins a form for the
 * following runs; setting TUNED times both afresh (e.g. after the sizes changed). A handle whose
 * module has one form (other programs, layouts and backends) reports SCALAR after TUNED. An
 * unknown value is FF_ERROR_OPTION and changes nothing. */
enum { FF_LOOP_FORM_TUNED = 0, FF_LOOP_FORM_SCALAR = 1, FF_LOOP_FORM_VECTOR = 2 };
ff_status ff_program_set_loop_form(ff_program* program, int form);
ff_status ff_program_loop_form(const ff_program* program, int* form);

/* ---- meshes (examples, tests and drivers) ------------------------------------------------- */
/* The element counts of fieldflow's triangular mesh of nx x ny vertices (include/fieldflow/mesh.h):
 * kind "torus" (periodic, nx, ny >= 3) or "bounded" (nx, ny >= 2, tables contain -1). */
ff_status ff_mesh_sizes(const char* kind, int nx, int ny, int64_t* n_vertices, int64_t* n_edges, int64_t* n_cells);
/* Copies the mesh's table `table` ("E2V", "V2E", "C2E2CO", ...) into caller memory: entry (i, n)
 * to data[i * source_stride + n * neighbor_stride]; n_source and max_neighbors must match the
 * table's (FF_ERROR_CONNECTIVITY naming both otherwise). */
ff_status ff_mesh_table(const char* kind, int nx, int ny, const char* table, int32_t* data, int64_t n_source,
                        int max_neighbors, int64_t source_stride, int64_t neighbor_stride);

#ifdef __cplusplus
}
#endif

#endif /* FIELDFLOW_FIELDFLOW_H */
