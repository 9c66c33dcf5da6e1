"""The KV cache of one attention layer: float16, float32 or int8 tensors the model updates in place
with ``R.call_tir_inplace``, laid out so that attention reads them in place.

The "q8" option (int8 tensors) stores each new (position, kv head) row of keys (after rotation)
and of values as 8-bit codes ``rint(x * 127 / absmax)`` with one float32 scale
``absmax / 127`` (``quantize_rows_numpy``), the scales in two more tensors per layer
(``key_scale_shape`` / ``value_scale_shape``: a head's scales of consecutive positions are
contiguous); readers take ``dequantized(view, scale_view)`` = ``astype(view) * scales``, which
FuseAttention reads in place (codes and scales: 68 bytes per 64 values against float16's 128).

The cache dtype (``CACHE_DTYPES``: "f16" or "f32") is a graph-level dtype: the cache
parameters are ``R.Tensor(..., "float16")``, the write kernels round the new keys and values
to it (``T.cast``: round to nearest even, as NumPy's ``astype``), and readers widen the used
prefix with ``R.astype(view, "float32")``, which FuseAttention folds into the kernel's loads
(the cache is read in place as float16, half the bytes of a decode step's attention).

Keys are stored transposed, ``(kv_heads, head_dim, capacity)``, and values as
``(kv_heads, capacity, head_dim)``: the used prefix of either is a prefix slice
of its last-but-one or last axis, which the fused attention kernel reads
without a copy (its score loop runs along positions, its value loop along
head_dim, both unit-stride). ``append_keys`` / ``append_values`` write the
``n`` new rows at positions ``t .. t+n-1`` and return the updated cache (the
same storage); ``key_view`` / ``value_view`` are the filled prefix.
``append_rotated`` is the decode step's form: one kernel rotates the new keys,
writes them and the new values into both caches, reading them where the
projection left them (column ranges of one ``(n, width)`` tensor, e.g. the
merged q/k/v projection). A decode step used to spend four kernel calls per
layer on this (key rotation, a value reshape copy, two writes) where each
call's fixed cost was most of its time. The write
kernels guard their rows (``t + i < capacity``) so a call past the end never
writes outside the buffer; callers check the bound first and report it
(``CacheOverflowError``).
"""
from __future__ import annotations

import functools

import numpy as np

from tensorir.script.parser import from_source as prim_func_from_source

from .. import op as R
from ..expr import TupleGetItem, Var
from ..nn import builder
from ..struct_info import TensorStructInfo


class CacheOverflowError(ValueError):
    """A prefill or decode would write past the KV cache's capacity."""


CACHE_DTYPES = {"f16": "float16", "f32": "float32", "q8": "int8"}   # option name -> the cache tensors' dtype
Q8_LEVELS = 127            # q8: codes -127..127, symmetric (the absmax maps to 127)
Q8_INV_LEVELS = float(np.float32(1.0 / Q8_LEVELS))   # scale = absmax * this (float32; see quantize_rows_numpy)


def caches_per_layer(dtype: str) -> int:
    """Cache tensors of one layer: keys and values, and with an int8 ("q8") cache their scales."""
    return 4 if dtype == "int8" else 2


def quantize_rows_numpy(x: np.ndarray) -> np.ndarray:
    """``x`` (float32, rows along the last axis) as a q8 cache holds it, dequantized: per row
    ``absmax = max|x|``, codes ``rint(x * (127 / absmax))`` (0 for a zero row), scale
    ``absmax * float32(1 / 127)``, value ``code * scale``, every step in float32 as the append
    kernel computes it (the reference model and the tests round with this)."""
    codes, scales = quantize_rows_codes(x)
    return codes.astype(np.float32) * scales


