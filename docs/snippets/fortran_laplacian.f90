module laplacian_from_fortran
  use, intrinsic :: iso_c_binding
  use fieldflow
  implicit none
contains
  ! The built-in five-point Laplacian on Fortran arrays: inp(nx+2, ny+2, nk) holds a halo of one
  ! point around the domain, out(nx, ny, nk). I is unit-stride: layout horizontal_fastest.
  subroutine laplacian(inp, out)
    real(c_double), target, intent(in) :: inp(:, :, :)
    real(c_double), target, intent(inout) :: out(:, :, :)
    type(ff_options) :: options
    type(ff_program) :: program
    call ff_check(ff_options_init(options))
    options%layout = FF_LAYOUT_HORIZONTAL_FASTEST
    call ff_check(ff_program_create(program, "laplacian", options))
    ! inp(1, 1, 1) is fieldflow's point (-1, -1, 0); out(1, 1, 1) is (0, 0, 0).
    call ff_check(ff_set_field(program, "in", inp, origin=[-1_c_int64_t, -1_c_int64_t, 0_c_int64_t]))
    call ff_check(ff_set_field(program, "out", out))
    call ff_check(ff_set_int(program, "nx", size(out, 1)))
    call ff_check(ff_set_int(program, "ny", size(out, 2)))
    call ff_check(ff_set_int(program, "nk", size(out, 3)))
    call ff_check(ff_program_run(program))
    call ff_check(ff_program_destroy(program))
  end subroutine laplacian
end module laplacian_from_fortran
