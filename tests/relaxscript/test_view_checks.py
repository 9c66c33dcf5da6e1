"""Run-time checks of view-like ops hold on every pipeline and target (s12-fuzz).

A reshape whose element counts differ at run time, a squeeze of a symbolic dim that is not 1,
a broadcast_to of a dim that is neither 1 nor its target, a topk of an axis shorter than k:
their kernels read past the input or return its first elements, where NumPy raises. The checks
used to live only in ApplyShapeConstraints (an optimization pass), so a pipeline without it
returned the first 6 elements of a (2, 4) tensor reshaped to (3, -1); a squeeze and a
broadcast_to were unchecked on every pipeline. LegalizeOps now puts them before the kernel
(``legalize/guards.py``) unless the facts at that place prove them.
"""
import numpy as np
import pytest

import relaxscript as rx
from relaxscript.transform import CallTIRRewrite, LegalizeOps
from relaxscript.transform.apply_shape_constraints import ApplyShapeConstraints
from relaxscript.vm.instructions import MatchValues

SOURCE = '''from relaxscript import R
from tensorir import T
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), s: R.Shape(SHAPE)):
        k = T.int64()
        j = T.int64()
        with R.dataflow():
            a = EXPR
            b = R.multiply(a, R.const(2.0, "float32"))
            R.output(b)
        return b
'''

# name -> (shape parameter, expression, NumPy of (x, s), check name)
CASES = {
    "reshape -1": ('["k"]', "R.reshape(x, R.shape([3, -1]))", lambda x, s: x.reshape(3, -1), "a_elements"),
    "reshape -1 and k": ('["k"]', "R.reshape(x, R.shape([2, -1, k]))", lambda x, s: x.reshape(2, -1, s[0]),
                         "a_elements"),
    "reshape to a shape argument": ('["k", "j"]', "R.reshape(x, s)", lambda x, s: x.reshape(s), "a_elements"),
    "reshape to symbolic dims": ('["k", "j"]', "R.reshape(x, R.shape([k, j]))", lambda x, s: x.reshape(s),
                                 "a_elements"),
    "squeeze a symbolic dim": ('["k"]', "R.squeeze(x, axis=[-1])", lambda x, s: np.squeeze(x, -1), "a_squeezed"),
    "broadcast_to symbolic dims": ('["k", "j"]', "R.broadcast_to(x, R.shape([k, j]))",
                                   lambda x, s: np.broadcast_to(x, s), "a_broadcast"),
    "topk": ('["k"]', "R.topk(x, 3, axis=-1)[0]", lambda x, s: _top3(x), "_topk"),
}


def _top3(x):
    if x.shape[-1] < 3:
        raise ValueError("an axis shorter than k")     # as the reference interpreter does
    return -np.sort(-x, axis=-1)[..., :3]

# (x shape, s): right and wrong run-time shapes for every case
ARGS = [((2, 4), (3, 2)), ((2, 4), (4, 2)), ((2, 4), (1, 8)), ((2, 4), (2, 4)), ((2, 1), (2, 3)),
        ((3, 1), (3, 1)), ((2, 3), (16, 0)), ((1, 4), (2, 4)), ((0, 4), (0, 5)), ((2, 3), (6, 1))]


def _pipelines(target):
    return {"default": None,
            "without ApplyShapeConstraints": [p for p in rx.get_pipeline(target)
                                              if not isinstance(p, ApplyShapeConstraints)],
            "legalize only": [LegalizeOps(), CallTIRRewrite()]}


@pytest.fixture(scope="module")
def machines():
    built = {}
    for case, (shape, expr, _, _) in CASES.items():
        mod = rx.from_source(SOURCE.replace("SHAPE", shape).replace("EXPR", expr))
        for target in ("c", "interp"):
            for pipeline, passes in _pipelines(target).items():
                built[case, target, pipeline] = rx.VirtualMachine(rx.build(mod, target=target, pipeline=passes))
    return built


