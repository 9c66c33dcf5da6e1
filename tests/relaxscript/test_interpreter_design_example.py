"""DESIGN.md's example module, parsed from script and run by the interpreter
against a NumPy computation for several values of n."""
import numpy as np
import pytest

import relaxscript as rx
from tensorir.errors import ShapeMismatchError
from tests.relaxscript.design_module import DesignModule


def design_module():
    return DesignModule


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
