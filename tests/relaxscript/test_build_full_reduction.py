"""A reduction over every axis followed by an elementwise op builds and runs like the
interpreter (the row-reduction schedule rule once indexed the missing row loop)."""
import numpy as np
import pytest

import relaxscript as rx
from tests.targets import VM_TARGETS

SOURCE = '''from relaxscript import R
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(({rows}, 8), "float32")):
        with R.dataflow():
            lv = R.{reduce}(x{keepdims})
            gv = R.{elementwise}(lv)
            R.output(gv)
        return gv
'''


@pytest.mark.parametrize("target", VM_TARGETS)
@pytest.mark.parametrize("keepdims", [False, True], ids=["0d", "keepdims"])
@pytest.mark.parametrize("rows", ["4", '"n"'], ids=["static", "symbolic"])
@pytest.mark.parametrize("elementwise", ["exp", "nn.relu"])
@pytest.mark.parametrize("reduce", ["sum", "max", "mean"])
def test_full_reduction_then_elementwise_builds(reduce, elementwise, rows, keepdims, target):
    mod = rx.from_source(SOURCE.format(rows=rows, reduce=reduce, elementwise=elementwise,
                                       keepdims=", keepdims=True" if keepdims else ""))
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    rng = np.random.default_rng(0)
    for n in ([4] if rows == "4" else [1, 5]):
        x = rng.standard_normal((n, 8)).astype("float32")
        expected = rx.interpret(mod, "main", x)
        got = vm["main"](x)
        assert got.shape == expected.shape == ((1, 1) if keepdims else ())
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)
