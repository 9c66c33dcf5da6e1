"""Random call_tir programs over symbolic shapes: planning never changes results,
never overlaps live tensors, never allocates more than the unplanned program."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
import relaxscript.interpreter as interp
from relaxscript import op
from relaxscript.block_builder import BlockBuilder
from relaxscript.expr import Tuple, Var
from relaxscript.struct_info import TensorStructInfo
from tensorir import compute as te
from tensorir import size_var
from tensorir.structural import structural_equal

from .test_memory_checker import check_no_overlap


def _kernel(name, body, n_inputs=1):
    """A prim_func over fresh (p, q) placeholders (buffers are never shared between functions)."""
    p, q = size_var("p"), size_var("q")
    inputs = [te.placeholder((p, q), "float32", nm) for nm in "xy"[:n_inputs]]
    return te.create_prim_func([*inputs, body(p, q, *inputs)], name)


def _row_sum(p, q, x):
    k = te.reduce_axis(q, "k")
    return te.compute((p, 1), lambda i, j: te.reduce_sum(x[i, k], [k]), "o")


def _kernels():
    # name: (prim_func, output shape from the first input's shape)
    return {
        "scale": (_kernel("scale", lambda p, q, x: te.compute((p, q), lambda i, j: x[i, j] * 0.5 + 1.0, "o")),
                  lambda s: s),
        "add": (_kernel("add", lambda p, q, x, y: te.compute((p, q), lambda i, j: x[i, j] + y[i, j], "o"), 2),
                lambda s: s),
        "transpose": (_kernel("transpose", lambda p, q, x: te.compute((q, p), lambda i, j: x[j, i], "o")),
                      lambda s: (s[1], s[0])),
        "tile": (_kernel("tile", lambda p, q, x: te.compute((p, q * 2), lambda i, j: x[i, j % q], "o")),
                 lambda s: (s[0], s[1] * 2)),
        "rowsum": (_kernel("rowsum", _row_sum), lambda s: (s[0], 1)),
    }


KERNELS = _kernels()
STEP = st.tuples(st.sampled_from(sorted(KERNELS)), st.integers(0, 1000), st.integers(0, 1000))


def build(steps, escape: int, bound: int | None):
    """A module whose main applies ``steps`` to values made so far, returning the last
    value and (when ``escape`` picks one) an earlier one in a tuple."""
    n = size_var("n", upper=bound) if bound else size_var("n")
    m = size_var("m")
    bb = BlockBuilder()
    gvars = {name: bb.add_func(func, name) for name, (func, _) in KERNELS.items()}
    x = Var("x", TensorStructInfo((n, m), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            values = [x]
            for name, a, b in steps:
                first = values[a % len(values)]
                args = [first]
                if name == "add":
                    shape = first.struct_info.shape
                    same = [v for v in values
                            if structural_equal(v.struct_info.shape, shape, map_free_vars=False)]
                    args.append(same[b % len(same)])
                shape = KERNELS[name][1](first.struct_info.shape)
                values.append(bb.emit(op.call_tir(gvars[name], args, TensorStructInfo(shape, "float32"))))
            outputs = [values[-1]] + ([values[escape % len(values)]] if escape else [])
            result = bb.emit_output(Tuple(outputs) if len(outputs) > 1 else outputs[0])
        bb.emit_func_output(result)
    return bb.get()


def _flatten(value):
    return list(value) if isinstance(value, tuple) else [value]


@settings(max_examples=25, deadline=None)
@given(steps=st.lists(STEP, min_size=1, max_size=8), escape=st.integers(0, 8),
       bound=st.sampled_from([None, 6]), seed=st.integers(0, 2**16))
def test_planned_programs_match_unplanned_ones(steps, escape, bound, seed):
    mod = build(steps, escape, bound)
    unplanned = rx.transform.CallTIRRewrite()(mod)
    planned = rx.transform.StaticPlanBlockMemory()(unplanned)
    rng = np.random.default_rng(seed)
    for n, m in ((1, 1), (int(rng.integers(1, 7)), int(rng.integers(1, 5))), (6, 3)):
        x = rng.standard_normal((n, m)).astype("float32")
        expected = _flatten(rx.interpret(unplanned, "main", x))
        unplanned_bytes = interp.last_run_stats().allocated_bytes
        got = _flatten(rx.interpret(planned, "main", x))
        planned_bytes = interp.last_run_stats().allocated_bytes
        for e, g in zip(expected, got):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
        if bound is None:  # a static plan sized at the bounds may exceed a small run's needs
            assert planned_bytes <= unplanned_bytes
        check_no_overlap(planned, {"n": n, "m": m})
    assert rx.analysis.well_formed(planned)
    rx.assert_structural_equal(rx.from_source(planned.script()), planned)


@settings(max_examples=10, deadline=None)
@given(steps=st.lists(STEP, min_size=2, max_size=8))
def test_static_plan_never_exceeds_unplanned_at_the_bound(steps):
    mod = build(steps, 0, 6)
    unplanned = rx.transform.CallTIRRewrite()(mod)
    planned = rx.transform.StaticPlanBlockMemory()(unplanned)
    info = rx.analysis.memory_plan_info(planned)["main"]
    if "m" not in " ".join(str(s.size) for s in info.storages):
        assert info.planned_bytes_at_bounds is not None
    x = np.ones((6, 2), "float32")
    rx.interpret(unplanned, "main", x)
    unplanned_bytes = interp.last_run_stats().allocated_bytes
    rx.interpret(planned, "main", x)
    assert interp.last_run_stats().allocated_bytes <= unplanned_bytes
    check_no_overlap(planned, {"n": 6, "m": 2})
