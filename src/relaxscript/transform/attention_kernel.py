"""The loop-level kernel of one fused attention: ``softmax(q @ kt * scale + mask) @ v``.

Shapes: ``q (B, N, D)``, ``kt (B, D, M)``, ``v (B, M, DV)``, output ``(B, N, DV)``.
Each ``(head, row)`` pair walks the keys once with an online softmax: a
running max and sum per row, and the output row itself as the accumulator,
rescaled whenever the max grows. Per-row state is ``(B, N)`` buffers, never a
``(B, N, M)`` score matrix. The mask is either additive (a tensor broadcast to
``(B, N, M)``) or a condition (``where(cond, scores, fill)``); its dims are 1
or the score dim at that position (right-aligned). The kernel is built as
script text and parsed, so it is exactly what the printer shows.

Keys and values may be read in place from a larger buffer in any axis order
(``KeySource``): a KV cache of ``capacity`` rows of which the first ``M`` are
used, ``M`` then being a scalar parameter; a float16 buffer is widened to float32
as it is loaded (``T.cast``), an int8 one (a q8 cache) is widened and multiplied by its
(head, key)'s float32 scale (``kt_scale`` / ``v_scale``), the products accumulate in float32.
Rows may be groups of query heads sharing one key head (``groups``: row ``i`` is group ``i // (N / groups)``,
query ``i % (N / groups)``); a mask computed from positions is an expression
over the row/key indices and scalar parameters ``s0, s1, ...`` (``mask.expr``).
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir.schedule_rules.attention import ATTENTION_ATTR, ATTENTION_LAYOUT_ATTR
from tensorir.script import from_source

ROLES = ("B", "N", "D", "M", "DV")          # heads, query rows, head dim, keys, value dim
# mask roles besides B, N, M when rows are grouped: "G" the group, "R" the query in the group
MASK_INDEX_TOKENS = {role: f"__{role}__" for role in ("B", "N", "M", "G", "R")}


@dataclass(frozen=True)
class AttentionMask:
    kind: str                  # "add" (scores + mask) or "where" (cond ? scores : fill)
    dims: tuple                # per mask operand dim: a role ("B", "N", "M", "G", "R") or 1, right-aligned
    dtype: str                 # the mask's dtype ("float32" or "bool")
    fill: float = 0.0          # the "where" fill value
    expr: str | None = None    # computed in the kernel: script text over MASK_INDEX_TOKENS (no operand)


@dataclass(frozen=True)
class KeySource:
    axes: tuple                # the buffer's axes as roles, e.g. ("B", "D", "M") or a cache's ("M", "B", "D")
    capacity: object = False   # False: the buffer's M axis is the keys; an int (None: symbolic) is
                               # that axis's length, of which the first M rows are the keys
    dtype: str = "float32"     # the buffer's dtype: float16 (a half-precision KV cache) is widened
                               # as it is loaded; int8 (a q8 cache) is multiplied by its scale
    scale_axes: tuple | None = None   # int8: the float32 scale buffer's axes (roles, the head dim's
                                      # role a dim of 1), one scale per (head, key), same capacity


KEYS = KeySource(("B", "D", "M"))
VALUES = KeySource(("B", "M", "DV"))


@dataclass(frozen=True)
class AttentionSpec:
    dims: dict                 # role -> int (static) or None (symbolic: a kernel parameter dim)
    scale: float | None        # multiplier of q @ kt, None when absent
    mask: AttentionMask | None
    groups: int = 1            # query groups among the rows (grouped-query attention), for the mask
    keys: KeySource = KEYS
    values: KeySource = VALUES
    scalars: int = 0           # scalar parameters s0.. the mask expression reads

    def sliced(self) -> bool:
        return self.keys.capacity is not False or self.values.capacity is not False


def _dim(spec: AttentionSpec, role) -> str:
    if role == 1:
        return "1"
    if role == "G":
        return str(spec.groups)
    if role == "R":      # queries per group: a mask operand's own symbolic dim when N is symbolic
        rows = spec.dims["N"]
        return str(rows // spec.groups) if rows is not None else '"r"'
    value = spec.dims[role]
    return str(value) if value is not None else f'"{role.lower()}"'


def _shape(spec: AttentionSpec, roles) -> str:
    return "(" + ", ".join(_dim(spec, r) for r in roles) + ("," if len(roles) == 1 else "") + ")"


TILE = 64   # keys per step: a constant loop gcc vectorizes (16 got unrolled into scalar code)


def _mask_indices(spec: AttentionSpec, key: str) -> dict:
    """Mask role -> the kernel's index expression at row ``vi`` and key ``key``."""
    index = {"B": "vh", "N": "vi", "M": f"({key})"}
    n = spec.dims["N"]
    per_group = (f"T.int64({n // spec.groups})" if n is not None
                 else f"(n // T.int64({spec.groups}))")
    if n is not None and n // spec.groups == 1:
        index["G"], index["R"] = "vi", "T.int64(0)"
    else:
        index["G"], index["R"] = f"(vi // {per_group})", f"(vi % {per_group})"
    return index


