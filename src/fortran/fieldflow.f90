! The Fortran module `fieldflow`: fieldflow's C API (include/fieldflow/fieldflow.h) bound with
! ISO_C_BINDING interface blocks, plus thin wrappers that pass Fortran arrays as views (pointer,
! shape, strides) without copying. User guide: docs/host.md, "The Fortran module".
!
! Conventions:
!  - every function returns an integer(c_int) status: FF_OK or an FF_ERROR_* code;
!    ff_last_error() returns the message of the thread's last failed call. ff_check(status)
!    stops the program with that message when status is not FF_OK.
!  - arrays are passed as views over the caller's memory: fieldflow keeps their address, so an
!    array passed to ff_set_field needs the TARGET (or POINTER / ALLOCATABLE with TARGET)
!    attribute and must stay allocated until it is set again or the program is destroyed. Any
!    strides work (sections, padded arrays); shape and strides are taken from the array itself,
!    column-major: an array a(n1, n2, n3) has strides (1, n1, n1*n2). Arrays of (I, J, K) or
!    (Vertex, K) are unit-stride in the first, horizontal, dimension: compile the programs with
!    layout FF_LAYOUT_HORIZONTAL_FASTEST.
!  - indices: fieldflow's index space is 0-based. `origin` is the fieldflow index of the array's
!    first element along each dimension (default 0): an array declared in(nx+4, ny+4, nk) that
!    holds a halo of 2 around the domain [0, nx) x [0, ny) is passed with origin = [-2, -2, 0]
!    (so in(3, 3, 1) is the domain's first point). Neighbour tables hold 0-based indices, -1 for a
!    missing neighbour, as fieldflow's tables do.
!  - parameter indices of ff_param_info / ff_param_dim are 1-based here (0-based in C).
module fieldflow
  use, intrinsic :: iso_c_binding
  implicit none
  private

  ! Status codes (fieldflow.h).
  integer(c_int), parameter, public :: FF_OK = 0, FF_ERROR_INVALID_HANDLE = 1, FF_ERROR_INVALID_VALUE = 2, &
      FF_ERROR_DIMENSION = 3, FF_ERROR_DTYPE = 4, FF_ERROR_PROGRAM = 5, FF_ERROR_ARGUMENT = 6, &
      FF_ERROR_DOMAIN = 7, FF_ERROR_CONNECTIVITY = 8, FF_ERROR_LAYOUT = 9, FF_ERROR_OPTION = 10, &
      FF_ERROR_COMPILE = 11, FF_ERROR_CACHE = 12, FF_ERROR_STORAGE = 13, FF_ERROR_WORKSPACE = 14, &
      FF_ERROR_ALLOCATION = 15, FF_ERROR_CONCURRENCY = 16, FF_ERROR_INTERNAL = 17, &
      FF_ERROR_OUT_OF_MEMORY = 18, FF_ERROR_UNKNOWN = 19, FF_ERROR_BACKEND_UNAVAILABLE = 20, FF_ERROR_CUDA = 21
  ! FF_BACKEND_CUDA: fields are device memory (CUDA Fortran `device` arrays, OpenACC host_data use_device).
  integer(c_int32_t), parameter, public :: FF_BACKEND_CPU = 0, FF_BACKEND_REFERENCE = 1, FF_BACKEND_CUDA = 2
  integer(c_int32_t), parameter, public :: FF_LAYOUT_DEFAULT = -1, FF_LAYOUT_VERTICAL_FASTEST = 0, &
      FF_LAYOUT_HORIZONTAL_FASTEST = 1, FF_LAYOUT_ANY = 2
  integer(c_int32_t), parameter, public :: FF_MEMORY_DEFAULT = -1, FF_MEMORY_SCOPED = 0, &
      FF_MEMORY_PERSISTENT = 1, FF_MEMORY_POOL = 2, FF_MEMORY_EXTERNAL = 3
  integer(c_int), parameter, public :: FF_DEVICE_CPU = 0, FF_DEVICE_CUDA = 1
  integer(c_int), parameter, public :: FF_DTYPE_BOOL = 0, FF_DTYPE_INT32 = 1, FF_DTYPE_INT64 = 2, &
      FF_DTYPE_FLOAT32 = 3, FF_DTYPE_FLOAT64 = 4
  integer(c_int), parameter, public :: FF_PARAM_FIELD = 0, FF_PARAM_SCALAR = 1, FF_PARAM_CONNECTIVITY = 2
  integer(c_int), parameter, public :: FF_DIM_HORIZONTAL = 0, FF_DIM_VERTICAL = 1, FF_DIM_LOCAL = 2
  integer(c_int), parameter, public :: FF_LOOP_FORM_TUNED = 0, FF_LOOP_FORM_SCALAR = 1, FF_LOOP_FORM_VECTOR = 2

  ! ff_options of fieldflow.h, member for member. Initialised to ff_options_init's defaults.
  type, bind(c), public :: ff_options
    integer(c_int32_t) :: backend = FF_BACKEND_CPU
    integer(c_int32_t) :: layout = FF_LAYOUT_DEFAULT   ! the backend's (the library's for AOT)
    integer(c_int32_t) :: memory_mode = FF_MEMORY_DEFAULT
    integer(c_int32_t) :: num_threads = 0
    integer(c_int64_t) :: parallel_threshold = 16384
    type(c_ptr) :: cache_dir = c_null_ptr            ! a NUL-terminated C string, or c_null_ptr
    type(c_funptr) :: allocate = c_null_funptr       ! c_funloc of a bind(c) allocator (ff_allocate_fn)
    type(c_funptr) :: release = c_null_funptr        ! c_funloc of a bind(c) ff_release_fn
    type(c_ptr) :: allocator_user_data = c_null_ptr
  end type ff_options

  ! ff_memory_stats of fieldflow.h (uint64_t counters, read as integer(c_int64_t)).
  type, bind(c), public :: ff_memory_stats
    integer(c_int64_t) :: calls, allocator_calls, workspace_installs, system_allocations, system_frees, &
        pool_hits, pool_misses, release_actions, bytes_installed, last_call_system_allocations
  end type ff_memory_stats

  ! A program handle. c_null_ptr until created; ff_program_destroy sets it back.
  type, public :: ff_program
    type(c_ptr) :: handle = c_null_ptr
  end type ff_program

  type, bind(c) :: c_param_info
    type(c_ptr) :: name
    integer(c_int32_t) :: kind, dtype, rank, is_output
  end type c_param_info

  public :: ff_last_error, ff_check, ff_options_init, ff_program_create, ff_program_create_aot, &
      ff_program_destroy, ff_program_run, ff_set_cuda_stream, ff_set_loop_form, ff_get_loop_form, &
      ff_set_field, ff_set_table, ff_set_int, ff_set_real, ff_set_bool, ff_workspace_query, &
      ff_workspace_for_arguments, ff_set_workspace, ff_get_memory_stats, ff_param_count, ff_param_info, &
      ff_param_dim, ff_mesh_sizes, ff_mesh_table

  ! Fields of any of the five dtypes, rank 1 to 4: ff_set_field(program, name, array [, origin]).
  interface ff_set_field
    module procedure &
      set_field_r8_1, &
      set_field_r8_2, &
      set_field_r8_3, &
      set_field_r8_4, &
      set_field_r4_1, &
      set_field_r4_2, &
      set_field_r4_3, &
      set_field_r4_4, &
      set_field_i4_1, &
      set_field_i4_2, &
      set_field_i4_3, &
      set_field_i4_4, &
      set_field_i8_1, &
      set_field_i8_2, &
      set_field_i8_3, &
      set_field_i8_4, &
      set_field_l1_1, &
      set_field_l1_2, &
      set_field_l1_3, &
      set_field_l1_4
  end interface ff_set_field

  ! Integer scalars from default or 64-bit integers.
  interface ff_set_int
    module procedure set_int_i4, set_int_i8
  end interface ff_set_int

  interface
    function c_strlen(s) bind(c, name="strlen") result(n)
      import :: c_ptr, c_size_t
      type(c_ptr), value :: s
      integer(c_size_t) :: n
    end function c_strlen
    function c_last_error() bind(c, name="ff_last_error") result(p)
      import :: c_ptr
      type(c_ptr) :: p
    end function c_last_error
    function ff_options_init(options) bind(c, name="ff_options_init") result(status)
      import :: c_int, ff_options
      type(ff_options), intent(out) :: options
      integer(c_int) :: status
    end function ff_options_init
    function c_program_create(example, options, program) bind(c, name="ff_program_create") result(status)
      import :: c_int, c_char, c_ptr, ff_options
      character(kind=c_char), intent(in) :: example(*)
      type(ff_options), intent(in) :: options
      type(c_ptr), intent(out) :: program
      integer(c_int) :: status
    end function c_program_create
    function c_program_create_aot(aot, options, program) bind(c, name="ff_program_create_aot") result(status)
      import :: c_int, c_ptr, ff_options
      type(c_ptr), value :: aot
      type(ff_options), intent(in) :: options
      type(c_ptr), intent(out) :: program
      integer(c_int) :: status
    end function c_program_create_aot
    function c_program_destroy(program) bind(c, name="ff_program_destroy") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: program
      integer(c_int) :: status
    end function c_program_destroy
    function c_program_run(program) bind(c, name="ff_program_run") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: program
      integer(c_int) :: status
    end function c_program_run
    function c_set_cuda_stream(program, stream) bind(c, name="ff_program_set_cuda_stream") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: program, stream
      integer(c_int) :: status
    end function c_set_cuda_stream
    function c_set_loop_form(program, form) bind(c, name="ff_program_set_loop_form") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: program
      integer(c_int), value :: form
      integer(c_int) :: status
    end function c_set_loop_form
    function c_loop_form(program, form) bind(c, name="ff_program_loop_form") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: program
      integer(c_int), intent(out) :: form
      integer(c_int) :: status
    end function c_loop_form
    function c_set_field(program, name, dtype, data, rank, shape, strides, origin) &
        bind(c, name="ff_program_set_field") result(status)
      import :: c_int, c_char, c_ptr, c_int64_t
      type(c_ptr), value :: program
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: dtype
      type(c_ptr), value :: data
      integer(c_int), value :: rank
      integer(c_int64_t), intent(in) :: shape(*), strides(*), origin(*)
      integer(c_int) :: status
    end function c_set_field
    function c_set_table(program, name, data, n_source, n_target, max_neighbors, source_stride, neighbor_stride) &
        bind(c, name="ff_program_set_table") result(status)
      import :: c_int, c_char, c_ptr, c_int64_t
      type(c_ptr), value :: program
      character(kind=c_char), intent(in) :: name(*)
      type(c_ptr), value :: data
      integer(c_int64_t), value :: n_source, n_target
      integer(c_int), value :: max_neighbors
      integer(c_int64_t), value :: source_stride, neighbor_stride
      integer(c_int) :: status
    end function c_set_table
    function c_set_int(program, name, value) bind(c, name="ff_program_set_int") result(status)
      import :: c_int, c_char, c_ptr, c_int64_t
      type(c_ptr), value :: program
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int64_t), value :: value
      integer(c_int) :: status
    end function c_set_int
    function c_set_real(program, name, value) bind(c, name="ff_program_set_real") result(status)
      import :: c_int, c_char, c_ptr, c_double
      type(c_ptr), value :: program
      character(kind=c_char), intent(in) :: name(*)
      real(c_double), value :: value
      integer(c_int) :: status
    end function c_set_real
    function c_set_bool(program, name, value) bind(c, name="ff_program_set_bool") result(status)
      import :: c_int, c_char, c_ptr
      type(c_ptr), value :: program
      character(kind=c_char), intent(in) :: name(*)
      integer(c_int), value :: value
      integer(c_int) :: status
    end function c_set_bool
    function c_workspace_query(program, device, count, names, values, bytes, alignment) &
        bind(c, name="ff_program_workspace_query") result(status)
      import :: c_int, c_ptr, c_int64_t, c_size_t
      type(c_ptr), value :: program
      integer(c_int), value :: device, count
      type(c_ptr), intent(in) :: names(*)
      integer(c_int64_t), intent(in) :: values(*)
      integer(c_size_t), intent(out) :: bytes, alignment
      integer(c_int) :: status
    end function c_workspace_query
    function c_workspace_for_arguments(program, device, bytes, alignment) &
        bind(c, name="ff_program_workspace_for_arguments") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: program
      integer(c_int), value :: device
      integer(c_size_t), intent(out) :: bytes, alignment
      integer(c_int) :: status
    end function c_workspace_for_arguments
    function c_set_workspace(program, device, pointer, bytes) bind(c, name="ff_program_set_workspace") result(status)
      import :: c_int, c_ptr, c_size_t
      type(c_ptr), value :: program
      integer(c_int), value :: device
      type(c_ptr), value :: pointer
      integer(c_size_t), value :: bytes
      integer(c_int) :: status
    end function c_set_workspace
    function c_memory_stats(program, stats) bind(c, name="ff_program_memory_stats") result(status)
      import :: c_int, c_ptr, ff_memory_stats
      type(c_ptr), value :: program
      type(ff_memory_stats), intent(out) :: stats
      integer(c_int) :: status
    end function c_memory_stats
    function c_param_count(program, count) bind(c, name="ff_program_param_count") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: program
      integer(c_int), intent(out) :: count
      integer(c_int) :: status
    end function c_param_count
    function c_get_param_info(program, index, info) bind(c, name="ff_program_param_info") result(status)
      import :: c_int, c_ptr, c_param_info
      type(c_ptr), value :: program
      integer(c_int), value :: index
      type(c_param_info), intent(out) :: info
      integer(c_int) :: status
    end function c_get_param_info
    function c_param_dim(program, index, axis, name, kind) bind(c, name="ff_program_param_dim") result(status)
      import :: c_int, c_ptr
      type(c_ptr), value :: program
      integer(c_int), value :: index, axis
      type(c_ptr), intent(out) :: name
      integer(c_int), intent(out) :: kind
      integer(c_int) :: status
    end function c_param_dim
    function c_mesh_sizes(kind, nx, ny, n_vertices, n_edges, n_cells) bind(c, name="ff_mesh_sizes") result(status)
      import :: c_int, c_char, c_int64_t
      character(kind=c_char), intent(in) :: kind(*)
      integer(c_int), value :: nx, ny
      integer(c_int64_t), intent(out) :: n_vertices, n_edges, n_cells
      integer(c_int) :: status
    end function c_mesh_sizes
    function c_mesh_table(kind, nx, ny, table, data, n_source, max_neighbors, source_stride, neighbor_stride) &
        bind(c, name="ff_mesh_table") result(status)
      import :: c_int, c_char, c_ptr, c_int64_t
      character(kind=c_char), intent(in) :: kind(*), table(*)
      integer(c_int), value :: nx, ny
      type(c_ptr), value :: data
      integer(c_int64_t), value :: n_source
      integer(c_int), value :: max_neighbors
      integer(c_int64_t), value :: source_stride, neighbor_stride
      integer(c_int) :: status
    end function c_mesh_table
  end interface