@pytest.mark.parametrize("pipeline", ["default", "without ApplyShapeConstraints", "legalize only"])
@pytest.mark.parametrize("target", ["c", "interp"])
@pytest.mark.parametrize("case", list(CASES))
def test_view_ops_check_their_shapes_on_every_pipeline(machines, case, target, pipeline):
    shape, _, reference, check = CASES[case]
    vm = machines[case, target, pipeline]
    for x_shape, s in ARGS:
        s = s[:shape.count('"') // 2]
        x = np.random.default_rng(len(s)).standard_normal(x_shape).astype("float32")
        try:
            want = reference(x, s) * 2
        except ValueError:
            with pytest.raises(rx.ShapeMismatchError, match=f"function 'main'.*{check}"):
                vm["main"](x, s)
        else:
            np.testing.assert_array_equal(vm["main"](x, s), want, err_msg=f"{case} {x_shape} {s}")


FACT_SOURCE = '''from relaxscript import R
from tensorir import T
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c",), "float32")):
        R.func_attr({"global_symbol": "main"})
        a = T.int64()
        b = T.int64()
        c = T.int64()
        R.assert_op(R.prim_value(a * b == c), format="x and y must hold as many elements")
        with R.dataflow():
            r = R.reshape(x, R.shape([c]))
            z = R.add(r, y)
            R.output(z)
        return z

    @R.function
    def other(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c",), "float32")):
        R.func_attr({"global_symbol": "other"})
        a = T.int64()
        b = T.int64()
        c = T.int64()
        with R.dataflow():
            r = R.reshape(x, R.shape([c]))
            z = R.add(r, y)
            R.output(z)
        return z
'''


def _checks(ex, name):
    return [i.name for i in ex.functions[name].code if isinstance(i, MatchValues)]


@pytest.mark.parametrize("with_pass", [True, False])
def test_a_proven_reshape_costs_no_check_and_an_equal_unproven_one_keeps_it(with_pass):
    """``main``'s fact proves its reshape (no check at all); ``other`` makes the same call
    (equal up to renaming, so its kernel comes from the legalization cache) without the fact:
    it keeps its check."""
    passes = None if with_pass else [p for p in rx.get_pipeline("c") if not isinstance(p, ApplyShapeConstraints)]
    ex = rx.build(rx.from_source(FACT_SOURCE), target="c", pipeline=passes)
    assert not any("elements" in str(n) for n in _checks(ex, "main"))
    assert any("r_elements" in str(n) for n in _checks(ex, "other"))
    vm = rx.VirtualMachine(ex)
    x, y = np.ones((2, 3), "float32"), np.arange(6, dtype="float32")
    np.testing.assert_array_equal(vm["other"](x, y), x.ravel() + y)
    with pytest.raises(rx.ShapeMismatchError, match="function 'other'.*r_elements"):
        vm["other"](x, y[:5])
    with pytest.raises(AssertionError, match="as many elements"):
        vm["main"](x, y[:5])


_EMPTY_RESHAPE = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), "float32")):
        n = T.int64()
        y = R.reshape(x, R.shape([n, -1]))
        return y
'''


@pytest.mark.parametrize("n", [0, 2])
def test_reshape_with_minus_one_of_no_elements_gets_the_deduced_shape(n):
    """(n, 3) -> (n, -1) is (n, 3) for every n, 0 included: NumPy cannot infer a -1 of no elements
    (any value fits), so the reference takes the deduced shape, as every build does (found by the
    random view programs: the reference raised where the builds returned (0, 3))."""
    mod = rx.from_source(_EMPTY_RESHAPE)
    x = np.arange(3 * n, dtype=np.float32).reshape(n, 3)
    np.testing.assert_array_equal(rx.interpret(mod, "main", x), x)
    for target in ("interp", "c"):
        np.testing.assert_array_equal(rx.VirtualMachine(rx.build(mod, target=target))["main"](x), x)
    assert rx.interpret(mod, "main", x).shape == (n, 3)
