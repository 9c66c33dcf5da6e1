"""``T.match_buffer`` inside a block: a view of a region of another buffer.

The matched buffer may have fewer dimensions than the region (leading unit
extents are dropped). Its shape, strides and elem_offset may be symbolic:
still-unbound vars are bound to the region's values for the block's
duration, bound ones are checked. Without declared strides any region is
viewed through the source's strides: an element access is an access of the
region (TVM's LowerMatchBuffer rewrites them so, contiguous or not, and so
does ``transform.lower_blocks``); an elem_offset of literal 0 (the Buffer
default) means "not declared" and accepts any offset.
"""
from __future__ import annotations

from .. import expr as E
from .errors import InterpretError
from .evaluator import scalar
from .storage import BufferView


def match_view(ex, match) -> tuple[BufferView, list]:
    """Return (view, binding tokens to undo when the block ends)."""
    target, region = match.buffer, match.source
    source = ex.view(region.buffer)
    mins = [ex.eval_int(r.min) for r in region.region]
    extents = [ex.eval_int(r.extent) for r in region.region]
    name = f"match_buffer {target.name!r} of {region.buffer.name!r}"
    if len(mins) != len(source.shape):
        raise InterpretError(f"{name}: region has {len(mins)} dims, buffer has {len(source.shape)}")
    for dim, (lo, ext, size) in enumerate(zip(mins, extents, source.shape)):
        if lo < 0 or ext < 0 or lo + ext > size:
            raise InterpretError(f"{name}: region [{lo}, {lo + ext}) of dim {dim} exceeds extent {size}")
    dropped = len(extents) - target.ndim
    if dropped < 0 or any(e != 1 for e in extents[:dropped]):
        raise InterpretError(f"{name}: cannot view a region of shape {extents} "
                             f"as a {target.ndim}-dimensional buffer")
    shape = extents[dropped:]
    strides = list(source.strides[dropped:])
    offset = source.offset + sum(lo * st for lo, st in zip(mins, source.strides))
    tokens: list = []

    def match(expr, value: int, what: str):
        if isinstance(expr, E.Var) and expr not in ex.vars:
            tokens.append(ex.bind(expr, scalar(expr.dtype, value)))
        elif ex.eval_int(expr) != value:
            raise InterpretError(f"{name}: {what} is {ex.eval_int(expr)} but the region has {value}")

    for dim, (expr, value) in enumerate(zip(target.shape, shape)):
        match(expr, value, f"extent of dim {dim}")
    if target.strides:
        for dim, (expr, value) in enumerate(zip(target.strides, strides)):
            match(expr, value, f"stride of dim {dim}")
    if not E.is_const_int(target.elem_offset, 0):  # a literal 0 means "not declared"
        match(target.elem_offset, offset, "elem_offset")
    return BufferView(target.name, source.data, shape, strides, offset), tokens

