"""DESIGN.md's example module, parsed from script and run by the interpreter
against a NumPy computation for several values of n."""
import numpy as np
import pytest

pytest.importorskip("relaxscript.script.parser", reason="the relaxscript parser has not landed yet")

import relaxscript as rx  # noqa: E402
from relaxscript import R, function, ir_module  # noqa: E402
from tensorir import T, prim_func  # noqa: E402
from tensorir.errors import ShapeMismatchError  # noqa: E402


def design_module():
    @ir_module
    class Module:
        @prim_func
        def exp(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
            n = T.int64()
            for i, j in T.grid(n, 4):
                with T.block("exp"):
                    vi, vj = T.axis.remap("SS", [i, j])
                    y[vi, vj] = T.exp(x[vi, vj])

        @function
        def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n * 2",), "float32"):
            n = T.int64()
            with R.dataflow():
                lv0 = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "float32"))
                lv1 = R.call_dps_library("numpy.negative", [lv0], R.Tensor((n, 4), "float32"))
                R.output(lv1)
            lv2 = Module.flat(lv1)
            lv3 = R.split(lv2, 2)
            return lv3[0]

        @function
        def flat(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n * 4",), "float32"):
            n = T.int64()
            with R.dataflow():
                lv0 = R.reshape(x, R.shape([n * 4]))
                lv1 = R.nn.relu(lv0)
                R.output(lv1)
            return lv1

    return Module


@pytest.mark.parametrize("n", [1, 2, 5])
def test_design_example_matches_numpy(n):
    mod = design_module()
    x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
    seen = {}
    out = rx.interpret(mod, "main", x,
                       instrument=lambda func, var, value: seen.setdefault((func, var.name_hint), value))
    negated = -np.exp(x)
    np.testing.assert_allclose(seen[("main", "lv0")], np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(seen[("main", "lv1")], negated, rtol=1e-6)
    expected = np.maximum(negated.reshape(-1), 0)[: n * 2]
    assert out.shape == (n * 2,) and out.dtype == np.float32
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_allclose(rx.interpret(mod, "flat", x), np.maximum(x.reshape(-1), 0))


def test_design_example_rejects_a_wrong_argument():
    with pytest.raises(ShapeMismatchError, match=r"function 'main', parameter 'x'.*expected 4, got 3"):
        rx.interpret(design_module(), "main", np.zeros((2, 3), "float32"))
