! Runs the Fortran snippets of docs/host.md (docs/snippets/fortran_*.f90) and checks their results
! against values computed here with plain loops and the reference backend.
program fortran_doc_snippets
  use, intrinsic :: iso_c_binding
  use fieldflow
  use laplacian_from_fortran
  use one_workspace
  implicit none
  integer, parameter :: nx = 7, ny = 6, nk = 3, dp = c_double
  real(dp), target :: inp(nx + 2, ny + 2, nk), out(nx, ny, nk)
  real(dp), target :: u(nx, ny, nk), w(nx + 1, ny, nk), t(nx, ny, nk), out1(nx, ny, nk), out2(nx, ny, nk), want(nx, ny, nk)
  integer(c_int8_t), allocatable, target :: arena(:)
  type(ff_program) :: programs(2), reference
  type(ff_options) :: o
  type(ff_memory_stats) :: stats
  integer :: i, j, k, p

  ! laplacian: inp(i, j, k) is fieldflow's point (i - 2, j - 2, k - 1); (i-2)^2 + j has Laplacian 2.
  do k = 1, nk
    do j = 1, ny + 2
      do i = 1, nx + 2
        inp(i, j, k) = real((i - 2)**2 + j, dp)
      end do
    end do
  end do
  out = 0
  call laplacian(inp, out)
  call expect(all(out == 2.0_dp), "the Laplacian of (i-2)^2 + j is 2")

  ! share_one_workspace: two vadv instances share one buffer; both equal the reference backend.
  do k = 1, nk
    do j = 1, ny
      do i = 1, nx
        u(i, j, k) = 1.0_dp + 0.1_dp * sin(real(i + 2 * j + 3 * k, dp))
        t(i, j, k) = 0.2_dp * cos(real(i * j + k, dp))
      end do
    end do
  end do
  w = 0.05_dp
  call ff_check(ff_options_init(o))
  o%layout = FF_LAYOUT_HORIZONTAL_FASTEST
  o%memory_mode = FF_MEMORY_EXTERNAL
  call ff_check(ff_program_create(programs(1), "vadv", o))
  call ff_check(ff_program_create(programs(2), "vadv", o))
  o%backend = FF_BACKEND_REFERENCE
  o%memory_mode = FF_MEMORY_DEFAULT
  call ff_check(ff_program_create(reference, "vadv", o))
  call set_vadv(programs(1), out1)
  call set_vadv(programs(2), out2)
  call set_vadv(reference, want)
  call share_one_workspace(programs, [character(len=2) :: "nx", "ny", "nk"], &
      [int(nx, c_int64_t), int(ny, c_int64_t), int(nk, c_int64_t)], arena)
  out1 = -1  ! different in every copy: a point left unwritten shows up
  out2 = -2
  want = -3
  call ff_check(ff_program_run(reference))
  do p = 1, 2
    call ff_check(ff_program_run(programs(p)))
    call ff_check(ff_program_run(programs(p)))
    call ff_check(ff_get_memory_stats(programs(p), stats))
    call expect(stats%workspace_installs == 1 .and. stats%allocator_calls == 0, "one install of the shared buffer")
  end do
  call expect(all(out1 == want) .and. all(out2 == want), "vadv on the shared workspace equals the reference")
  call ff_check(ff_program_destroy(programs(1)))
  call ff_check(ff_program_destroy(programs(2)))
  call ff_check(ff_program_destroy(reference))
  write (*, '(a)') "Fortran snippets of docs/host.md: results checked"

contains

  subroutine set_vadv(prog, result)
    type(ff_program), intent(in) :: prog
    real(dp), target, intent(inout) :: result(:, :, :)
    call ff_check(ff_set_field(prog, "u_stage", u))
    call ff_check(ff_set_field(prog, "u_pos", u))
    call ff_check(ff_set_field(prog, "wcon", w))
    call ff_check(ff_set_field(prog, "utens", t))
    call ff_check(ff_set_field(prog, "utens_stage", t))
    call ff_check(ff_set_field(prog, "out", result))
    call ff_check(ff_set_real(prog, "dtr_stage", 0.15_dp))
    call ff_check(ff_set_int(prog, "nx", nx))
    call ff_check(ff_set_int(prog, "ny", ny))
    call ff_check(ff_set_int(prog, "nk", nk))
  end subroutine set_vadv

  subroutine expect(ok, what)
    logical, intent(in) :: ok
    character(len=*), intent(in) :: what
    if (.not. ok) then
      write (*, '(a, a)') "FAILED: ", what
      error stop 1
    end if
  end subroutine expect

end program fortran_doc_snippets