contains

  ! A Fortran string as a NUL-terminated C string.
  pure function c_str(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len_trim(s) + 1) :: c
    c = trim(s) // c_null_char
  end function c_str

  ! A C string (valid for the duration of the call) as a Fortran string.
  function f_str(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer(c_size_t) :: n, i
    if (.not. c_associated(p)) then
      s = ""
      return
    end if
    n = c_strlen(p)
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
      s(i:i) = chars(i)
    end do
  end function f_str

  ! The message of the calling thread's most recent failed call.
  function ff_last_error() result(message)
    character(len=:), allocatable :: message
    message = f_str(c_last_error())
  end function ff_last_error

  ! Stops the program with the last error's message (and `where`, if given) unless status is FF_OK.
  subroutine ff_check(status, where)
    integer(c_int), intent(in) :: status
    character(len=*), intent(in), optional :: where
    if (status == FF_OK) return
    if (present(where)) then
      write (*, '(a, a, i0, a, a)') where, ": fieldflow status ", status, ": ", ff_last_error()
    else
      write (*, '(a, i0, a, a)') "fieldflow status ", status, ": ", ff_last_error()
    end if
    error stop 1
  end subroutine ff_check

  ! JIT-compiles the built-in example program `example` (options: ff_options_init's defaults).
  function ff_program_create(program, example, options) result(status)
    type(ff_program), intent(out) :: program
    character(len=*), intent(in) :: example
    type(ff_options), intent(in), optional :: options
    integer(c_int) :: status
    type(ff_options) :: o
    if (present(options)) then
      o = options
    else
      status = ff_options_init(o)
    end if
    status = c_program_create(c_str(example), o, program%handle)
  end function ff_program_create

  ! A program of an ahead-of-time library: `aot` is what its generated C function
  ! fieldflow_aot_<library>_<program>() returns (bind it with a bind(c) interface returning c_ptr).
  function ff_program_create_aot(program, aot, options) result(status)
    type(ff_program), intent(out) :: program
    type(c_ptr), intent(in) :: aot
    type(ff_options), intent(in), optional :: options
    integer(c_int) :: status
    type(ff_options) :: o
    if (present(options)) o = options
    status = c_program_create_aot(aot, o, program%handle)
  end function ff_program_create_aot

  function ff_program_destroy(program) result(status)
    type(ff_program), intent(inout) :: program
    integer(c_int) :: status
    status = c_program_destroy(program%handle)
    if (status == FF_OK) program%handle = c_null_ptr
  end function ff_program_destroy

  function ff_program_run(program) result(status)
    type(ff_program), intent(in) :: program
    integer(c_int) :: status
    status = c_program_run(program%handle)
  end function ff_program_run

  ! The stream (a cudaStream_t as c_ptr, e.g. from acc_get_cuda_stream) of a FF_BACKEND_CUDA
  ! program's following runs; c_null_ptr: the program's own stream.
  function ff_set_cuda_stream(program, stream) result(status)
    type(ff_program), intent(in) :: program
    type(c_ptr), intent(in) :: stream
    integer(c_int) :: status
    status = c_set_cuda_stream(program%handle, stream)
  end function ff_set_cuda_stream

  ! The loop form of the CPU backend's horizontal-fastest mesh blocks (ff_program_set_loop_form):
  ! FF_LOOP_FORM_SCALAR or FF_LOOP_FORM_VECTOR pins one for the following runs, FF_LOOP_FORM_TUNED
  ! times both afresh on the next runs and keeps the faster. Both give the same bits.
  function ff_set_loop_form(program, form) result(status)
    type(ff_program), intent(in) :: program
    integer(c_int), intent(in) :: form
    integer(c_int) :: status
    status = c_set_loop_form(program%handle, form)
  end function ff_set_loop_form

  ! The form the next run uses; FF_LOOP_FORM_TUNED while the handle still times both.
  function ff_get_loop_form(program, form) result(status)
    type(ff_program), intent(in) :: program
    integer(c_int), intent(out) :: form
    integer(c_int) :: status
    status = c_loop_form(program%handle, form)
  end function ff_get_loop_form

  function address_of(p) result(a)
    type(c_ptr), intent(in) :: p
    integer(c_intptr_t) :: a
    a = transfer(p, a)
  end function address_of

  ! Passes a view: `next(d)` is the address of the element one step along dimension d from the
  ! first (equal to the first's where the extent is 1), so strides come from the array's real
  ! layout, whether contiguous, a section or padded.
  function set_view(program, name, dtype, first, shp, next, element_bytes, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int), intent(in) :: dtype
    type(c_ptr), intent(in) :: first
    integer(c_int64_t), intent(in) :: shp(:)
    integer(c_intptr_t), intent(in) :: next(:)
    integer(c_int64_t), intent(in) :: element_bytes
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: strides(size(shp)), org(size(shp)), dense
    integer :: d
    dense = 1
    do d = 1, size(shp)
      if (shp(d) > 1 .and. c_associated(first)) then
        strides(d) = (next(d) - address_of(first)) / element_bytes
      else
        strides(d) = dense  ! any stride is right along an extent of 1; the column-major one is clearest
      end if
      dense = dense * max(shp(d), 1_c_int64_t)
    end do
    org = 0
    if (present(origin)) then
      if (size(origin) /= size(shp)) then
        status = c_set_field(program%handle, c_str(name), dtype, first, -1_c_int, shp, strides, org)
        return  ! the C API reports the rank mismatch, naming the parameter
      end if
      org = origin
    end if
    status = c_set_field(program%handle, c_str(name), dtype, first, int(size(shp), c_int), shp, strides, org)
  end function set_view

  function set_field_r8_1(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_double), target :: a(:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(1)
    integer(c_intptr_t) :: next(1)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)))))
    end if
    status = set_view(program, name, FF_DTYPE_FLOAT64, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_r8_1

  function set_field_r8_2(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_double), target :: a(:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(2)
    integer(c_intptr_t) :: next(2)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)))))
    end if
    status = set_view(program, name, FF_DTYPE_FLOAT64, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_r8_2

  function set_field_r8_3(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_double), target :: a(:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(3)
    integer(c_intptr_t) :: next(3)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)))))
    end if
    status = set_view(program, name, FF_DTYPE_FLOAT64, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_r8_3

  function set_field_r8_4(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_double), target :: a(:,:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(4)
    integer(c_intptr_t) :: next(4)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1,1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)),1)))
      next(4) = address_of(c_loc(a(1,1,1,min(2_c_int64_t, shp(4)))))
    end if
    status = set_view(program, name, FF_DTYPE_FLOAT64, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_r8_4

  function set_field_r4_1(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_float), target :: a(:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(1)
    integer(c_intptr_t) :: next(1)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)))))
    end if
    status = set_view(program, name, FF_DTYPE_FLOAT32, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_r4_1

  function set_field_r4_2(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_float), target :: a(:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(2)
    integer(c_intptr_t) :: next(2)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)))))
    end if
    status = set_view(program, name, FF_DTYPE_FLOAT32, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_r4_2

  function set_field_r4_3(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_float), target :: a(:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(3)
    integer(c_intptr_t) :: next(3)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)))))
    end if
    status = set_view(program, name, FF_DTYPE_FLOAT32, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_r4_3

  function set_field_r4_4(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_float), target :: a(:,:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(4)
    integer(c_intptr_t) :: next(4)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1,1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)),1)))
      next(4) = address_of(c_loc(a(1,1,1,min(2_c_int64_t, shp(4)))))
    end if
    status = set_view(program, name, FF_DTYPE_FLOAT32, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_r4_4

  function set_field_i4_1(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int32_t), target :: a(:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(1)
    integer(c_intptr_t) :: next(1)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)))))
    end if
    status = set_view(program, name, FF_DTYPE_INT32, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_i4_1

  function set_field_i4_2(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int32_t), target :: a(:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(2)
    integer(c_intptr_t) :: next(2)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)))))
    end if
    status = set_view(program, name, FF_DTYPE_INT32, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_i4_2

  function set_field_i4_3(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int32_t), target :: a(:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(3)
    integer(c_intptr_t) :: next(3)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)))))
    end if
    status = set_view(program, name, FF_DTYPE_INT32, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_i4_3

  function set_field_i4_4(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int32_t), target :: a(:,:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(4)
    integer(c_intptr_t) :: next(4)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1,1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)),1)))
      next(4) = address_of(c_loc(a(1,1,1,min(2_c_int64_t, shp(4)))))
    end if
    status = set_view(program, name, FF_DTYPE_INT32, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_i4_4

  function set_field_i8_1(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int64_t), target :: a(:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(1)
    integer(c_intptr_t) :: next(1)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)))))
    end if
    status = set_view(program, name, FF_DTYPE_INT64, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_i8_1

  function set_field_i8_2(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int64_t), target :: a(:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(2)
    integer(c_intptr_t) :: next(2)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)))))
    end if
    status = set_view(program, name, FF_DTYPE_INT64, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_i8_2

  function set_field_i8_3(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int64_t), target :: a(:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(3)
    integer(c_intptr_t) :: next(3)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)))))
    end if
    status = set_view(program, name, FF_DTYPE_INT64, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_i8_3

  function set_field_i8_4(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int64_t), target :: a(:,:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(4)
    integer(c_intptr_t) :: next(4)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1,1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)),1)))
      next(4) = address_of(c_loc(a(1,1,1,min(2_c_int64_t, shp(4)))))
    end if
    status = set_view(program, name, FF_DTYPE_INT64, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_i8_4

  function set_field_l1_1(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    logical(c_bool), target :: a(:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(1)
    integer(c_intptr_t) :: next(1)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)))))
    end if
    status = set_view(program, name, FF_DTYPE_BOOL, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_l1_1

  function set_field_l1_2(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    logical(c_bool), target :: a(:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(2)
    integer(c_intptr_t) :: next(2)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)))))
    end if
    status = set_view(program, name, FF_DTYPE_BOOL, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_l1_2

  function set_field_l1_3(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    logical(c_bool), target :: a(:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(3)
    integer(c_intptr_t) :: next(3)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)))))
    end if
    status = set_view(program, name, FF_DTYPE_BOOL, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_l1_3

  function set_field_l1_4(program, name, a, origin) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    logical(c_bool), target :: a(:,:,:,:)
    integer(c_int64_t), intent(in), optional :: origin(:)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(4)
    integer(c_intptr_t) :: next(4)
    type(c_ptr) :: first
    shp = shape(a, kind=c_int64_t)
    first = c_null_ptr
    next = 0
    if (size(a, kind=c_int64_t) > 0) then
      first = c_loc(a(1,1,1,1))
      next(1) = address_of(c_loc(a(min(2_c_int64_t, shp(1)),1,1,1)))
      next(2) = address_of(c_loc(a(1,min(2_c_int64_t, shp(2)),1,1)))
      next(3) = address_of(c_loc(a(1,1,min(2_c_int64_t, shp(3)),1)))
      next(4) = address_of(c_loc(a(1,1,1,min(2_c_int64_t, shp(4)))))
    end if
    status = set_view(program, name, FF_DTYPE_BOOL, first, shp, next, int(storage_size(a) / 8, c_int64_t), origin)
  end function set_field_l1_4

  function set_int_i8(program, name, value) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int64_t), intent(in) :: value
    integer(c_int) :: status
    status = c_set_int(program%handle, c_str(name), value)
  end function set_int_i8

  function set_int_i4(program, name, value) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int32_t), intent(in) :: value
    integer(c_int) :: status
    status = c_set_int(program%handle, c_str(name), int(value, c_int64_t))
  end function set_int_i4

  function ff_set_real(program, name, value) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    real(c_double), intent(in) :: value
    integer(c_int) :: status
    status = c_set_real(program%handle, c_str(name), value)
  end function ff_set_real

  function ff_set_bool(program, name, value) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    logical, intent(in) :: value
    integer(c_int) :: status
    status = c_set_bool(program%handle, c_str(name), merge(1_c_int, 0_c_int, value))
  end function ff_set_bool

  ! A neighbour table table(n_source, max_neighbors) (Fortran order; any strides) with 0-based
  ! entries and -1 for missing neighbours; n_target: the number of target elements.
  function ff_set_table(program, name, table, n_target) result(status)
    type(ff_program), intent(in) :: program
    character(len=*), intent(in) :: name
    integer(c_int32_t), target :: table(:, :)
    integer(c_int64_t), intent(in) :: n_target
    integer(c_int) :: status
    integer(c_int64_t) :: shp(2), strides(2)
    type(c_ptr) :: first
    shp = shape(table, kind=c_int64_t)
    strides = [1_c_int64_t, shp(1)]
    first = c_null_ptr
    if (size(table) > 0) then
      first = c_loc(table(1, 1))
      if (shp(1) > 1) strides(1) = (address_of(c_loc(table(2, 1))) - address_of(first)) / 4
      if (shp(2) > 1) strides(2) = (address_of(c_loc(table(1, 2))) - address_of(first)) / 4
    end if
    status = c_set_table(program%handle, c_str(name), first, shp(1), n_target, int(shp(2), c_int), strides(1), &
        strides(2))
  end function ff_set_table

  ! Bytes and alignment of transient memory `program` needs on `device` for the sizes
  ! names(i) = values(i): its int scalar parameters ("nx", "nk") and "len(<Location>)".
  function ff_workspace_query(program, device, names, values, bytes, alignment) result(status)
    type(ff_program), intent(in) :: program
    integer(c_int), intent(in) :: device
    character(len=*), intent(in) :: names(:)
    integer(c_int64_t), intent(in) :: values(:)
    integer(c_size_t), intent(out) :: bytes, alignment
    integer(c_int) :: status
    character(kind=c_char), allocatable, target :: buffers(:, :)
    type(c_ptr) :: pointers(size(names))
    integer :: i, j, n
    allocate(buffers(len(names) + 1, max(size(names), 1)))
    do i = 1, size(names)
      n = len_trim(names(i))
      do j = 1, n
        buffers(j, i) = names(i)(j:j)
      end do
      buffers(n + 1, i) = c_null_char
      pointers(i) = c_loc(buffers(1, i))
    end do
    if (size(names) /= size(values)) then
      bytes = 0
      alignment = 0
      status = c_workspace_query(program%handle, device, -1_c_int, pointers, values, bytes, alignment)
      return  ! the C API reports the invalid count
    end if
    status = c_workspace_query(program%handle, device, int(size(names), c_int), pointers, values, bytes, alignment)
  end function ff_workspace_query

  ! The same for the sizes the arguments set so far imply.
  function ff_workspace_for_arguments(program, device, bytes, alignment) result(status)
    type(ff_program), intent(in) :: program
    integer(c_int), intent(in) :: device
    integer(c_size_t), intent(out) :: bytes, alignment
    integer(c_int) :: status
    status = c_workspace_for_arguments(program%handle, device, bytes, alignment)
  end function ff_workspace_for_arguments

  ! Installs `bytes` bytes at `pointer` as the caller-owned workspace of `device` (programs
  ! created with memory_mode = FF_MEMORY_EXTERNAL); several programs may share one buffer.
  function ff_set_workspace(program, device, pointer, bytes) result(status)
    type(ff_program), intent(in) :: program
    integer(c_int), intent(in) :: device
    type(c_ptr), intent(in) :: pointer
    integer(c_size_t), intent(in) :: bytes
    integer(c_int) :: status
    status = c_set_workspace(program%handle, device, pointer, bytes)
  end function ff_set_workspace

  function ff_get_memory_stats(program, stats) result(status)
    type(ff_program), intent(in) :: program
    type(ff_memory_stats), intent(out) :: stats
    integer(c_int) :: status
    status = c_memory_stats(program%handle, stats)
  end function ff_get_memory_stats

  function ff_param_count(program, count) result(status)
    type(ff_program), intent(in) :: program
    integer, intent(out) :: count
    integer(c_int) :: status, n
    status = c_param_count(program%handle, n)
    count = n
  end function ff_param_count

  ! Parameter `index` (1-based): name, kind (FF_PARAM_*), dtype (FF_DTYPE_*), rank, is_output.
  function ff_param_info(program, index, name, kind, dtype, rank, is_output) result(status)
    type(ff_program), intent(in) :: program
    integer, intent(in) :: index
    character(len=:), allocatable, intent(out) :: name
    integer, intent(out) :: kind, dtype, rank
    logical, intent(out) :: is_output
    integer(c_int) :: status
    type(c_param_info) :: info
    status = c_get_param_info(program%handle, int(index - 1, c_int), info)
    if (status /= FF_OK) then
      name = ""
      kind = -1
      dtype = -1
      rank = -1
      is_output = .false.
      return
    end if
    name = f_str(info%name)
    kind = info%kind
    dtype = info%dtype
    rank = info%rank
    is_output = info%is_output /= 0
  end function ff_param_info

  ! Dimension `axis` (1-based) of parameter `index` (1-based): its name and kind (FF_DIM_*).
  function ff_param_dim(program, index, axis, name, kind) result(status)
    type(ff_program), intent(in) :: program
    integer, intent(in) :: index, axis
    character(len=:), allocatable, intent(out) :: name
    integer, intent(out) :: kind
    integer(c_int) :: status, k
    type(c_ptr) :: p
    p = c_null_ptr
    k = -1
    status = c_param_dim(program%handle, int(index - 1, c_int), int(axis - 1, c_int), p, k)
    name = f_str(p)
    kind = k
  end function ff_param_dim

  ! Element counts of fieldflow's triangular mesh ("torus" or "bounded", nx x ny vertices).
  function ff_mesh_sizes(kind, nx, ny, n_vertices, n_edges, n_cells) result(status)
    character(len=*), intent(in) :: kind
    integer, intent(in) :: nx, ny
    integer(c_int64_t), intent(out) :: n_vertices, n_edges, n_cells
    integer(c_int) :: status
    status = c_mesh_sizes(c_str(kind), int(nx, c_int), int(ny, c_int), n_vertices, n_edges, n_cells)
  end function ff_mesh_sizes

  ! Fills table(n_source, max_neighbors) with the mesh's table `name` (0-based entries, -1 missing).
  function ff_mesh_table(kind, nx, ny, name, table) result(status)
    character(len=*), intent(in) :: kind, name
    integer, intent(in) :: nx, ny
    integer(c_int32_t), target :: table(:, :)
    integer(c_int) :: status
    integer(c_int64_t) :: shp(2), strides(2)
    type(c_ptr) :: first
    shp = shape(table, kind=c_int64_t)
    strides = [1_c_int64_t, shp(1)]
    first = c_null_ptr
    if (size(table) > 0) then
      first = c_loc(table(1, 1))
      if (shp(1) > 1) strides(1) = (address_of(c_loc(table(2, 1))) - address_of(first)) / 4
      if (shp(2) > 1) strides(2) = (address_of(c_loc(table(1, 2))) - address_of(first)) / 4
    end if
    status = c_mesh_table(c_str(kind), int(nx, c_int), int(ny, c_int), c_str(name), first, shp(1), &
        int(shp(2), c_int), strides(1), strides(2))
  end function ff_mesh_table

end module fieldflow
