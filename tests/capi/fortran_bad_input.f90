! Bad input from Fortran through the module `fieldflow` (issue 9): a workspace smaller than
! queried, an allocator written in Fortran that returns no memory, arrays in the wrong stride
! order, the wrong kind, a destroyed and a never-created handle; and an ahead-of-time program — each an error status with a message, nothing written. And a padded array section passed
! as a view (strides taken from the section) gives the same results as a contiguous copy.
program fortran_bad_input
  use, intrinsic :: iso_c_binding
  use fieldflow
  implicit none
  integer, parameter :: nx = 6, ny = 5, nk = 4, dp = c_double
  real(dp), target :: u_stage(nx, ny, nk), wcon(nx + 1, ny, nk), u_pos(nx, ny, nk), utens(nx, ny, nk)
  real(dp), target :: utens_stage(nx, ny, nk), out(nx, ny, nk), saved(nx, ny, nk)
  real(dp), target :: in(nx + 4, ny + 4, nk), padded(nx + 3, ny, nk), coeff(nx, ny, nk), a(nx, ny, nk), b(nx, ny, nk)
  real(c_float), target :: single(nx, ny, nk)
  integer(c_int8_t), allocatable, target :: arena(:)
  type(ff_options) :: o, defaults
  type(ff_program) :: vadv, hdiff, never, gone
  integer(c_size_t) :: bytes, alignment, offset
  integer(c_int) :: status, form
  integer(c_int), target :: allocator_calls = 0
  integer :: i, j, k
  integer(c_int64_t), parameter :: halo2(3) = [-2_c_int64_t, -2_c_int64_t, 0_c_int64_t]
  interface
    ! The descriptor of vadv in tests/aot's ahead-of-time library aot_test_any (generated header).
    function fieldflow_aot_aot_test_any_vadv() bind(c, name="fieldflow_aot_aot_test_any_vadv") result(p)
      import :: c_ptr
      type(c_ptr) :: p
    end function fieldflow_aot_aot_test_any_vadv
  end interface

  do k = 1, nk
    do j = 1, ny
      do i = 1, nx
        u_stage(i, j, k) = 1.0_dp + 0.3_dp * sin(0.5_dp * i + j + 0.2_dp * k)
        u_pos(i, j, k) = 1.0_dp + 0.2_dp * cos(0.4_dp * i * j + k)
        utens(i, j, k) = 0.5_dp + 0.1_dp * i
        utens_stage(i, j, k) = 0.25_dp * j - 0.1_dp * k
        coeff(i, j, k) = 0.02_dp + 0.001_dp * (i + j + k)
      end do
      wcon(:, j, k) = 0.1_dp + 0.01_dp * k
    end do
  end do
  do k = 1, nk
    do j = 1, ny + 4
      do i = 1, nx + 4
        in(i, j, k) = sin(0.6_dp * i) + cos(0.35_dp * j) + 0.1_dp * k
      end do
    end do
  end do
  out = -1.0_dp

  ! ---- ff_options' default initialisation equals ff_options_init ------------------------------------
  call ff_check(ff_options_init(o))
  call expect(o%backend == defaults%backend .and. o%layout == defaults%layout .and. &
      o%memory_mode == defaults%memory_mode .and. o%num_threads == defaults%num_threads .and. &
      o%parallel_threshold == defaults%parallel_threshold, "ff_options defaults match ff_options_init")

  ! ---- a workspace smaller than queried ------------------------------------------------------------
  call ff_check(ff_options_init(o))
  o%layout = FF_LAYOUT_HORIZONTAL_FASTEST
  o%memory_mode = FF_MEMORY_EXTERNAL
  call ff_check(ff_program_create(vadv, "vadv", o))
  call ff_check(ff_set_field(vadv, "u_stage", u_stage))
  call ff_check(ff_set_field(vadv, "wcon", wcon))
  call ff_check(ff_set_field(vadv, "u_pos", u_pos))
  call ff_check(ff_set_field(vadv, "utens", utens))
  call ff_check(ff_set_field(vadv, "utens_stage", utens_stage))
  call ff_check(ff_set_field(vadv, "out", out))
  call ff_check(ff_set_real(vadv, "dtr_stage", 0.15_dp))
  call ff_check(ff_set_int(vadv, "nx", nx))
  call ff_check(ff_set_int(vadv, "ny", ny))
  call ff_check(ff_set_int(vadv, "nk", nk))
  call ff_check(ff_workspace_for_arguments(vadv, FF_DEVICE_CPU, bytes, alignment))
  call expect(bytes > 0, "vadv needs transient memory")
  allocate(arena(bytes + alignment))
  offset = modulo(-transfer(c_loc(arena(1)), 0_c_intptr_t), int(alignment, c_intptr_t))
  call ff_check(ff_set_workspace(vadv, FF_DEVICE_CPU, c_loc(arena(offset + 1)), bytes - 8))
  saved = out
  status = ff_program_run(vadv)
  call expect_status(status, FF_ERROR_WORKSPACE, "too small")
  call expect(all(out == saved), "a rejected run left out unchanged")
  call ff_check(ff_set_workspace(vadv, FF_DEVICE_CPU, c_loc(arena(offset + 1)), bytes))
  call ff_check(ff_program_run(vadv), "vadv with the queried workspace")
  call expect(any(out /= saved), "the run wrote out")

  ! ---- a Fortran allocator (bind(c), passed with c_funloc) that has no memory to give ----------
  call ff_check(ff_options_init(o))
  o%layout = FF_LAYOUT_HORIZONTAL_FASTEST
  o%allocate = c_funloc(no_memory)
  o%allocator_user_data = c_loc(allocator_calls)
  call ff_check(ff_program_create(hdiff, "vadv", o))  ! an allocator and no mode: external memory
  call ff_check(ff_set_field(hdiff, "u_stage", u_stage))
  call ff_check(ff_set_field(hdiff, "wcon", wcon))
  call ff_check(ff_set_field(hdiff, "u_pos", u_pos))
  call ff_check(ff_set_field(hdiff, "utens", utens))
  call ff_check(ff_set_field(hdiff, "utens_stage", utens_stage))
  call ff_check(ff_set_field(hdiff, "out", out))
  call ff_check(ff_set_real(hdiff, "dtr_stage", 0.15_dp))
  call ff_check(ff_set_int(hdiff, "nx", nx))
  call ff_check(ff_set_int(hdiff, "ny", ny))
  call ff_check(ff_set_int(hdiff, "nk", nk))
  saved = out
  call expect_status(ff_program_run(hdiff), FF_ERROR_WORKSPACE, "returned NULL")
  call expect(allocator_calls == 1, "the allocator was asked once")
  call expect(all(out == saved), "a rejected run left out unchanged")
  call ff_check(ff_program_destroy(hdiff))

  ! ---- destroyed and never-created handles -----------------------------------------------------
  gone = vadv
  call ff_check(ff_program_destroy(vadv))
  call expect_status(ff_program_run(gone), FF_ERROR_INVALID_HANDLE, "destroyed")
  call expect_status(ff_program_run(vadv), FF_ERROR_INVALID_HANDLE, "NULL")
  call expect_status(ff_program_run(never), FF_ERROR_INVALID_HANDLE, "NULL")
  call expect_status(ff_set_int(gone, "nx", nx), FF_ERROR_INVALID_HANDLE, "destroyed")

  ! ---- stride order and kinds ------------------------------------------------------------------------
  call ff_check(ff_options_init(o))  ! vertical_fastest: K must be unit-stride, Fortran arrays have I
  call ff_check(ff_program_create(hdiff, "hdiff", o))
  call ff_check(ff_set_field(hdiff, "in", in, origin=halo2))
  call ff_check(ff_set_field(hdiff, "coeff", coeff))
  call ff_check(ff_set_field(hdiff, "out", a))
  call ff_check(ff_set_int(hdiff, "nx", nx))
  call ff_check(ff_set_int(hdiff, "ny", ny))
  call ff_check(ff_set_int(hdiff, "nk", nk))
  call expect_status(ff_program_run(hdiff), FF_ERROR_LAYOUT, "vertical_fastest")
  call expect_status(ff_set_field(hdiff, "coeff", single), FF_ERROR_DTYPE, "float32")
  call expect_status(ff_set_field(hdiff, "coeff", in(:, :, 1)), FF_ERROR_ARGUMENT, "rank")
  call ff_check(ff_program_destroy(hdiff))

  ! ---- a padded section is a view with the section's strides -----------------------------------
  o%layout = FF_LAYOUT_HORIZONTAL_FASTEST
  call ff_check(ff_program_create(hdiff, "hdiff", o))
  call ff_check(ff_set_field(hdiff, "in", in, origin=halo2))
  call ff_check(ff_set_field(hdiff, "coeff", coeff))
  call ff_check(ff_set_field(hdiff, "out", a))
  call ff_check(ff_set_int(hdiff, "nx", nx))
  call ff_check(ff_set_int(hdiff, "ny", ny))
  call ff_check(ff_set_int(hdiff, "nk", nk))
  call ff_check(ff_program_run(hdiff), "hdiff on contiguous arrays")
  padded = huge(1.0_dp)
  padded(2:nx + 1, :, :) = coeff
  call ff_check(ff_set_field(hdiff, "coeff", padded(2:nx + 1, :, :)), "a section as coeff")
  call ff_check(ff_set_field(hdiff, "out", b))
  call ff_check(ff_program_run(hdiff), "hdiff on a section")
  call expect(all(a == b), "the section gives the contiguous array's results")
  ! ---- a cuda stream is for FF_BACKEND_CUDA handles only (c_null_ptr: the handle's own) -----------
  call expect_status(ff_set_cuda_stream(hdiff, c_loc(allocator_calls)), FF_ERROR_OPTION, "FF_BACKEND_CUDA")
  call ff_check(ff_set_cuda_stream(hdiff, c_null_ptr), "no stream")
  ! ---- the loop form (FF_LOOP_FORM_*): hdiff's module has one form, so it reports scalar; a pinned
  ! form is reported and runs the same bits; a value outside FF_LOOP_FORM_* changes nothing ------
  call ff_check(ff_get_loop_form(hdiff, form), "get the loop form")
  call expect(form == FF_LOOP_FORM_SCALAR, "a module with one loop form reports scalar")
  call ff_check(ff_set_loop_form(hdiff, FF_LOOP_FORM_VECTOR), "pin the vector form")
  call ff_check(ff_get_loop_form(hdiff, form))
  call expect(form == FF_LOOP_FORM_VECTOR, "the pinned form is reported")
  b = huge(1.0_dp)
  call ff_check(ff_program_run(hdiff), "hdiff in a pinned form")
  call expect(all(a == b), "a pinned form gives the same results")
  call expect_status(ff_set_loop_form(hdiff, 3_c_int), FF_ERROR_OPTION, "FF_LOOP_FORM_TUNED (0)")
  call ff_check(ff_get_loop_form(hdiff, form))
  call expect(form == FF_LOOP_FORM_VECTOR, "a rejected form changes nothing")
  call ff_check(ff_program_destroy(hdiff))
  ! ---- an ahead-of-time program (tests/aot's Layout::any library) equals the JIT bit for bit ---
  o = defaults
  o%layout = FF_LAYOUT_VERTICAL_FASTEST
  call expect_status(ff_program_create_aot(hdiff, fieldflow_aot_aot_test_any_vadv(), o), FF_ERROR_OPTION, &
      "generated for layout any")
  o%layout = FF_LAYOUT_DEFAULT  ! the library's layout, any
  call ff_check(ff_program_create_aot(hdiff, fieldflow_aot_aot_test_any_vadv(), o), "create_aot")
  call ff_check(ff_set_field(hdiff, "u_stage", u_stage))
  call ff_check(ff_set_field(hdiff, "wcon", wcon))
  call ff_check(ff_set_field(hdiff, "u_pos", u_pos))
  call ff_check(ff_set_field(hdiff, "utens", utens))
  call ff_check(ff_set_field(hdiff, "utens_stage", utens_stage))
  call ff_check(ff_set_field(hdiff, "out", a))
  call ff_check(ff_set_real(hdiff, "dtr_stage", 0.15_dp))
  call ff_check(ff_set_int(hdiff, "nx", nx))
  call ff_check(ff_set_int(hdiff, "ny", ny))
  call ff_check(ff_set_int(hdiff, "nk", nk))
  call ff_check(ff_program_run(hdiff), "run the AOT vadv")
  call expect(all(a == out), "the AOT vadv equals the JIT vadv above")
  call ff_check(ff_program_destroy(hdiff))
  write (*, '(a)') "Fortran bad input: every case is a status with a message"

contains

  ! An allocator in Fortran: counts its calls in user_data and returns no memory.
  function no_memory(user_data, device, bytes, alignment, program) bind(c) result(block)
    type(c_ptr), value :: user_data
    integer(c_int), value :: device
    integer(c_size_t), value :: bytes, alignment
    type(c_ptr), value :: program
    type(c_ptr) :: block
    integer(c_int), pointer :: calls
    call c_f_pointer(user_data, calls)
    calls = calls + 1
    if (device /= FF_DEVICE_CPU .or. bytes == 0 .or. alignment /= 256 .or. .not. c_associated(program)) calls = -100
    block = c_null_ptr
  end function no_memory

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (*, '(a, a)') "FAILED: ", what
      error stop 1
    end if
  end subroutine expect

  subroutine expect_status(status, want, word)
    integer(c_int), intent(in) :: status, want
    character(len=*), intent(in) :: word
    character(len=:), allocatable :: message
    message = ff_last_error()
    if (status /= want .or. index(message, word) == 0) then
      write (*, '(a, i0, a, i0, a, a, a, a)') "FAILED: status ", status, " (want ", want, ") message '", message, &
          "' lacks ", word
      error stop 1
    end if
  end subroutine expect_status

end program fortran_bad_input
