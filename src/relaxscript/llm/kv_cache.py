"""The KV cache of one attention layer: a (capacity, kv_heads, head_dim) float32 tensor
that the model updates in place with ``R.call_tir_inplace``.

``append(cache, new, t)`` writes the ``n`` new rows at positions ``t .. t+n-1``
and returns the updated cache (the same storage); ``view(cache, t + n)`` is
the filled prefix the attention reads. The write kernel's rows are guarded
(``t + i < capacity``) so a call past the end never writes outside the
buffer; callers check the bound first and report it (``CacheOverflowError``).
"""
from __future__ import annotations

from tensorir.script.parser import from_source as prim_func_from_source

from .. import op as R
from ..nn import builder
from ..struct_info import TensorStructInfo


class CacheOverflowError(ValueError):
    """A prefill or decode would write past the KV cache's capacity."""


def write_kernel(capacity: int, kv_heads: int, head_dim: int):
    """The prim_func writing ``new`` (n, kv_heads, head_dim) into rows ``t ..`` of ``cache``."""
    return prim_func_from_source(f'''
@T.prim_func
def kv_cache_write(cache: T.Buffer(({capacity}, {kv_heads}, {head_dim}), "float32"),
                   new: T.Buffer(("n", {kv_heads}, {head_dim}), "float32"), t: T.int64):
    n = T.int64()
    for i, h, j in T.grid(n, {kv_heads}, {head_dim}):
        with T.block("write"):
            vi, vh, vj = T.axis.remap("SSS", [i, h, j])
            T.where(t + i < {capacity})
            cache[t + vi, vh, vj] = new[vi, vh, vj]
''', "<kv_cache_write>")


def append(cache, new, t):
    """``cache`` with ``new`` written at rows ``t ..`` (in place; the result is the same storage)."""
    sinfo = cache.struct_info
    capacity, kv_heads, head_dim = (d.value for d in sinfo.shape)   # IntImm dims
    bb = builder()
    gvar = bb.add_func(write_kernel(capacity, kv_heads, head_dim), "kv_cache_write")
    return R.call_tir_inplace(gvar, (cache, new), [0], TensorStructInfo(sinfo.shape, sinfo.dtype),
                              tir_vars=[t])


def view(cache, length):
    """The first ``length`` rows of the cache."""
    return R.strided_slice(cache, [0], [0], [length])
