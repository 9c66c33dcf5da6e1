"""Run-time checks a lowered op needs and its kernel does not make.

A view-like op's kernel reads its input at indices computed from the output's shape: a reshape
whose element counts differ at run time, a squeeze of a symbolic dim that is not 1, a broadcast
of a dim that is neither 1 nor the target read past the input or returned the first elements
(NumPy raises). So does a topk of an axis shorter than ``k`` (its kernel padded with zeros), and
an argmax / argmin of an empty axis (2**63 - 1). ``LegalizeOps`` puts these checks before the
call it lowers, on every pipeline and target, unless the BlockBuilder's analyzer (with the shape
facts known at that place) proves them; ``ApplyShapeConstraints`` emits the same checks earlier,
where they become facts for the rest of the function (one check for 30 equal reshapes, and
fusion across a regrouping reshape), so lowering finds them proven and adds nothing.

Each check is a ``match_cast`` of a shape (never of the tensor: the op keeps its input and
fuses as before), named ``<result>_<what>`` for the error message.
"""
from __future__ import annotations

from tensorir import expr as E

from ...expr import Call, ShapeExpr
from ...struct_info import ShapeStructInfo, TensorStructInfo


def _product(dims) -> E.PrimExpr:
    dims = list(dims)
    total = dims[0] if dims else E.IntImm(1)
    for d in dims[1:]:
        total = total * d
    return total


def _known_shape(expr):
    sinfo = expr.struct_info
    return sinfo.shape if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None else None


def _reshape(call: Call):
    """Checks as (actual, expected, suffix, the claim that makes it unneeded): a reshape's
    element counts."""
    shape = _known_shape(call.args[0])
    target = call.args[1]
    # a shape variable (a parameter R.Shape(["a", "b"])) is checked by its annotation's values
    values = target.values if isinstance(target, ShapeExpr) else getattr(target.struct_info, "values", None)
    if shape is None or values is None:
        return []
    count_in = _product(shape)
    inferred = [i for i, d in enumerate(values) if isinstance(d, E.IntImm) and d.value < 0]
    if inferred:
        # -1 is count_in // (the other dims): the counts agree only when that divides exactly
        # (the kernel read the first elements of a (2, 4) tensor reshaped to (3, -1)); a zero
        # divisor stops the check itself with a ShapeDivisionByZeroError
        known = _product(d for i, d in enumerate(values) if i != inferred[0])
        count_out = known * E.FloorDiv(count_in, known)
    else:
        count_out = _product(values)
    return [(count_in, count_out, "elements", E.EQ(count_in, count_out))]


def _squeeze(call: Call):
    """Each squeezed dim is 1 (the kernel read index 0 of a longer one)."""
    shape, axis = _known_shape(call.args[0]), call.attrs.get("axis")
    if shape is None or axis is None:    # axis None drops only dims deduction proved 1
        return []
    dims = [shape[a % len(shape)] for a in sorted({a % len(shape) for a in axis})]
    return [(d, E.IntImm(1), "squeezed", E.EQ(d, E.IntImm(1))) for d in dims]


def _broadcast_to(call: Call):
    """Each input dim is 1 or its target dim (the kernel read past a shorter one)."""
    shape, target = _known_shape(call.args[0]), call.args[1].struct_info
    values = getattr(target, "values", None)
    if shape is None or values is None:
        return []
    offset = len(values) - len(shape)
    checks = []
    for i, d in enumerate(shape):
        want = values[offset + i]
        checks.append((E.Select(E.EQ(d, E.IntImm(1)), want, d), want, "broadcast",
                       E.Or(E.EQ(d, E.IntImm(1)), E.EQ(d, want))))
    return checks


def _topk(call: Call):
    """The axis is at least ``k`` long (the kernel padded the missing places with zeros)."""
    shape, k = _known_shape(call.args[0]), call.attrs["k"]
    if shape is None or k < 1:
        return []
    extent = shape[call.attrs["axis"] % len(shape)]
    # a new var whose lower bound is k: binding it checks the extent
    return [(extent, E.Var("topk_axis_length", "int64", lower=k), "topk", E.GE(extent, E.IntImm(k)))]


def _arg_reduce(call: Call):
    """argmax / argmin: the reduced axis (the whole tensor when axis is None) is not empty (the
    kernel gave the identity of its first-index search, 2**63 - 1, where NumPy raises)."""
    shape, axis = _known_shape(call.args[0]), call.attrs.get("axis")
    if shape is None:
        return []
    extent = _product(shape) if axis is None or not shape else shape[axis % len(shape)]
    name = call.op.name.rsplit(".", 1)[-1]
    return [(extent, E.Var(f"{name}_axis_length", "int64", lower=1), name, E.GE(extent, E.IntImm(1)))]


_GUARDS = {"relax.reshape": _reshape, "relax.squeeze": _squeeze, "relax.broadcast_to": _broadcast_to,
           "relax.topk": _topk, "relax.argmax": _arg_reduce, "relax.argmin": _arg_reduce}


def emit_guards(bb, call: Call, name: str) -> list[str]:
    """Emit, before ``call``, the checks of ``call`` that ``bb``'s analyzer cannot prove; the
    names of the checks emitted."""
    guard = _GUARDS.get(getattr(call.op, "name", None))
    if guard is None:
        return []
    emitted = []
    for actual, expected, suffix, claim in guard(call):
        if _proven(bb.analyzer, claim):
            continue
        check = f"{name}_{suffix}"
        bb.match_cast(ShapeExpr([actual]), ShapeStructInfo([expected]), check)
        emitted.append(check)
    return emitted


def _proven(analyzer, claim) -> bool:
    if isinstance(claim, E.EQ):
        return analyzer.can_prove_equal(claim.a, claim.b)
    if isinstance(claim, E.Or):
        return _proven(analyzer, claim.a) or _proven(analyzer, claim.b)
    return analyzer.can_prove(claim)


__all__ = ["emit_guards"]
