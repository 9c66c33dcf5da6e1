"""The calling convention every target shares: which symbolic ints a kernel receives, in what order."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.function import PrimFunc
from tensorir.functor import collect


def kernel_sym_vars(func: PrimFunc) -> list:
    """Symbolic vars the kernel receives: buffer-shape vars in first-appearance order, then scalar params.

    ``func`` is the signature function (before lowering): lowering keeps the
    same Var objects, so the lowered body refers to these vars."""
    seen: dict[int, E.Var] = {}
    for buf in func.buffer_params:
        for dim in buf.shape + buf.strides + (buf.elem_offset,):
            for v in collect(dim, lambda n: isinstance(n, E.Var)):
                seen.setdefault(id(v), v)
    for v in func.scalar_params:
        seen.setdefault(id(v), v)
    return list(seen.values())
