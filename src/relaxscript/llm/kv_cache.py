"""The KV cache of one attention layer: float32 tensors the model updates in place with
``R.call_tir_inplace``, laid out so that attention reads them in place.

Keys are stored transposed, ``(kv_heads, head_dim, capacity)``, and values as
``(kv_heads, capacity, head_dim)``: the used prefix of either is a prefix slice
of its last-but-one or last axis, which the fused attention kernel reads
without a copy (its score loop runs along positions, its value loop along
head_dim, both unit-stride). ``append_keys`` / ``append_values`` write the
``n`` new rows at positions ``t .. t+n-1`` and return the updated cache (the
same storage); ``key_view`` / ``value_view`` are the filled prefix. The write
kernels guard their rows (``t + i < capacity``) so a call past the end never
writes outside the buffer; callers check the bound first and report it
(``CacheOverflowError``).
"""
from __future__ import annotations

from tensorir.script.parser import from_source as prim_func_from_source

from .. import op as R
from ..nn import builder
from ..struct_info import TensorStructInfo


class CacheOverflowError(ValueError):
    """A prefill or decode would write past the KV cache's capacity."""


def key_shape(capacity: int, kv_heads: int, head_dim: int) -> tuple:
    return (kv_heads, head_dim, capacity)


def value_shape(capacity: int, kv_heads: int, head_dim: int) -> tuple:
    return (kv_heads, capacity, head_dim)


def write_kernel(capacity: int, kv_heads: int, head_dim: int, keys: bool):
    """The prim_func writing ``new`` (n, kv_heads, head_dim) into positions ``t ..`` of a
    key cache (transposed) or a value cache."""
    shape = (key_shape if keys else value_shape)(capacity, kv_heads, head_dim)
    target = "cache[vh, vj, t + vi]" if keys else "cache[vh, t + vi, vj]"
    return prim_func_from_source(f'''
@T.prim_func
def kv_cache_write(cache: T.Buffer({shape}, "float32"),
                   new: T.Buffer(("n", {kv_heads}, {head_dim}), "float32"), t: T.int64):
    n = T.int64()
    for h, i, j in T.grid({kv_heads}, n, {head_dim}):
        with T.block("write"):
            vh, vi, vj = T.axis.remap("SSS", [h, i, j])
            T.where(t + i < {capacity})
            {target} = new[vi, vh, vj]
''', "<kv_cache_write>")


def _append(cache, new, t, keys: bool):
    sinfo = cache.struct_info
    dims = [d.value for d in sinfo.shape]   # IntImm dims
    capacity, kv_heads, head_dim = (dims[2], dims[0], dims[1]) if keys else (dims[1], dims[0], dims[2])
    bb = builder()
    name = "kv_cache_write_keys" if keys else "kv_cache_write_values"
    gvar = bb.add_func(write_kernel(capacity, kv_heads, head_dim, keys), name)
    return R.call_tir_inplace(gvar, (cache, new), [0], TensorStructInfo(sinfo.shape, sinfo.dtype),
                              tir_vars=[t])


def append_keys(cache, new, t):
    """The key cache with ``new`` (n, kv_heads, head_dim) written at positions ``t ..`` (in place)."""
    return _append(cache, new, t, keys=True)


def append_values(cache, new, t):
    """The value cache with ``new`` written at positions ``t ..`` (in place)."""
    return _append(cache, new, t, keys=False)


def key_view(cache, length):
    """The first ``length`` positions of the key cache: ``(kv_heads, head_dim, length)``."""
    return R.strided_slice(cache, [2], [0], [length])


def value_view(cache, length):
    """The first ``length`` positions of the value cache: ``(kv_heads, length, head_dim)``."""
    return R.strided_slice(cache, [1], [0], [length])
