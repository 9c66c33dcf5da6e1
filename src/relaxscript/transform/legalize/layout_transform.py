"""``R.layout_transform`` as a gather: each output position reads the input element the
index map sends there, found by inverting the map, or ``pad_value`` where none does.

The inverse is derived for the maps TVM's layout passes write: every result is either a
*digit* of one index, ``(v % m) // d`` (``v``, ``v // d``, ``v % m`` included), the
digits of an index tiling it (``d`` of one is ``m`` of the next, the lowest ``d`` 1:
``v = sum(o_i * d_i)``), or a row-major *fuse* ``v0 * s0 + v1 * s1 + ... + vk`` of indices
found nowhere else (``v_j = o // s_j % extent_j``). Anything else keeps the op (the VMs
run its NumPy reference)."""
from __future__ import annotations

from tensorir import expr as E
from tensorir.compute import compute

from .common import guarded
from .registry import register_legalize


def _const(e) -> int | None:
    return e.value if isinstance(e, E.IntImm) else None


def _digit(e):
    """``(v, m, d)`` when ``e`` is ``(v % m) // d`` of a param ``v`` (m None: no modulus)."""
    d = 1
    if isinstance(e, E.FloorDiv) and _const(e.b) and e.b.value > 0:
        d, e = e.b.value, e.a
    m = None
    if isinstance(e, E.FloorMod) and _const(e.b) and e.b.value > 0:
        m, e = e.b.value, e.a
    return (e, m, d) if isinstance(e, E.Var) else None


def _fuse_terms(e):
    """``[(v, stride)]`` when ``e`` is a sum of params times constant strides."""
    if isinstance(e, E.Add):
        a, b = _fuse_terms(e.a), _fuse_terms(e.b)
        return None if a is None or b is None else a + b
    if isinstance(e, E.Mul):
        for var, k in ((e.a, e.b), (e.b, e.a)):
            if isinstance(var, E.Var) and _const(k) is not None and k.value > 0:
                return [(var, k.value)]
        return None
    return [(e, 1)] if isinstance(e, E.Var) else None


def inverse(te, index_map, in_shape, outs):
    """Input indices (in the output loop vars ``outs``) and the list of in-range
    conditions, or None when the map is not of a form inverted here."""
    params = list(index_map.params)
    extent = dict(zip(params, in_shape))
    digits: dict = {p: [] for p in params}
    fused: dict = {p: [] for p in params}
    for o, r in zip(outs, index_map.results):
        dig = _digit(r)
        if dig is not None:
            digits[dig[0]].append((o, dig[1], dig[2]))
            continue
        terms = _fuse_terms(r)
        if terms is None or len({v for v, _ in terms}) != len(terms):
            return None
        terms.sort(key=lambda t: -t[1])
        if terms[-1][1] != 1:
            return None
        for (_, stride), (nxt, nxt_stride) in zip(terms, terms[1:]):
            if not te.analyzer.can_prove_equal(E.IntImm(stride), E.IntImm(nxt_stride) * extent[nxt]):
                return None
        for j, (v, stride) in enumerate(terms):
            q = E.floordiv(o, E.IntImm(stride)) if stride != 1 else o
            fused[v].append(q if j == 0 else E.floormod(q, extent[v]))
    index, conds = [], []
    for p in params:
        if fused[p] and digits[p] or len(fused[p]) > 1:
            return None
        if fused[p]:
            index.append(fused[p][0])
            continue
        parts = sorted(digits[p], key=lambda t: t[2])
        if not parts:
            if not te.is_one(extent[p]):
                return None   # an index the map drops: not one-to-one
            index.append(E.IntImm(0))
            continue
        if parts[0][2] != 1:
            return None
        value = None
        for (o, m, d), nxt in zip(parts, parts[1:] + [None]):
            if nxt is not None and (m is None or m != nxt[2] or m % d):
                return None
            if nxt is None and m is not None:
                if m % d or not te.prove(E.LE(extent[p], E.IntImm(m))):
                    return None   # v % m with v reaching m: two inputs share a position
            term = o if d == 1 else o * E.IntImm(d)
            value = term if value is None else value + term
        index.append(value)
        conds.append(E.LT(value, extent[p]))
    return index, conds


@register_legalize("relax.layout_transform")
def _layout_transform(ctx, call):
    x_sinfo = call.args[0].struct_info
    if x_sinfo.shape is None or call.struct_info.shape is None:
        return None
    te = ctx.te(call)
    x = te.placeholder(call.args[0], "x")
    out_shape = te.out_shape()
    pad = call.attrs.get("pad_value")
    pad = E.const(0 if pad is None else pad, x.dtype)
    probe = [E.Var(f"o{i}", "int64") for i in range(len(out_shape))]
    if inverse(te, call.attrs["index_map"], x.shape, probe) is None:
        return None

    def body(*idx):
        te.bind_loops(idx, out_shape)
        index, conds = inverse(te, call.attrs["index_map"], x.shape, list(idx))
        index = [te.simplify(i) for i in index]
        conds = [c for c in (te.simplify(c) for c in conds) if not _always(c)]
        return guarded(x[tuple(index)], conds, pad)

    return te.emit("layout_transform", compute(out_shape, body, "T_layout_trans", x.dtype))


def _always(cond) -> bool:
    return isinstance(cond, E.IntImm) and cond.value == 1
