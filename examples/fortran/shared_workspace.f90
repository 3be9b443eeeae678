! A model-like time loop in Fortran over fieldflow's C API (module `fieldflow`): three built-in
! programs — a Cartesian diffusion (hdiff), a vertical implicit solver (vadv) and a mesh reduction
! (fvm_nabla) — run every step on the driver's OWN column-major arrays (views, no copies). The
! driver asks each program how much transient memory it needs, allocates ONE workspace of the
! maximum and hands it to all three (external memory mode): the host controls every byte.
!
! Every step, every output is compared bit for bit with the same programs run by the reference
! backend on a second copy of the state. Built and run by the test suite (tests/capi).
program shared_workspace
  use, intrinsic :: iso_c_binding
  use fieldflow
  implicit none

  integer, parameter :: nx = 12, ny = 10, nk = 8, mx = 6, my = 5, steps = 4
  integer, parameter :: dp = c_double
  real(dp), parameter :: dtr_stage = 3.0_dp / 20.0_dp
  ! Cartesian state and inputs: (I, J, K), I unit-stride, so layout horizontal_fastest. u has a
  ! halo of 2 around the domain: fieldflow index (i, j, k) is u(i + 3, j + 3, k + 1).
  real(dp), target :: u_c(nx + 4, ny + 4, nk), u_r(nx + 4, ny + 4, nk), coeff(nx, ny, nk)
  real(dp), target :: hd_c(nx, ny, nk), hd_r(nx, ny, nk), adv_c(nx, ny, nk), adv_r(nx, ny, nk)
  real(dp), target :: wcon(nx + 1, ny, nk), utens(nx, ny, nk), utens_stage(nx, ny, nk)
  ! Mesh state and inputs: (Vertex, K) / (Edge) / (Vertex, V2EDim), the location unit-stride.
  real(dp), allocatable, target :: pp_c(:, :), pp_r(:, :), px_c(:, :), py_c(:, :), px_r(:, :), py_r(:, :)
  real(dp), allocatable, target :: s_x(:), s_y(:), sign(:, :), vol(:)
  integer(c_int32_t), allocatable, target :: e2v(:, :), v2e(:, :)
  integer(c_int64_t) :: nv, ne, nc
  ! Programs: CPU backend in external memory mode, and the reference backend for checking.
  type(ff_program) :: hdiff_c, vadv_c, nabla_c, hdiff_r, vadv_r, nabla_r
  type(ff_options) :: cpu, ref
  ! The one shared workspace.
  integer(c_int8_t), allocatable, target :: arena(:)
  integer(c_size_t) :: need(3), align(3), bytes, alignment, offset
  type(c_ptr) :: workspace
  type(ff_memory_stats) :: stats
  integer :: i, j, k, step, p
  integer(c_int64_t), parameter :: halo2(3) = [-2_c_int64_t, -2_c_int64_t, 0_c_int64_t]

  ! ---- the model's data ------------------------------------------------------------------------
  do k = 1, nk
    do j = 1, ny + 4
      do i = 1, nx + 4
        u_c(i, j, k) = 1.0_dp + 0.5_dp * sin(0.7_dp * i) * cos(0.45_dp * j) + 0.1_dp * k
      end do
    end do
    do j = 1, ny
      do i = 1, nx
        coeff(i, j, k) = 0.025_dp + 0.01_dp * cos(0.3_dp * (i + 2 * j + k))
        utens(i, j, k) = 0.5_dp + 0.25_dp * sin(0.2_dp * i * k)
        utens_stage(i, j, k) = 0.5_dp + 0.25_dp * cos(0.3_dp * j + k)
      end do
      do i = 1, nx + 1
        wcon(i, j, k) = 0.1_dp + 0.05_dp * sin(0.5_dp * (i + j + k))
      end do
    end do
  end do
  u_r = u_c

  call ff_check(ff_mesh_sizes("torus", mx, my, nv, ne, nc), "ff_mesh_sizes")
  allocate(pp_c(nv, nk), pp_r(nv, nk), px_c(nv, nk), py_c(nv, nk), px_r(nv, nk), py_r(nv, nk))
  allocate(s_x(ne), s_y(ne), sign(nv, 6), vol(nv), e2v(ne, 2), v2e(nv, 6))
  call ff_check(ff_mesh_table("torus", mx, my, "E2V", e2v), "E2V")
  call ff_check(ff_mesh_table("torus", mx, my, "V2E", v2e), "V2E")
  do k = 1, nk
    do i = 1, int(nv)
      pp_c(i, k) = 1.0_dp + 0.5_dp * sin(0.9_dp * i + 0.2_dp * k)
    end do
  end do
  pp_r = pp_c
  do i = 1, int(ne)
    s_x(i) = cos(0.4_dp * i)
    s_y(i) = -sin(0.4_dp * i)
  end do
  do i = 1, int(nv)
    vol(i) = 1.0_dp + 0.1_dp * cos(1.0_dp * i)
    do j = 1, 6  ! +1 where the edge leaves the vertex (it is E2V's first vertex), -1 where it arrives
      sign(i, j) = merge(1.0_dp, -1.0_dp, e2v(v2e(i, j) + 1, 1) == i - 1)
    end do
  end do

  ! ---- programs --------------------------------------------------------------------------------
  call ff_check(ff_options_init(cpu))
  cpu%layout = FF_LAYOUT_HORIZONTAL_FASTEST
  cpu%memory_mode = FF_MEMORY_EXTERNAL
  ref = cpu
  ref%backend = FF_BACKEND_REFERENCE
  ref%memory_mode = FF_MEMORY_DEFAULT
  call ff_check(ff_program_create(hdiff_c, "hdiff", cpu), "create hdiff")
  call ff_check(ff_program_create(vadv_c, "vadv", cpu), "create vadv")
  call ff_check(ff_program_create(nabla_c, "fvm_nabla", cpu), "create fvm_nabla")
  call ff_check(ff_program_create(hdiff_r, "hdiff", ref), "create hdiff (reference)")
  call ff_check(ff_program_create(vadv_r, "vadv", ref), "create vadv (reference)")
  call ff_check(ff_program_create(nabla_r, "fvm_nabla", ref), "create fvm_nabla (reference)")
  call check_hdiff_parameters(hdiff_c)

  ! ---- one workspace of the maximum requirement, shared by the three programs ------------------
  call ff_check(ff_workspace_query(hdiff_c, FF_DEVICE_CPU, [character(len=2) :: "nx", "ny", "nk"], &
      [int(nx, c_int64_t), int(ny, c_int64_t), int(nk, c_int64_t)], need(1), align(1)), "query hdiff")
  call ff_check(ff_workspace_query(vadv_c, FF_DEVICE_CPU, [character(len=2) :: "nx", "ny", "nk"], &
      [int(nx, c_int64_t), int(ny, c_int64_t), int(nk, c_int64_t)], need(2), align(2)), "query vadv")
  call ff_check(ff_workspace_query(nabla_c, FF_DEVICE_CPU, &
      [character(len=11) :: "n_vertices", "nk", "len(Vertex)", "len(Edge)"], [nv, int(nk, c_int64_t), nv, ne], &
      need(3), align(3)), "query fvm_nabla")
  bytes = maxval(need)
  alignment = maxval(align)
  ! Fortran gives no alignment guarantee: over-allocate and start at the first aligned byte.
  allocate(arena(bytes + alignment))
  offset = modulo(-transfer(c_loc(arena(1)), 0_c_intptr_t), int(alignment, c_intptr_t))
  workspace = c_loc(arena(offset + 1))
  write (*, '(a, 3(i0, a), i0, a)') "workspace: hdiff ", need(1), " B, vadv ", need(2), " B, fvm_nabla ", need(3), &
      " B -> one buffer of ", bytes, " B"
  call ff_check(ff_set_workspace(hdiff_c, FF_DEVICE_CPU, workspace, bytes), "workspace hdiff")
  call ff_check(ff_set_workspace(vadv_c, FF_DEVICE_CPU, workspace, bytes), "workspace vadv")
  call ff_check(ff_set_workspace(nabla_c, FF_DEVICE_CPU, workspace, bytes), "workspace fvm_nabla")

  ! ---- arguments: views over the arrays above, set once --------------------------------------
  call set_hdiff(hdiff_c, u_c, hd_c)
  call set_hdiff(hdiff_r, u_r, hd_r)
  call set_vadv(vadv_c, hd_c, adv_c)
  call set_vadv(vadv_r, hd_r, adv_r)
  call set_nabla(nabla_c, pp_c, px_c, py_c)
  call set_nabla(nabla_r, pp_r, px_r, py_r)

  ! Outputs start different in the two copies: a point either backend leaves unwritten shows up.
  hd_c = -1
  hd_r = -2
  adv_c = -1
  adv_r = -2
  px_c = -1
  px_r = -2
  py_c = -1
  py_r = -2

  ! ---- the time loop -----------------------------------------------------------------------------
  do step = 1, steps
    call ff_check(ff_program_run(hdiff_c), "run hdiff")
    call ff_check(ff_program_run(hdiff_r), "run hdiff (reference)")
    call ff_check(ff_program_run(vadv_c), "run vadv")
    call ff_check(ff_program_run(vadv_r), "run vadv (reference)")
    call ff_check(ff_program_run(nabla_c), "run fvm_nabla")
    call ff_check(ff_program_run(nabla_r), "run fvm_nabla (reference)")
    call expect_identical("hdiff out", pack(hd_c, .true.), pack(hd_r, .true.), step)
    call expect_identical("vadv out", pack(adv_c, .true.), pack(adv_r, .true.), step)
    call expect_identical("fvm_nabla pnabla_x", pack(px_c, .true.), pack(px_r, .true.), step)
    call expect_identical("fvm_nabla pnabla_y", pack(py_c, .true.), pack(py_r, .true.), step)
    ! The model updates its state in place (the programs keep viewing the same arrays).
    call advance(u_c, hd_c, adv_c)
    call advance(u_r, hd_r, adv_r)
    pp_c = pp_c - 0.05_dp * (px_c + py_c)
    pp_r = pp_r - 0.05_dp * (px_r + py_r)
  end do
  call expect_identical("state u", pack(u_c, .true.), pack(u_r, .true.), steps)
  call expect_identical("state pp", pack(pp_c, .true.), pack(pp_r, .true.), steps)

  ! The shared buffer was installed once per program; nothing was allocated for transients.
  do p = 1, 3
    select case (p)
    case (1)
      call ff_check(ff_get_memory_stats(hdiff_c, stats))
    case (2)
      call ff_check(ff_get_memory_stats(vadv_c, stats))
    case (3)
      call ff_check(ff_get_memory_stats(nabla_c, stats))
    end select
    if (stats%calls /= steps .or. stats%allocator_calls /= 0 .or. stats%system_allocations /= 0 .or. &
        stats%workspace_installs /= merge(1, 0, need(p) > 0)) then
      write (*, '(a, i0, a, 4(i0, 1x))') "program ", p, ": unexpected memory statistics ", stats%calls, &
          stats%allocator_calls, stats%system_allocations, stats%workspace_installs
      error stop 1
    end if
  end do

  call ff_check(ff_program_destroy(hdiff_c))
  call ff_check(ff_program_destroy(vadv_c))
  call ff_check(ff_program_destroy(nabla_c))
  call ff_check(ff_program_destroy(hdiff_r))
  call ff_check(ff_program_destroy(vadv_r))
  call ff_check(ff_program_destroy(nabla_r))
  ! The programs are gone, so the arrays they viewed and the workspace may go too.
  deallocate(pp_c, pp_r, px_c, py_c, px_r, py_r, s_x, s_y, sign, vol, e2v, v2e, arena)
  write (*, '(i0, a)') steps, " steps: every output of hdiff, vadv and fvm_nabla equals the reference backend's bit for bit"

contains

  subroutine set_hdiff(prog, u, out)
    type(ff_program), intent(in) :: prog
    real(dp), target, intent(inout) :: u(:, :, :), out(:, :, :)
    call ff_check(ff_set_field(prog, "in", u, origin=halo2), "hdiff in")
    call ff_check(ff_set_field(prog, "coeff", coeff), "hdiff coeff")
    call ff_check(ff_set_field(prog, "out", out), "hdiff out")
    call ff_check(ff_set_int(prog, "nx", nx))
    call ff_check(ff_set_int(prog, "ny", ny))
    call ff_check(ff_set_int(prog, "nk", nk))
  end subroutine set_hdiff

  subroutine set_vadv(prog, state, out)
    type(ff_program), intent(in) :: prog
    real(dp), target, intent(inout) :: state(:, :, :), out(:, :, :)
    call ff_check(ff_set_field(prog, "u_stage", state), "vadv u_stage")
    call ff_check(ff_set_field(prog, "u_pos", state), "vadv u_pos")
    call ff_check(ff_set_field(prog, "wcon", wcon), "vadv wcon")
    call ff_check(ff_set_field(prog, "utens", utens), "vadv utens")
    call ff_check(ff_set_field(prog, "utens_stage", utens_stage), "vadv utens_stage")
    call ff_check(ff_set_field(prog, "out", out), "vadv out")
    call ff_check(ff_set_real(prog, "dtr_stage", dtr_stage))
    call ff_check(ff_set_int(prog, "nx", nx))
    call ff_check(ff_set_int(prog, "ny", ny))
    call ff_check(ff_set_int(prog, "nk", nk))
  end subroutine set_vadv

  subroutine set_nabla(prog, pp, px, py)
    type(ff_program), intent(in) :: prog
    real(dp), target, intent(inout) :: pp(:, :), px(:, :), py(:, :)
    call ff_check(ff_set_field(prog, "pp", pp), "fvm_nabla pp")
    call ff_check(ff_set_field(prog, "S_x", s_x), "fvm_nabla S_x")
    call ff_check(ff_set_field(prog, "S_y", s_y), "fvm_nabla S_y")
    call ff_check(ff_set_field(prog, "sign", sign), "fvm_nabla sign")
    call ff_check(ff_set_field(prog, "vol", vol), "fvm_nabla vol")
    call ff_check(ff_set_field(prog, "pnabla_x", px), "fvm_nabla pnabla_x")
    call ff_check(ff_set_field(prog, "pnabla_y", py), "fvm_nabla pnabla_y")
    call ff_check(ff_set_table(prog, "E2V", e2v, nv), "fvm_nabla E2V")
    call ff_check(ff_set_table(prog, "V2E", v2e, ne), "fvm_nabla V2E")
    call ff_check(ff_set_int(prog, "n_vertices", nv))
    call ff_check(ff_set_int(prog, "nk", nk))
  end subroutine set_nabla

  ! u's interior becomes the diffused state plus a vertical tendency; the halo wraps around.
  subroutine advance(u, hd, adv)
    real(dp), intent(inout) :: u(:, :, :)
    real(dp), intent(in) :: hd(:, :, :), adv(:, :, :)
    u(3:nx + 2, 3:ny + 2, :) = hd + 0.1_dp * adv
    u(1:2, :, :) = u(nx + 1:nx + 2, :, :)
    u(nx + 3:nx + 4, :, :) = u(3:4, :, :)
    u(:, 1:2, :) = u(:, ny + 1:ny + 2, :)
    u(:, ny + 3:ny + 4, :) = u(:, 3:4, :)
  end subroutine advance

  subroutine expect_identical(what, a, b, step)
    character(len=*), intent(in) :: what
    real(dp), intent(in) :: a(:), b(:)
    integer, intent(in) :: step
    integer(c_int64_t) :: bits_a(size(a)), bits_b(size(b))
    bits_a = transfer(a, bits_a)
    bits_b = transfer(b, bits_b)
    if (any(bits_a /= bits_b)) then
      write (*, '(a, a, i0, a, i0, a)') what, " differs from the reference at step ", step, " (", &
          count(bits_a /= bits_b), " elements)"
      error stop 1
    end if
  end subroutine expect_identical

  ! The driver's arrays follow the program's parameters: checked through introspection.
  subroutine check_hdiff_parameters(prog)
    type(ff_program), intent(in) :: prog
    integer :: n, idx, kind, dtype, rank, dim_kind
    logical :: is_output
    character(len=:), allocatable :: name, dim
    call ff_check(ff_param_count(prog, n))
    do idx = 1, n
      call ff_check(ff_param_info(prog, idx, name, kind, dtype, rank, is_output))
      if (kind /= FF_PARAM_FIELD) cycle
      call ff_check(ff_param_dim(prog, idx, 1, dim, dim_kind))
      if (rank /= 3 .or. dtype /= FF_DTYPE_FLOAT64 .or. dim /= "I" .or. dim_kind /= FF_DIM_HORIZONTAL .or. &
          (is_output .neqv. (name == "out"))) then
        write (*, '(a, a)') "hdiff parameter does not match the driver's arrays: ", name
        error stop 1
      end if
    end do
  end subroutine check_hdiff_parameters

end program shared_workspace