def quantize_rows_codes(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes, float32 scales with a last axis of 1) of ``quantize_rows_numpy``."""
    x = np.asarray(x, dtype=np.float32)
    amax = np.max(np.abs(x), axis=-1, keepdims=True)
    live = amax > 0
    inv = np.float32(Q8_LEVELS) / np.where(live, amax, np.float32(1))
    codes = np.where(live, np.rint(x * inv), np.float32(0)).astype(np.int8)
    return codes, amax * np.float32(Q8_INV_LEVELS)


def cache_dtype(option: str, where: str = "kv_cache") -> str:
    """The tensor dtype of cache option ``option`` ("f16" / "f32"); a clear error otherwise."""
    if option not in CACHE_DTYPES:
        raise ValueError(f"{where} must be one of {', '.join(repr(k) for k in CACHE_DTYPES)}, got {option!r}")
    return CACHE_DTYPES[option]


def key_shape(capacity: int, kv_heads: int, head_dim: int) -> tuple:
    return (kv_heads, head_dim, capacity)


def value_shape(capacity: int, kv_heads: int, head_dim: int) -> tuple:
    return (kv_heads, capacity, head_dim)


def key_scale_shape(capacity: int, kv_heads: int, head_dim: int) -> tuple:
    """q8: one float32 scale per (head, position) of the key cache, laid out as the keys with the
    head dim 1: the scales of consecutive positions are contiguous (a vector of them per block)."""
    return (kv_heads, 1, capacity)


def value_scale_shape(capacity: int, kv_heads: int, head_dim: int) -> tuple:
    return (kv_heads, capacity, 1)


def cache_shapes(capacity: int, kv_heads: int, head_dim: int, dtype: str) -> list[tuple]:
    """(shape, dtype) of one layer's cache tensors, in the model's parameter order."""
    dims = (capacity, kv_heads, head_dim)
    shapes = [(key_shape(*dims), dtype), (value_shape(*dims), dtype)]
    if dtype == "int8":
        shapes += [(key_scale_shape(*dims), "float32"), (value_scale_shape(*dims), "float32")]
    return shapes


def allocate_caches(num_layers: int, capacity: int, kv_heads: int, head_dim: int,
                    dtype: str = "float32") -> list[np.ndarray]:
    """Zeroed caches ``[keys_0, values_0, keys_1, ...]``, views of one allocation. One block is
    large enough for the OS to back it with 2 MB pages (NumPy asks for them from 4 MB up; a
    layer's cache alone is smaller): a decode step writes each layer's new key column into
    ``kv_heads * head_dim`` rows ``capacity * 4`` bytes apart, each on its own 4 KB page, so
    with small pages every value cost a TLB miss (a C loop of the same writes measured 4.8 us
    a layer with 4 KB pages, 1.7 us in one block). Attention reads the same rows."""
    size = kv_heads * head_dim * capacity
    block = np.zeros((2 * num_layers, size), np.dtype(dtype))
    dims = (capacity, kv_heads, head_dim)
    caches = [block[i].reshape(key_shape(*dims) if i % 2 == 0 else value_shape(*dims))
              for i in range(2 * num_layers)]
    if dtype != "int8":
        return caches
    # q8: each layer's keys, values, key scales, value scales (the scales in one float32 block)
    scales = np.zeros((2 * num_layers, kv_heads * capacity), np.float32)
    out = []
    for layer in range(num_layers):
        out += caches[2 * layer: 2 * layer + 2]
        out += [scales[2 * layer].reshape(key_scale_shape(*dims)),
                scales[2 * layer + 1].reshape(value_scale_shape(*dims))]
    return out


def _stored(value: str, dtype: str) -> str:
    """``value`` (float32 script text) as the cache stores it."""
    return value if dtype == "float32" else f'T.cast({value}, "{dtype}")'


# Memoized: each of a model's layers asks for the same kernel (IR nodes are immutable, and the
# builder's add_func reuses the identical object without a structural comparison or a parse).
@functools.lru_cache(maxsize=64)
def write_kernel(capacity: int, kv_heads: int, head_dim: int, keys: bool, dtype: str = "float32"):
    """The prim_func writing ``new`` (n, kv_heads, head_dim) into positions ``t ..`` of a
    key cache (transposed) or a value cache of ``dtype``."""
    shape = (key_shape if keys else value_shape)(capacity, kv_heads, head_dim)
    target = "cache[vh, vj, t + vi]" if keys else "cache[vh, t + vi, vj]"
    return prim_func_from_source(f'''
@T.prim_func
def kv_cache_write(cache: T.Buffer({shape}, "{dtype}"),
                   new: T.Buffer(("n", {kv_heads}, {head_dim}), "float32"), t: T.int64):
    n = T.int64()
    for h, i, j in T.grid({kv_heads}, n, {head_dim}):
        with T.block("write"):
            vh, vi, vj = T.axis.remap("SSS", [h, i, j])
            T.where(t + i < {capacity})
            {target} = {_stored("new[vi, vh, vj]", dtype)}
''', "<kv_cache_write>")


@functools.lru_cache(maxsize=64)   # memoized as write_kernel
def rotated_append_kernel(capacity: int, kv_heads: int, head_dim: int, key_columns: tuple[int, int],
                          value_columns: tuple[int, int], dtype: str = "float32"):
    """The prim_func writing positions ``t .. t+n-1`` of a key cache (rotated pairwise by
    ``cos``/``sin``, as ``model.Rotary``) and a value cache, from columns
    ``offset .. offset + kv_heads * head_dim`` of ``keys`` and ``values`` (n, width)
    (``*_columns``: (width, offset)); the caches hold ``dtype`` (float16: the rotated float32
    value rounded once)."""
    (kw, ko), (vw, vo) = key_columns, value_columns
    half = head_dim // 2
    k_shape, v_shape = key_shape(capacity, kv_heads, head_dim), value_shape(capacity, kv_heads, head_dim)
    even = f"keys[vi, {ko} + vh * {head_dim} + vp * 2]"
    odd = f"keys[vi, {ko} + vh * {head_dim} + vp * 2 + 1]"
    return prim_func_from_source(f'''
@T.prim_func
def kv_cache_append_rotated(cache_k: T.Buffer({k_shape}, "{dtype}"), cache_v: T.Buffer({v_shape}, "{dtype}"),
                            keys: T.Buffer(("n", {kw}), "float32"), values: T.Buffer(("n", {vw}), "float32"),
                            cos: T.Buffer(("n", {half}), "float32"), sin: T.Buffer(("n", {half}), "float32"),
                            t: T.int64):
    n = T.int64()
    for h, i, p in T.grid({kv_heads}, n, {half}):
        with T.block("keys_even"):
            vh, vi, vp = T.axis.remap("SSS", [h, i, p])
            T.where(t + i < {capacity})
            cache_k[vh, vp * 2, t + vi] = {_stored(f"{even} * cos[vi, vp] - {odd} * sin[vi, vp]", dtype)}
    for h, i, p in T.grid({kv_heads}, n, {half}):
        with T.block("keys_odd"):
            vh, vi, vp = T.axis.remap("SSS", [h, i, p])
            T.where(t + i < {capacity})
            cache_k[vh, vp * 2 + 1, t + vi] = {_stored(f"{even} * sin[vi, vp] + {odd} * cos[vi, vp]", dtype)}
    for h, i, j in T.grid({kv_heads}, n, {head_dim}):
        with T.block("values"):
            vh, vi, vj = T.axis.remap("SSS", [h, i, j])
            T.where(t + i < {capacity})
            cache_v[vh, t + vi, vj] = {_stored(f"values[vi, {vo} + vh * {head_dim} + vj]", dtype)}
''', "<kv_cache_append_rotated>")


def _q8_code(value: str, absmax: str) -> str:
    """The int8 code of ``value`` in a row of absmax ``absmax`` (script text; quantize_rows_numpy)."""
    return (f'T.cast(T.if_then_else({absmax} > T.float32(0), T.round({value} * '
            f'(T.float32({Q8_LEVELS}) / {absmax})), T.float32(0)), "int8")')


@functools.lru_cache(maxsize=64)   # memoized as write_kernel
def rotated_append_kernel_q8(capacity: int, kv_heads: int, head_dim: int, key_columns: tuple[int, int],
                             value_columns: tuple[int, int]):
    """``rotated_append_kernel`` for an int8 ("q8") cache: per new (position, head) row of keys
    (after rotation) and of values, its absmax goes to the scale slot first, the codes are
    ``rint(x * (127 / absmax))`` and the slot then becomes the scale ``absmax * (1 / 127)``
    (quantize_rows_numpy: the same float32 steps; a division by the constant 127 would be
    emitted as a multiply by its reciprocal, so it is written as one)."""
    (kw, ko), (vw, vo) = key_columns, value_columns
    half = head_dim // 2
    dims = (capacity, kv_heads, head_dim)
    k_shape, v_shape = key_shape(*dims), value_shape(*dims)
    ks_shape, vs_shape = key_scale_shape(*dims), value_scale_shape(*dims)
    even = f"keys[vi, {ko} + vh * {head_dim} + vp * 2]"
    odd = f"keys[vi, {ko} + vh * {head_dim} + vp * 2 + 1]"
    rot_even = f"({even} * cos[vi, vp] - {odd} * sin[vi, vp])"
    rot_odd = f"({even} * sin[vi, vp] + {odd} * cos[vi, vp])"
    value = f"values[vi, {vo} + vh * {head_dim} + vj]"
    kslot, vslot = "scale_k[vh, 0, t + vi]", "scale_v[vh, t + vi, 0]"
    return prim_func_from_source(f'''
@T.prim_func
def kv_cache_append_rotated_q8(cache_k: T.Buffer({k_shape}, "int8"), cache_v: T.Buffer({v_shape}, "int8"),
                               scale_k: T.Buffer({ks_shape}, "float32"), scale_v: T.Buffer({vs_shape}, "float32"),
                               keys: T.Buffer(("n", {kw}), "float32"), values: T.Buffer(("n", {vw}), "float32"),
                               cos: T.Buffer(("n", {half}), "float32"), sin: T.Buffer(("n", {half}), "float32"),
                               t: T.int64):
    n = T.int64()
    for h, i, p in T.grid({kv_heads}, n, {half}):
        with T.block("keys_absmax"):
            vh, vi, vp = T.axis.remap("SSR", [h, i, p])
            T.where(t + i < {capacity})
            with T.init():
                {kslot} = T.float32(0)
            {kslot} = T.max({kslot}, T.max(T.abs({rot_even}), T.abs({rot_odd})))
    for h, i, p in T.grid({kv_heads}, n, {half}):
        with T.block("keys_even"):
            vh, vi, vp = T.axis.remap("SSS", [h, i, p])
            T.where(t + i < {capacity})
            cache_k[vh, vp * 2, t + vi] = {_q8_code(rot_even, kslot)}
    for h, i, p in T.grid({kv_heads}, n, {half}):
        with T.block("keys_odd"):
            vh, vi, vp = T.axis.remap("SSS", [h, i, p])
            T.where(t + i < {capacity})
            cache_k[vh, vp * 2 + 1, t + vi] = {_q8_code(rot_odd, kslot)}
    for h, i in T.grid({kv_heads}, n):
        with T.block("keys_scale"):
            vh, vi = T.axis.remap("SS", [h, i])
            T.where(t + i < {capacity})
            {kslot} = {kslot} * T.float32({Q8_INV_LEVELS!r})
    for h, i, j in T.grid({kv_heads}, n, {head_dim}):
        with T.block("values_absmax"):
            vh, vi, vj = T.axis.remap("SSR", [h, i, j])
            T.where(t + i < {capacity})
            with T.init():
                {vslot} = T.float32(0)
            {vslot} = T.max({vslot}, T.abs({value}))
    for h, i, j in T.grid({kv_heads}, n, {head_dim}):
        with T.block("values"):
            vh, vi, vj = T.axis.remap("SSS", [h, i, j])
            T.where(t + i < {capacity})
            cache_v[vh, t + vi, vj] = {_q8_code(value, vslot)}
    for h, i in T.grid({kv_heads}, n):
        with T.block("values_scale"):
            vh, vi = T.axis.remap("SS", [h, i])
            T.where(t + i < {capacity})
            {vslot} = {vslot} * T.float32({Q8_INV_LEVELS!r})
''', "<kv_cache_append_rotated_q8>")


def append_rotated(cache_k, cache_v, keys, key_offset: int, values, value_offset: int, cos, sin, t,
                   scales: tuple | None = None):
    """``(cache_k, cache_v)`` (in place) with the ``n`` new positions at ``t ..``: the keys are
    columns ``key_offset ..`` of ``keys`` (n, width) rotated by ``cos``/``sin`` (n, head_dim / 2),
    the values columns ``value_offset ..`` of ``values`` (``keys`` and ``values`` may be one
    tensor)."""
    bb = builder()
    keys, values = (x if isinstance(x, Var) else bb.emit(x, "kv_source") for x in (keys, values))
    k_sinfo, v_sinfo = cache_k.struct_info, cache_v.struct_info
    kv_heads, head_dim, capacity = (d.value for d in k_sinfo.shape)
    width = kv_heads * head_dim
    columns = []
    for source, offset in ((keys, key_offset), (values, value_offset)):
        total = source.struct_info.shape[1].value
        if not 0 <= offset <= total - width:
            raise ValueError(f"append_rotated: columns {offset} .. {offset + width} are outside the "
                             f"{total} columns of the source")
        columns.append((total, offset))
    name = "kv_cache_append_rotated"
    if k_sinfo.dtype != v_sinfo.dtype or k_sinfo.dtype not in CACHE_DTYPES.values():
        raise ValueError(f"append_rotated: the caches must both be float16, float32 or int8, got "
                         f"{k_sinfo.dtype} and {v_sinfo.dtype}")
    if (k_sinfo.dtype == "int8") != (scales is not None):
        raise ValueError("append_rotated: an int8 (q8) cache takes its scales (scales=(key_scales, "
                         "value_scales)), and only an int8 cache does")
    out = [TensorStructInfo(k_sinfo.shape, k_sinfo.dtype), TensorStructInfo(v_sinfo.shape, v_sinfo.dtype)]
    if scales is None:
        gvar = bb.add_func(rotated_append_kernel(capacity, kv_heads, head_dim, *columns, k_sinfo.dtype), name)
        args, inplace = (cache_k, cache_v, keys, values, cos, sin), [0, 1]
    else:
        gvar = bb.add_func(rotated_append_kernel_q8(capacity, kv_heads, head_dim, *columns), name + "_q8")
        args, inplace = (cache_k, cache_v, *scales, keys, values, cos, sin), [0, 1, 2, 3]
        out += [TensorStructInfo(s.struct_info.shape, s.struct_info.dtype) for s in scales]
    result = bb.emit(R.call_tir_inplace(gvar, args, inplace, out, tir_vars=[t]), "caches")
    return tuple(bb.emit(TupleGetItem(result, i), name)
                 for i, name in enumerate(("cache_k", "cache_v", "scale_k", "scale_v")[:len(out)]))


def _append(cache, new, t, keys: bool):
    sinfo = cache.struct_info
    if sinfo.dtype == "int8":   # the codes need their row's scale: append_rotated writes both
        raise ValueError("append_keys/append_values: an int8 (q8) cache is written by append_rotated")
    dims = [d.value for d in sinfo.shape]   # IntImm dims
    capacity, kv_heads, head_dim = (dims[2], dims[0], dims[1]) if keys else (dims[1], dims[0], dims[2])
    bb = builder()
    name = "kv_cache_write_keys" if keys else "kv_cache_write_values"
    gvar = bb.add_func(write_kernel(capacity, kv_heads, head_dim, keys, sinfo.dtype), name)
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


def key_scale_view(scales, length):
    """The first ``length`` positions of a q8 key cache's scales: ``(kv_heads, 1, length)``."""
    return R.strided_slice(scales, [2], [0], [length])


def value_scale_view(scales, length):
    """The first ``length`` positions of a q8 value cache's scales: ``(kv_heads, length, 1)``."""
    return R.strided_slice(scales, [1], [0], [length])


def dequantized(view, scale_view):
    """An int8 cache view as float32: ``astype(view) * scales`` (broadcast along the head dim);
    FuseAttention reads the codes and the scales in place through it."""
    return R.multiply(R.astype(view, "float32"), scale_view)


def widened(view):
    """A cache view as float32 (the values attention computes with): ``R.astype`` of a float16
    view (FuseAttention reads the float16 cache in place through it), the view itself otherwise."""
    return view if view.struct_info.dtype == "float32" else R.astype(view, "float32")
