"""Graph-level passes on modules whose values hold loop-level nodes of the same class names.

``R.prim_value(T.exp(1.0))`` holds a loop-level ``Call``, ``R.shape([n * 2])`` a loop-level
``Var``; the graph level has its own ``Call``, ``Var`` and ``StringImm``. With dispatch keyed on
class names, LambdaLift's ``visit_Call`` was handed the loop-level call and crashed. The VM
computes such values from Python source, which must agree exactly with the interpreter
(intrinsic calls, float32 rounding after every operation).
"""
import numpy as np
import pytest

import relaxscript as rx
from tests.targets import VM_TARGETS
from relaxscript import transform
from relaxscript.transform.testing import assert_pass_preserves

from .test_vm_run import assert_same

SOURCE = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        @R.function
        def scale(y: R.Tensor(("n",), "float32")):
            k = R.prim_value(T.exp(1.0))
            z = R.multiply(y, x)
            return (z, k)
        with R.dataflow():
            a = R.exp(x)
            R.output(a)
        e = R.prim_value(T.exp(1.0))
        f = R.prim_value(T.exp(1.0) * T.float32(0.1) + T.float32(1e-3))
        b = R.prim_value(3 < n or n < 2)
        s = R.str("exp")
        shape = R.shape([n * 2])
        out = scale(a)
        return (out, e, f, b, s, shape)
'''

GRAPH_PASSES = ["LambdaLift", "InlineFunctions", "CanonicalizeBindings", "FoldConstant",
                "DeadCodeElimination", "DispatchLibrary", "LegalizeOps"]


def module():
    return rx.from_source(SOURCE)


@pytest.mark.parametrize("name", GRAPH_PASSES)
def test_graph_pass_keeps_loop_level_values(name):
    assert_pass_preserves(getattr(transform, name)(), module())


def test_lambda_lift_lifts_the_function_holding_a_loop_level_call():
    after = transform.LambdaLift()(module())
    assert "main_scale" in after
    x = np.arange(3, dtype="float32")
    assert_same(rx.interpret(after, "main", x), rx.interpret(module(), "main", x))


@pytest.mark.parametrize("target", VM_TARGETS)
def test_whole_pipeline_runs_it_like_the_interpreter(target):
    lifted = transform.LambdaLift()(module())
    vm = rx.VirtualMachine(rx.build(lifted, target=target))
    for n in (1, 5):
        x = np.linspace(-1, 1, n, dtype="float32")
        assert_same(vm["main"](x), rx.interpret(module(), "main", x))