def _mask_value(spec: AttentionSpec, key: str) -> str:
    mask, index = spec.mask, _mask_indices(spec, key)
    if mask.expr is not None:
        text = mask.expr
        for role, token in MASK_INDEX_TOKENS.items():
            text = text.replace(token, index[role])
        return text
    return "mask[" + ", ".join(index[r] if r != 1 else "0" for r in mask.dims) + "]"


def _score_expr(spec: AttentionSpec, key: str) -> str:
    score = "tile[vh, vi, vt]"
    if spec.scale is not None:
        score = f"{score} * T.float32({spec.scale!r})"
    mask = spec.mask
    if mask is None:
        return score
    if mask.kind == "add":
        return f"{score} + {_mask_value(spec, key)}"
    value = _mask_value(spec, key)
    cond = value if mask.dtype == "bool" else f"{value} != T.cast(0, \"{mask.dtype}\")"
    return f"T.if_then_else({cond}, {score}, T.float32({float(mask.fill)!r}))"


def _load(name: str, source: KeySource, index: dict) -> str:
    load = f"{name}[" + ", ".join(index[r] for r in source.axes) + "]"
    if source.dtype == "float32":
        return load
    if source.scale_axes is None:
        return f'T.cast({load}, "float32")'
    scale = f"{name}_scale[" + ", ".join(index[r] if r in ("B", "M") else "0" for r in source.scale_axes) + "]"
    return f'T.cast({load}, "float32") * {scale}'


def _source_shape(spec: AttentionSpec, source: KeySource, capacity_name: str, axes: tuple | None = None) -> str:
    dims = []
    for role in axes or source.axes:
        if role == "M" and source.capacity is not False:
            dims.append(str(source.capacity) if source.capacity is not None else f'"{capacity_name}"')
        elif axes is not None and role not in ("B", "M"):
            dims.append("1")       # a scale buffer's head dim
        else:
            dims.append(_dim(spec, role))
    return "(" + ", ".join(dims) + ")"


def row_block(spec: AttentionSpec) -> int:
    """Query rows per pass over a key tile: every row of a head when few (decode: the query
    heads sharing one kv head), else ROW_BLOCK."""
    rows = spec.dims["N"]
    return rows if rows is not None and rows <= ROW_BLOCK_MAX else ROW_BLOCK


ROW_BLOCK, ROW_BLOCK_MAX = 4, 8


class _Blocks:
    """Block text of the kernel: each block binds ``vh`` to the head loop ``h`` and ``vi`` to
    row ``ob * RB + r`` of the row block, guarded when the rows do not fill the last block."""

    def __init__(self, spec: AttentionSpec):
        self.b, self.n = (_dim(spec, r).strip('"') for r in ("B", "N"))
        self.rb = row_block(spec)
        rows = spec.dims["N"]
        self.guard = not (rows is not None and rows % self.rb == 0)

    def block(self, name: str, loops: list, axes: list, body: list, indent: str) -> str:
        """``loops``: (var, extent) around the block (the row loop is ``r``); ``axes``:
        (block var, kind "S"/"R", extent, binding) besides vh and vi."""
        lines, pad = [], indent
        if loops:
            names = ", ".join(v for v, _ in loops)
            extents = ", ".join(e for _, e in loops)
            head = f"for {names} in T.grid({extents}):" if len(loops) > 1 else f"for {names} in range({extents}):"
            lines.append(pad + head)
            pad += "    "
        lines.append(pad + f'with T.block("{name}"):')
        pad += "    "
        lines.append(pad + f"vh = T.axis.spatial({self.b}, h)")
        lines.append(pad + f"vi = T.axis.spatial({self.n}, ob * {self.rb} + r)")
        for var, kind, extent, binding in axes:
            lines.append(pad + f"{var} = T.axis.{'spatial' if kind == 'S' else 'reduce'}({extent}, {binding})")
        if self.guard:
            lines.append(pad + f"T.where(ob * {self.rb} + r < {self.n})")
        lines += [pad + line for line in body]
        return "\n".join(lines) + "\n"


