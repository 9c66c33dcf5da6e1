"""Helpers of the LegalizeOps tests (the file name keeps them with the tests they serve):
one-op modules over symbolic shapes, bindings of the symbolic vars, and the
before/after comparison under the reference interpreter."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from relaxscript.analysis.well_formed import check_well_formed
from relaxscript.block_builder import BlockBuilder
from relaxscript.expr import Call, Function, Op, Var
from relaxscript.struct_info import TensorStructInfo
from relaxscript.transform import LegalizeOps
from tensorir.functor import collect

SYMBOL_NAMES = ("n", "m")
TOLERANCE = {"float16": (2e-2, 2e-2), "float32": (2e-5, 2e-5), "float64": (1e-10, 1e-10)}


def symbols():
    """Fresh symbolic vars per module (so modules never share Var objects)."""
    return {name: tir.size_var(name) for name in SYMBOL_NAMES}


@st.composite
def shape_templates(draw, min_ndim=1, max_ndim=3):
    """Dims as ints 1..3 or symbol names."""
    ndim = draw(st.integers(min_ndim, max_ndim))
    return [draw(st.one_of(st.integers(1, 3), st.sampled_from(SYMBOL_NAMES))) for _ in range(ndim)]


@st.composite
def bindings(draw, count=2, low=1, high=4):
    return [{name: draw(st.integers(low, high)) for name in SYMBOL_NAMES} for _ in range(count)]


def symbolic(template, syms):
    return tuple(syms[d] if isinstance(d, str) else d for d in template)


def concrete(template, env):
    return tuple(env[d] if isinstance(d, str) else d for d in template)


def random_array(rng, shape, dtype, low=-2.0, high=2.0):
    if dtype == "bool":
        return rng.random(shape) > 0.5
    if tir.dtype.is_float(dtype):
        return rng.uniform(low, high, size=shape).astype(dtype)
    return rng.integers(int(low), int(high) + 1, size=shape).astype(dtype)


def one_op_module(make, sinfos):
    """``main(x0, x1, ...)`` returning ``make(x0, x1, ...)``, built with the BlockBuilder."""
    params = [Var(f"x{i}", s) for i, s in enumerate(sinfos)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(make(*params)))
        bb.emit_func_output(out)
    return bb.get()


def op_calls(mod) -> list[str]:
    """Names of the operators called by graph-level functions of ``mod``."""
    names = []
    for func in mod.functions.values():
        if isinstance(func, Function):
            names += [c.op.name for c in collect(func, lambda n: isinstance(n, Call))
                      if isinstance(c.op, Op)]
    return names


def assert_close(expected, actual):
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for e, a in zip(expected, actual):
            assert_close(e, a)
        return
    expected, actual = np.asarray(expected), np.asarray(actual)
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, \
        (actual.dtype, actual.shape, expected.dtype, expected.shape)
    if expected.dtype.kind == "f":
        rtol, atol = TOLERANCE[expected.dtype.name]
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(actual, expected)


def legalize_and_check(mod, input_sets, full=True):
    """Legalize; check round trip, well-formedness, that no op call is left (``full``),
    and equal interpreter results on every input set. Returns the legalized module."""
    legalized = LegalizeOps()(mod)
    if full:
        assert set(op_calls(legalized)) <= {"relax.call_tir"}, op_calls(legalized)
    check_well_formed(legalized)
    rx.assert_structural_equal(legalized, rx.from_source(legalized.script()))
    for arrays in input_sets:
        assert_close(rx.interpret(mod, "main", *arrays), rx.interpret(legalized, "main", *arrays))
    return legalized


def check_one_op(make, templates, dtypes, envs, seed=0, low=-2.0, high=2.0, full=True):
    """Build ``make`` over tensors of symbolic ``templates``; compare on every binding."""
    syms = symbols()
    sinfos = [TensorStructInfo(symbolic(t, syms), d) for t, d in zip(templates, dtypes)]
    mod = one_op_module(make, sinfos)
    rng = np.random.default_rng(seed)
    # ``low`` / ``high``: one bound for every operand, or one per operand
    lows = list(low) if isinstance(low, (tuple, list)) else [low] * len(templates)
    highs = list(high) if isinstance(high, (tuple, list)) else [high] * len(templates)
    inputs = [[random_array(rng, concrete(t, env), d, lo, hi)
               for t, d, lo, hi in zip(templates, dtypes, lows, highs)]
              for env in envs]
    return legalize_and_check(mod, inputs, full)
