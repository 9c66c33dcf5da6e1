"""Shared helpers of the test_op_* files: symbolic shapes, argument values,
and the check that a deduced annotation matches what the NumPy reference
produces at concrete values of the symbolic variables.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import tensorir as tir
from relaxscript.expr import Constant, PrimValue, ShapeExpr, Tuple, Var
from relaxscript.op import DeductionContext, get_op_spec
from relaxscript.op.registry import reference_attrs
from relaxscript.struct_info import (ObjectStructInfo, PrimStructInfo, ShapeStructInfo, TensorStructInfo,
                                     TupleStructInfo)
from tensorir.arith.evaluate import evaluate

SYMBOLS = [tir.size_var(name) for name in ("n", "m", "k")]


def tensor_var(name, shape, dtype="float32", ndim=-1) -> Var:
    return Var(name, TensorStructInfo(shape, dtype, ndim))


def infer(call, analyzer=None):
    return get_op_spec(call.op.name).infer(call, DeductionContext(analyzer))


@st.composite
def environments(draw):
    """Values 1..6 for every symbolic variable."""
    return {v: draw(st.integers(1, 6)) for v in SYMBOLS}


@st.composite
def symbolic_shapes(draw, min_ndim=0, max_ndim=4):
    """A shape whose dims are constants 1..6 or symbolic variables."""
    ndim = draw(st.integers(min_ndim, max_ndim))
    dim = st.one_of(st.integers(1, 6).map(tir.const), st.sampled_from(SYMBOLS))
    return tuple(draw(dim) for _ in range(ndim))


def shape_equal(shape, dims) -> bool:
    """Structural equality of a deduced shape with dims given as ints/PrimExprs."""
    return shape is not None and len(shape) == len(dims) and all(
        tir.structural_equal(a, tir.convert(b)) for a, b in zip(shape, dims))


def concrete(dims, env) -> tuple[int, ...]:
    return tuple(int(evaluate(d, env)) for d in dims)


def random_array(rng, shape, dtype) -> np.ndarray:
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if dtype.startswith("int") or dtype.startswith("uint"):
        return rng.integers(1, 6, size=shape).astype(dtype)  # no zeros: division is defined
    return rng.standard_normal(shape).astype(dtype)


def arg_value(arg, env, rng, arrays):
    """The run-time value of a call argument (``arrays`` overrides Vars by name)."""
    if isinstance(arg, Var):
        if arg.name_hint in arrays:
            return arrays[arg.name_hint]
        sinfo = arg.struct_info
        return random_array(rng, concrete(sinfo.shape, env), sinfo.dtype)
    if isinstance(arg, Constant):
        return arg.data
    if isinstance(arg, ShapeExpr):
        return tuple(int(evaluate(v, env)) for v in arg.values)
    if isinstance(arg, PrimValue):
        return evaluate(arg.value, env)
    if isinstance(arg, Tuple):
        return tuple(arg_value(f, env, rng, arrays) for f in arg.fields)
    raise TypeError(f"no value for {arg!r}")


def run_reference(call, env, rng, arrays=None):
    spec = get_op_spec(call.op.name)
    args = [arg_value(a, env, rng, arrays or {}) for a in call.args]
    with np.errstate(all="ignore"):
        return spec.reference(*args, **reference_attrs(call))


def assert_matches(sinfo, value, env, exact: bool = True) -> None:
    """``value`` (the reference's result) fits ``sinfo``; with ``exact`` the shape must be known."""
    if isinstance(sinfo, TupleStructInfo):
        assert isinstance(value, tuple) and len(value) == len(sinfo.fields)
        for s, v in zip(sinfo.fields, value):
            assert_matches(s, v, env, exact)
        return
    if isinstance(sinfo, ShapeStructInfo):
        assert sinfo.values is not None or not exact
        if sinfo.values is not None:
            assert concrete(sinfo.values, env) == tuple(value)
        return
    if isinstance(sinfo, ObjectStructInfo):  # R.null_value(): the empty object
        assert value is None, value
        return
    assert isinstance(sinfo, TensorStructInfo), sinfo
    assert isinstance(value, np.ndarray), type(value)
    assert sinfo.dtype == value.dtype.name, (sinfo.dtype, value.dtype)
    if sinfo.ndim >= 0:
        assert sinfo.ndim == value.ndim, (sinfo.ndim, value.shape)
    if exact:
        assert sinfo.shape is not None, f"deduction lost the shape: {sinfo!r}"
    if sinfo.shape is not None:
        assert concrete(sinfo.shape, env) == value.shape, (sinfo.shape, value.shape)


def check_call(call, env, rng, arrays=None, exact=True):
    """Deduce ``call`` and compare with the reference at ``env``; returns the annotation."""
    sinfo = infer(call)
    assert_matches(sinfo, run_reference(call, env, rng, arrays), env, exact)
    return sinfo


__all__ = ["SYMBOLS", "tensor_var", "infer", "environments", "symbolic_shapes", "concrete", "shape_equal",
           "random_array", "arg_value", "run_reference", "assert_matches", "check_call",
           "PrimStructInfo"]


def valid_index_arrays(env, rng) -> dict:
    """In-range index tensors for the sample calls that index by value (test_op_registry):
    ``idx`` rows of ``x`` (n, 4), ``nd`` positions in the leading (2, n) dims of ``x3``,
    ``se`` rows of ``x`` for scatter_elements, ``nt`` classes of ``x3`` (2, n, 4) for nll_loss
    (with -1, the ignored class there), ``ge`` positions in the last axis of ``x3`` for
    gather_elements, ``ip0``/``ip1`` rows and columns of ``x`` for index_put, ``ms`` rows of the
    (n, 4) probabilities of multinomial_from_uniform."""
    n, m = env[SYMBOLS[0]], env[SYMBOLS[1]]
    nd = np.stack([rng.integers(-2, 2, size=m), rng.integers(-n, n, size=m)], axis=1)
    return {"idx": rng.integers(-n, n, size=m), "nd": nd.astype("int64"),
            "se": rng.integers(-n, n, size=(2, 4)).astype("int64"),
            "nt": rng.integers(-1, n, size=(2, 4)).astype("int64"),
            "ge": rng.integers(-4, 4, size=(1, n, 3)).astype("int64"),
            "ip0": rng.integers(-n, n, size=m).astype("int64"),
            "ip1": rng.integers(-4, 4, size=m).astype("int64"),
            "ms": rng.integers(-n, n, size=(m, 1)).astype("int64")}
