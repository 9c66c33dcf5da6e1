"""LambdaLift: exact before/after modules, captures, symbolic captures, recursion."""
import numpy as np

import relaxscript as rx
from relaxscript.transform import LambdaLift
from relaxscript.transform.testing import assert_pass_preserves

from .test_dce import recursive_local_module


def test_lifts_nested_functions_with_captures_exactly():
    before = rx.IRModule({"main": rx.from_source('''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    @R.function
    def outer(y: R.Tensor(("n", 4), "float32")):
        @R.function
        def inner(a: R.Tensor(ndim=2, dtype="float32")):
            b = R.reshape(a, R.shape([n * 4]))
            return b
        z = R.add(y, x)
        q = inner(z)
        return q
    lv = outer(x)
    return lv
''')})
    expected = rx.from_source('''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(ndim=1, dtype="float32"):
        n = T.int64()
        lv = Module.main_outer(x, x)
        return lv

    @R.function
    def main_inner(a: R.Tensor(ndim=2, dtype="float32"), shape_args: R.Shape(["n"])) -> R.Tensor(ndim=1, dtype="float32"):
        n = T.int64()
        b = R.reshape(a, R.shape([n * 4]))
        return b

    @R.function
    def main_outer(y: R.Tensor(("n", 4), "float32"), x: R.Tensor(("n", 4), "float32")) -> R.Tensor(ndim=1, dtype="float32"):
        n = T.int64()
        z = R.add(y, x)
        q = Module.main_inner(z, R.shape([n]))
        return q
''')
    after = assert_pass_preserves(LambdaLift(), before)
    rx.assert_structural_equal(after, expected)


def test_recursive_local_function_passes_its_captures_along():
    # loop(y) = loop(y) never terminates when run, so only the structure is checked.
    mod = recursive_local_module(use_it=True)
    after = LambdaLift()(mod)
    rx.analysis.check_well_formed(after)
    lifted = after["main_loop"]
    inner_call = lifted.body.blocks[0].bindings[0].value
    assert isinstance(inner_call.op, rx.GlobalVar) and inner_call.op.name_hint == "main_loop"
    rx.assert_structural_equal(rx.from_source(after.script()), after)


def test_capturing_function_used_as_value_stays_local():
    text = '''
@R.function
def main(x: R.Tensor((2,), "float32")):
    @R.function
    def add_x(y: R.Tensor((2,), "float32")):
        z = R.add(y, x)
        return z
    @R.function
    def plain(y: R.Tensor((2,), "float32")):
        z = R.exp(y)
        return z
    pair = (add_x, plain)
    f = pair[1]
    r = f(x)
    s = add_x(r)
    return s
'''
    mod = rx.IRModule({"main": rx.from_source(text)})
    after = assert_pass_preserves(LambdaLift(), mod)
    assert sorted(after.functions) == ["main", "main_plain"]
    x = np.float32([1.0, 2.0])
    np.testing.assert_allclose(rx.interpret(after, "main", x), np.exp(x) + x, rtol=1e-6)
