"""The loop-level kernel of one fused attention: ``softmax(q @ kt * scale + mask) @ v``.

Shapes: ``q (B, N, D)``, ``kt (B, D, M)``, ``v (B, M, DV)``, output ``(B, N, DV)``.
Each ``(head, row)`` pair walks the keys once with an online softmax: a
running max and sum per row, and the output row itself as the accumulator,
rescaled whenever the max grows. Per-row state is ``(B, N)`` buffers, never a
``(B, N, M)`` score matrix. The mask is either additive (a tensor broadcast to
``(B, N, M)``) or a condition (``where(cond, scores, fill)``); its dims are 1
or the score dim at that position (right-aligned). The kernel is built as
script text and parsed, so it is exactly what the printer shows.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir.schedule_rules.attention import ATTENTION_ATTR
from tensorir.script import from_source

ROLES = ("B", "N", "D", "M", "DV")          # heads, query rows, head dim, keys, value dim


@dataclass(frozen=True)
class AttentionMask:
    kind: str                  # "add" (scores + mask) or "where" (cond ? scores : fill)
    dims: tuple                # per mask dim: a role name ("B", "N", "M") or 1, right-aligned
    dtype: str                 # the mask tensor's dtype ("float32" or "bool")
    fill: float = 0.0          # the "where" fill value


@dataclass(frozen=True)
class AttentionSpec:
    dims: dict                 # role -> int (static) or None (symbolic: a kernel parameter dim)
    scale: float | None        # multiplier of q @ kt, None when absent
    mask: AttentionMask | None


def _dim(spec: AttentionSpec, role) -> str:
    if role == 1:
        return "1"
    value = spec.dims[role]
    return str(value) if value is not None else f'"{role.lower()}"'


def _shape(spec: AttentionSpec, roles) -> str:
    return "(" + ", ".join(_dim(spec, r) for r in roles) + ("," if len(roles) == 1 else "") + ")"


TILE = 64   # keys per step: a constant loop gcc vectorizes (16 got unrolled into scalar code)


def _mask_load(mask: AttentionMask, key: str) -> str:
    index = {"B": "vh", "N": "vi", "M": key}
    return "mask[" + ", ".join(index[r] if r != 1 else "0" for r in mask.dims) + "]"


def _score_expr(spec: AttentionSpec, key: str) -> str:
    score = "tile[vh, vi, vt]"
    if spec.scale is not None:
        score = f"{score} * T.float32({spec.scale!r})"
    mask = spec.mask
    if mask is None:
        return score
    if mask.kind == "add":
        return f"{score} + {_mask_load(mask, key)}"
    cond = _mask_load(mask, key) if mask.dtype == "bool" else f"{_mask_load(mask, key)} != T.cast(0, \"{mask.dtype}\")"
    return f"T.if_then_else({cond}, {score}, T.float32({float(mask.fill)!r}))"


def _key_step(spec: AttentionSpec, first: str, width: str, suffix: str, indent: str,
              tile_axis: str = "") -> str:
    """One step over keys ``first .. first + width``: scores, a new running max, rescaled
    sum and output row, then the weighted values (all loops over the tile are unit-stride)."""
    d, dv = (_dim(spec, r).strip('"') for r in ("D", "DV"))
    key = f"{first} + vt"
    axis = f"\n        {tile_axis}" if tile_axis else ""  # the tile's loop, in blocks that read keys
    text = f'''for t in range({width}):
    with T.block("score_clear{suffix}"):
        vh, vi, vt = T.axis.remap("SSS", [h, i, t])
        tile[vh, vi, vt] = T.float32(0.0)
for k, t in T.grid({d}, {width}):
    with T.block("score{suffix}"):
        vh, vi, vk, vt = T.axis.remap("SSRS", [h, i, k, t]){axis}
        tile[vh, vi, vt] = tile[vh, vi, vt] + q[vh, vi, vk] * kt[vh, vk, {key}]
for t in range({width}):
    with T.block("mask{suffix}"):
        vh, vi, vt = T.axis.remap("SSS", [h, i, t]){axis}
        tile[vh, vi, vt] = {_score_expr(spec, key)}
with T.block("max_start{suffix}"):
    vh, vi = T.axis.remap("SS", [h, i])
    next_max[vh, vi] = row_max[vh, vi]
for t in range({width}):
    with T.block("tile_max{suffix}"):
        vh, vi, vt = T.axis.remap("SSR", [h, i, t])
        next_max[vh, vi] = T.max(next_max[vh, vi], tile[vh, vi, vt])
with T.block("rescale{suffix}"):
    vh, vi = T.axis.remap("SS", [h, i])
    rescale[vh, vi] = T.exp(row_max[vh, vi] - next_max[vh, vi])
    row_sum[vh, vi] = row_sum[vh, vi] * rescale[vh, vi]
    row_max[vh, vi] = next_max[vh, vi]
for t in range({width}):
    with T.block("weights{suffix}"):
        vh, vi, vt = T.axis.remap("SSS", [h, i, t])
        tile[vh, vi, vt] = T.exp(tile[vh, vi, vt] - row_max[vh, vi])
for t in range({width}):
    with T.block("tile_sum{suffix}"):
        vh, vi, vt = T.axis.remap("SSR", [h, i, t])
        row_sum[vh, vi] = row_sum[vh, vi] + tile[vh, vi, vt]
for c in range({dv}):
    with T.block("acc_rescale{suffix}"):
        vh, vi, vc = T.axis.remap("SSS", [h, i, c])
        out[vh, vi, vc] = out[vh, vi, vc] * rescale[vh, vi]
for t, c in T.grid({width}, {dv}):
    with T.block("accumulate{suffix}"):
        vh, vi, vt, vc = T.axis.remap("SSRS", [h, i, t, c]){axis}
        out[vh, vi, vc] = out[vh, vi, vc] + tile[vh, vi, vt] * v[vh, {key}, vc]
'''
    return "".join(indent + line + "\n" for line in text.splitlines())


def attention_source(spec: AttentionSpec) -> str:
    """Script text of the kernel for ``spec``: whole tiles of TILE keys, then the rest."""
    params = [f'q: T.Buffer({_shape(spec, ("B", "N", "D"))}, "float32")',
              f'kt: T.Buffer({_shape(spec, ("B", "D", "M"))}, "float32")',
              f'v: T.Buffer({_shape(spec, ("B", "M", "DV"))}, "float32")']
    if spec.mask is not None:
        params.append(f'mask: T.Buffer({_shape(spec, spec.mask.dims)}, "{spec.mask.dtype}")')
    params.append(f'out: T.Buffer({_shape(spec, ("B", "N", "DV"))}, "float32")')
    symbolic = [r for r in ROLES if spec.dims[r] is None]
    decls = "".join(f"    {r.lower()} = T.int64()\n" for r in symbolic)
    b, n, d, m, dv = (_dim(spec, r).strip('"') for r in ROLES)
    rows = f"({b}, {n})"
    whole = _key_step(spec, f"vo * {TILE}", str(TILE), "", " " * 12,
                      f"vo = T.axis.spatial({m} // {TILE}, o)")
    rest = _key_step(spec, f"{m} // {TILE} * {TILE}", f"{m} % {TILE}", "_rest", " " * 8)
    return f'''@T.prim_func(private=True)
def fused_attention({", ".join(params)}):
{decls}    row_max = T.alloc_buffer({rows}, "float32")
    row_sum = T.alloc_buffer({rows}, "float32")
    next_max = T.alloc_buffer({rows}, "float32")
    rescale = T.alloc_buffer({rows}, "float32")
    tile = T.alloc_buffer(({b}, {n}, {TILE}), "float32")
    for h, i in T.grid({b}, {n}):
        with T.block("row_start"):
            vh, vi = T.axis.remap("SS", [h, i])
            row_max[vh, vi] = T.float32("-inf")
            row_sum[vh, vi] = T.float32(0.0)
        for c in range({dv}):
            with T.block("acc_clear"):
                vh, vi, vc = T.axis.remap("SSS", [h, i, c])
                out[vh, vi, vc] = T.float32(0.0)
        for o in range({m} // {TILE}):
{whole}{rest}        for c in range({dv}):
            with T.block("normalize"):
                vh, vi, vc = T.axis.remap("SSS", [h, i, c])
                out[vh, vi, vc] = out[vh, vi, vc] / row_sum[vh, vi]
'''


def attention_kernel(spec: AttentionSpec):
    """The kernel's PrimFunc, marked for the attention schedule rule."""
    return from_source(attention_source(spec)).with_attr(ATTENTION_ATTR, True)
