module one_workspace
  use, intrinsic :: iso_c_binding
  use fieldflow
  implicit none
contains
  ! Sizes one workspace as the maximum of what `programs` need for the sizes names(i) = values(i),
  ! allocates it in `arena` (aligned inside it) and hands it to every program. The programs were
  ! created with memory_mode = FF_MEMORY_EXTERNAL and run one after another; `arena` must stay
  ! allocated while they run.
  subroutine share_one_workspace(programs, names, values, arena)
    type(ff_program), intent(in) :: programs(:)
    character(len=*), intent(in) :: names(:)
    integer(c_int64_t), intent(in) :: values(:)
    integer(c_int8_t), allocatable, target, intent(inout) :: arena(:)
    integer(c_size_t) :: bytes, alignment, most, strictest, offset
    integer :: p
    most = 0
    strictest = 1
    do p = 1, size(programs)
      call ff_check(ff_workspace_query(programs(p), FF_DEVICE_CPU, names, values, bytes, alignment))
      most = max(most, bytes)
      strictest = max(strictest, alignment)
    end do
    allocate(arena(most + strictest))
    offset = modulo(-transfer(c_loc(arena(1)), 0_c_intptr_t), int(strictest, c_intptr_t))
    do p = 1, size(programs)
      call ff_check(ff_set_workspace(programs(p), FF_DEVICE_CPU, c_loc(arena(offset + 1)), most))
    end do
  end subroutine share_one_workspace
end module one_workspace