def _key_step(spec: AttentionSpec, blocks: _Blocks, first: str, width: str, suffix: str, indent: str,
              tile_axis: tuple | None = None) -> str:
    """One step over keys ``first .. first + width`` for a block of rows: scores, a new
    running max, rescaled sum and output rows, then the weighted values (the loops over the
    tile and over the value dim are innermost and unit-stride; each key's values are read
    once for all the rows of the block)."""
    d, dv = (_dim(spec, r).strip('"') for r in ("D", "DV"))
    rb = str(blocks.rb)
    key = f"{first} + vt"
    tile = [tile_axis] if tile_axis else []     # the whole-tile loop's axis, in blocks reading keys
    t_axis = ("vt", "S", width, "t")
    keys = _load("kt", spec.keys, dict(B="vh", D="vk", M=key))
    values = _load("v", spec.values, dict(B="vh", M=key, DV="vc"))
    step = [
        blocks.block(f"score_clear{suffix}", [("r", rb), ("t", width)], [t_axis],
                     ["tile[vh, vi, vt] = T.float32(0.0)"], indent),
        blocks.block(f"score{suffix}", [("k", d), ("r", rb), ("t", width)],
                     [("vk", "R", d, "k"), t_axis] + tile,
                     [f"tile[vh, vi, vt] = tile[vh, vi, vt] + q[vh, vi, vk] * {keys}"], indent),
        blocks.block(f"mask{suffix}", [("r", rb), ("t", width)], [t_axis] + tile,
                     [f"tile[vh, vi, vt] = {_score_expr(spec, key)}"], indent),
        blocks.block(f"max_start{suffix}", [("r", rb)], [], ["next_max[vh, vi] = row_max[vh, vi]"], indent),
        blocks.block(f"tile_max{suffix}", [("r", rb), ("t", width)], [("vt", "R", width, "t")],
                     ["next_max[vh, vi] = T.max(next_max[vh, vi], tile[vh, vi, vt])"], indent),
        blocks.block(f"rescale{suffix}", [("r", rb)], [],
                     ["rescale[vh, vi] = T.exp(row_max[vh, vi] - next_max[vh, vi])",
                      "row_sum[vh, vi] = row_sum[vh, vi] * rescale[vh, vi]",
                      "row_max[vh, vi] = next_max[vh, vi]"], indent),
        blocks.block(f"weights{suffix}", [("r", rb), ("t", width)], [t_axis],
                     ["tile[vh, vi, vt] = T.exp(tile[vh, vi, vt] - row_max[vh, vi])"], indent),
        blocks.block(f"tile_sum{suffix}", [("r", rb), ("t", width)], [("vt", "R", width, "t")],
                     ["row_sum[vh, vi] = row_sum[vh, vi] + tile[vh, vi, vt]"], indent),
        blocks.block(f"acc_rescale{suffix}", [("r", rb), ("c", dv)], [("vc", "S", dv, "c")],
                     ["out[vh, vi, vc] = out[vh, vi, vc] * rescale[vh, vi]"], indent),
        blocks.block(f"accumulate{suffix}", [("t", width), ("r", rb), ("c", dv)],
                     [("vt", "R", width, "t"), ("vc", "S", dv, "c")] + tile,
                     [f"out[vh, vi, vc] = out[vh, vi, vc] + tile[vh, vi, vt] * {values}"], indent),
    ]
    return "".join(step)


