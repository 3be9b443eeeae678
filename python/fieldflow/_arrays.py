"""Arrays for fieldflow programs: aligned numpy arrays in a program's layout, optionally with an
origin (the index of their first element, e.g. -2 for a halo of two)."""

from __future__ import annotations

import numpy as np

from . import _core

# 64 bytes would do for fields (vector loads); 256 makes every array a valid workspace too.
_ALIGNMENT = 256


class FieldArray(np.ndarray):
    """A numpy array that knows the index of its first element along each dimension."""

    origin = None

    def __array_finalize__(self, obj):
        # Slices and arithmetic results are ordinary arrays starting at index 0.
        self.origin = None

    @property
    def __fieldflow_origin__(self):
        return self.origin


def _order(layout, ndim):
    if isinstance(layout, str):
        layout = _core.Layout.__members__[layout]
    elif layout is not None and not isinstance(layout, _core.Layout):
        layout = layout.layout  # a CompiledProgram: its layout
    if layout in (None, _core.Layout.vertical_fastest, _core.Layout.any) or ndim <= 1:
        return "C"
    return "F"


def empty(shape, dtype=np.float64, *, layout=None, origin=None):
    """An uninitialised array, 256-byte aligned (a cache line and a workspace's alignment), in the stride order of ``layout`` (a Layout, its
    name, or a compiled program): C order for vertical_fastest (the default; dimensions in the
    field type's order, the vertical last), Fortran order for horizontal_fastest."""
    shape = (shape,) if np.isscalar(shape) else tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    count = int(np.prod(shape, dtype=np.int64))
    raw = np.empty(count * dtype.itemsize + _ALIGNMENT, dtype=np.uint8)
    start = (-raw.ctypes.data) % _ALIGNMENT
    flat = raw[start:start + count * dtype.itemsize].view(dtype)
    array = flat.reshape(shape, order=_order(layout, len(shape))).view(FieldArray)
    if origin is not None:
        if len(origin) != len(shape):
            raise _core.ArgumentError(f"origin has {len(origin)} entries, the shape {len(shape)}")
        array.origin = tuple(int(o) for o in origin)
    return array


def zeros(shape, dtype=np.float64, *, layout=None, origin=None):
    """Like empty(), filled with zeros."""
    array = empty(shape, dtype, layout=layout, origin=origin)
    array[...] = 0
    return array


def as_field(data, dtype=None, *, layout=None, origin=None):
    """``data`` in fieldflow's preferred form: the same memory when it is already aligned and in
    the layout's stride order (and then only an origin is attached), else an aligned copy."""
    source = np.asarray(data, dtype=dtype)
    order = _order(layout, source.ndim)
    aligned = source.ctypes.data % _ALIGNMENT == 0
    in_order = source.flags.c_contiguous if order == "C" else source.flags.f_contiguous
    if aligned and in_order:
        array = source.view(FieldArray)
        array.origin = None if origin is None else tuple(int(o) for o in origin)
        return array
    array = empty(source.shape, source.dtype, layout=layout, origin=origin)
    array[...] = source
    return array
