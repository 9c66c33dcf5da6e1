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


def _mask_load(mask: AttentionMask) -> str:
    index = {"B": "vh", "N": "vi", "M": "vj"}
    return "mask[" + ", ".join(index[r] if r != 1 else "0" for r in mask.dims) + "]"


def _score_expr(spec: AttentionSpec) -> str:
    score = "score[vh, vi]"
    if spec.scale is not None:
        score = f"{score} * T.float32({spec.scale!r})"
    mask = spec.mask
    if mask is None:
        return score
    if mask.kind == "add":
        return f"{score} + {_mask_load(mask)}"
    cond = _mask_load(mask) if mask.dtype == "bool" else f"{_mask_load(mask)} != T.cast(0, \"{mask.dtype}\")"
    return f"T.if_then_else({cond}, {score}, T.float32({float(mask.fill)!r}))"


def attention_source(spec: AttentionSpec) -> str:
    """Script text of the kernel for ``spec``."""
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
    return f'''@T.prim_func(private=True)
def fused_attention({", ".join(params)}):
{decls}    row_max = T.alloc_buffer({rows}, "float32")
    row_sum = T.alloc_buffer({rows}, "float32")
    next_max = T.alloc_buffer({rows}, "float32")
    rescale = T.alloc_buffer({rows}, "float32")
    score = T.alloc_buffer({rows}, "float32")
    for h, i in T.grid({b}, {n}):
        with T.block("row_start"):
            vh, vi = T.axis.remap("SS", [h, i])
            row_max[vh, vi] = T.float32("-inf")
            row_sum[vh, vi] = T.float32(0.0)
        for c in range({dv}):
            with T.block("acc_clear"):
                vh, vi, vc = T.axis.remap("SSS", [h, i, c])
                out[vh, vi, vc] = T.float32(0.0)
        for j in range({m}):
            for k in range({d}):
                with T.block("score"):
                    vh, vi, vj, vk = T.axis.remap("SSSR", [h, i, j, k])
                    with T.init():
                        score[vh, vi] = T.float32(0.0)
                    score[vh, vi] = score[vh, vi] + q[vh, vi, vk] * kt[vh, vk, vj]
            with T.block("online_softmax"):
                vh, vi, vj = T.axis.remap("SSS", [h, i, j])
                score[vh, vi] = {_score_expr(spec)}
                next_max[vh, vi] = T.max(row_max[vh, vi], score[vh, vi])
                rescale[vh, vi] = T.exp(row_max[vh, vi] - next_max[vh, vi])
                score[vh, vi] = T.exp(score[vh, vi] - next_max[vh, vi])
                row_sum[vh, vi] = row_sum[vh, vi] * rescale[vh, vi] + score[vh, vi]
                row_max[vh, vi] = next_max[vh, vi]
            for c in range({dv}):
                with T.block("accumulate"):
                    vh, vi, vj, vc = T.axis.remap("SSSS", [h, i, j, c])
                    out[vh, vi, vc] = out[vh, vi, vc] * rescale[vh, vi] + score[vh, vi] * v[vh, vj, vc]
        for c in range({dv}):
            with T.block("normalize"):
                vh, vi, vc = T.axis.remap("SSS", [h, i, c])
                out[vh, vi, vc] = out[vh, vi, vc] / row_sum[vh, vi]
'''


def attention_kernel(spec: AttentionSpec):
    """The kernel's PrimFunc, marked for the attention schedule rule."""
    return from_source(attention_source(spec)).with_attr(ATTENTION_ATTR, True)
