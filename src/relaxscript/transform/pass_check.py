"""Checking a pass with the reference interpreter on random inputs and random symbolic values."""
from __future__ import annotations

import numpy as np

from tensorir.expr import Var

from ..expr import Function
from ..struct_info import PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo
from .pass_infra import PassCheckError


def _draw_var(var: Var, rng, zero_chance: float = 0.0, one_chance: float = 0.0) -> int:
    may_be_zero = (var.lower is None or var.lower <= 0) and (var.upper is None or var.upper >= 0)
    if may_be_zero and zero_chance and rng.random() < zero_chance:
        return 0   # empty tensors, empty reductions
    may_be_one = (var.lower is None or var.lower <= 1) and (var.upper is None or var.upper >= 1) \
        and var.multiple_of in (None, 0, 1)
    if may_be_one and one_chance and rng.random() < one_chance:
        return 1   # a symbolic dim that is 1 at run time: broadcasting and squeezing take it
    lo = max(1, var.lower if var.lower is not None else 1)
    hi = min(var.upper, lo + 7) if var.upper is not None else lo + 7
    value = int(rng.integers(lo, max(lo, hi) + 1))
    if var.multiple_of:
        value = max(var.multiple_of, value - value % var.multiple_of)
    return value


def _value_for(sinfo, env: dict, rng, zero_chance: float = 0.0, one_chance: float = 0.0):
    from tensorir.arith import evaluate
    if isinstance(sinfo, TensorStructInfo):
        if sinfo.shape is None:
            raise PassCheckError("cannot draw inputs for a parameter of unknown shape")
        for dim in sinfo.shape:
            if isinstance(dim, Var) and dim not in env:
                env[dim] = _draw_var(dim, rng, zero_chance, one_chance)
        shape = tuple(int(evaluate(d, env)) for d in sinfo.shape)
        dtype = sinfo.dtype or "float32"
        if dtype.startswith("float"):
            return rng.standard_normal(shape).astype(dtype)
        if dtype == "bool":
            return rng.integers(0, 2, shape).astype(bool)
        return rng.integers(0, 4, shape).astype(dtype)
    if isinstance(sinfo, ShapeStructInfo) and sinfo.values is not None:
        for dim in sinfo.values:
            if isinstance(dim, Var) and dim not in env:
                env[dim] = _draw_var(dim, rng, zero_chance, one_chance)
        return tuple(int(evaluate(d, env)) for d in sinfo.values)
    if isinstance(sinfo, TupleStructInfo):
        return tuple(_value_for(f, env, rng, zero_chance, one_chance) for f in sinfo.fields)
    if isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None:
            return int(evaluate(sinfo.value, env))
        return int(rng.integers(1, 5)) if not sinfo.dtype.startswith("float") else float(rng.standard_normal())
    raise PassCheckError(f"cannot draw an input for annotation {sinfo!r}")


def random_inputs(func: Function, rng, zero_chance: float = 0.0, one_chance: float = 0.0) -> list:
    """Random arguments for ``func`` with symbolic vars drawn in small ranges that respect their
    facts; each var whose facts allow it is 0 with probability ``zero_chance``, else 1 with
    probability ``one_chance``."""
    env: dict = {}
    return [_value_for(p.struct_info, env, rng, zero_chance, one_chance) for p in func.params]


def _same(a, b, rtol, atol) -> bool:
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and \
            all(_same(x, y, rtol, atol) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind == "f":
        return bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(a, b))


def public_functions(mod) -> list[str]:
    names = [n for n, f in mod.relax_functions.items() if "global_symbol" in f.attrs]
    return names or [n for n in mod.relax_functions if n == "main"] or list(mod.relax_functions)[:1]


def check_kept_privacy(pass_name: str, before, after) -> None:
    """Every function the pass keeps keeps ``@R.function(private=True)`` (or its absence): privacy is
    not part of structural equality, and a private function that turned public would become a build's
    entry (vm/build.py's mark_entry_functions)."""
    for name, func in before.relax_functions.items():
        kept = after.relax_functions.get(name)
        if kept is not None and kept.is_private != func.is_private:
            raise PassCheckError(f"pass {pass_name} made function {name!r} "
                                 f"{'public' if func.is_private else 'private'}")


def check_same_results(pass_name: str, before, after, ctx) -> None:
    from ..interpreter import interpret
    rng = np.random.default_rng(ctx.check_seed)
    for name in public_functions(before):
        if name not in after.relax_functions:
            continue
        for _ in range(ctx.check_samples):
            args = random_inputs(before[name], rng)
            expected = interpret(before, name, *args)
            actual = interpret(after, name, *args)
            if not _same(expected, actual, ctx.rtol, ctx.atol):
                raise PassCheckError(f"pass {pass_name} changed the result of function {name!r} "
                                     f"for inputs of shapes {[getattr(a, 'shape', a) for a in args]}")