def attention_source(spec: AttentionSpec) -> str:
    """Script text of the kernel for ``spec``: per head and block of rows, whole tiles of
    TILE keys, then the rest."""
    params = [f'q: T.Buffer({_shape(spec, ("B", "N", "D"))}, "float32")',
              f'kt: T.Buffer({_source_shape(spec, spec.keys, "kcap")}, "{spec.keys.dtype}")',
              f'v: T.Buffer({_source_shape(spec, spec.values, "vcap")}, "{spec.values.dtype}")']
    for name, source, cap in (("kt", spec.keys, "kcap"), ("v", spec.values, "vcap")):
        if source.scale_axes is not None:
            params.append(f'{name}_scale: T.Buffer({_source_shape(spec, source, cap, source.scale_axes)}, "float32")')
    if spec.mask is not None and spec.mask.expr is None:
        params.append(f'mask: T.Buffer({_shape(spec, spec.mask.dims)}, "{spec.mask.dtype}")')
    params.append(f'out: T.Buffer({_shape(spec, ("B", "N", "DV"))}, "float32")')
    params += [f"{name}: T.int64" for name in scalar_names(spec)]
    symbolic = [r.lower() for r in ROLES if spec.dims[r] is None and not (r == "M" and spec.sliced())]
    symbolic += [name for name, source in (("kcap", spec.keys), ("vcap", spec.values))
                 if source.capacity is None]
    if spec.mask is not None and spec.mask.expr is None and "R" in spec.mask.dims and spec.dims["N"] is None:
        symbolic.append("r")
    decls = "".join(f"    {name} = T.int64()\n" for name in symbolic)
    b, n, d, m, dv = (_dim(spec, r).strip('"') for r in ROLES)
    blocks = _Blocks(spec)
    rb = blocks.rb
    rows = f"({b}, {n})"
    whole = _key_step(spec, blocks, f"vo * {TILE}", str(TILE), "", " " * 12,
                      ("vo", "S", f"{m} // {TILE}", "o"))
    rest = _key_step(spec, blocks, f"{m} // {TILE} * {TILE}", f"{m} % {TILE}", "_rest", " " * 8)
    start = blocks.block("row_start", [("r", str(rb))], [],
                         ['row_max[vh, vi] = T.float32("-inf")', "row_sum[vh, vi] = T.float32(0.0)"], " " * 8)
    clear = blocks.block("acc_clear", [("r", str(rb)), ("c", dv)], [("vc", "S", dv, "c")],
                         ["out[vh, vi, vc] = T.float32(0.0)"], " " * 8)
    normalize = blocks.block("normalize", [("r", str(rb)), ("c", dv)], [("vc", "S", dv, "c")],
                             ["out[vh, vi, vc] = out[vh, vi, vc] / row_sum[vh, vi]"], " " * 8)
    return f'''@T.prim_func(private=True)
def fused_attention({", ".join(params)}):
{decls}    row_max = T.alloc_buffer({rows}, "float32")
    row_sum = T.alloc_buffer({rows}, "float32")
    next_max = T.alloc_buffer({rows}, "float32")
    rescale = T.alloc_buffer({rows}, "float32")
    tile = T.alloc_buffer(({b}, {n}, {TILE}), "float32")
    for h, ob in T.grid({b}, ({n} + {rb - 1}) // {rb}):
{start}{clear}        for o in range({m} // {TILE}):
{whole}{rest}{normalize}'''


def scalar_names(spec: AttentionSpec) -> list[str]:
    """The kernel's scalar parameters, in the order of the call's ``tir_vars``: the used key
    count when keys are read from a larger buffer (and not a constant), then the mask's."""
    names = ["m"] if spec.sliced() and spec.dims["M"] is None else []
    return names + [f"s{i}" for i in range(spec.scalars)]


def attention_layout(spec: AttentionSpec) -> dict:
    """What a target's generated kernel needs beyond the PrimFunc's buffers: the operands'
    positions, the key and value buffers' axis orders, where the key count comes from
    ("param": the scalar ``m``; an int; "axis": the keys' M axis) and the mask's kind."""
    has_mask = spec.mask is not None and spec.mask.expr is None
    layout = {"q": 0, "kt": 1, "v": 2,
              "keys": ",".join(spec.keys.axes), "values": ",".join(spec.values.axes),
              "m": ("param" if spec.dims["M"] is None else spec.dims["M"]) if spec.sliced() else "axis",
              "mask": spec.mask.kind if spec.mask is not None else "none"}
    position = 3
    for name, source in (("kscale", spec.keys), ("vscale", spec.values)):   # a q8 cache's scales
        if source.scale_axes is not None:
            layout[name], layout[name + "_axes"] = position, ",".join(source.scale_axes)
            position += 1
    if has_mask:
        layout["mask_operand"] = position
        position += 1
    layout["out"] = position
    if spec.mask is not None and spec.mask.kind == "where":
        layout["fill"] = float(spec.mask.fill)
    return layout


def attention_kernel(spec: AttentionSpec):
    """The kernel's PrimFunc, marked for the attention schedule rule and with its layout for
    a target's generated kernel (``backends/c/attention.py``)."""
    return from_source(attention_source(spec)).with_attr(ATTENTION_ATTR, True) \
        .with_attr(ATTENTION_LAYOUT_ATTR, attention_layout(spec))
