"""FoldConstant: exact before/after modules, call_tir folding, and what must not fold."""
import numpy as np

import relaxscript as rx
from relaxscript.transform import DeadCodeElimination, FoldConstant, Sequential
from relaxscript.transform.testing import assert_pass_preserves

BEFORE = '''
@R.ir_module
class Module:
    @T.prim_func
    def add_one(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        for i in T.serial(4):
            with T.block("add_one"):
                vi = T.axis.remap("S", [i])
                Y[vi] = X[vi] + T.float32(1)

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            c = R.const([0.0, 1.0, 2.0, 3.0], "float32")
            lv0 = R.multiply(c, c)
            lv1 = R.call_tir(Module.add_one, [lv0], R.Tensor((4,), "float32"))
            parts = R.split(lv1, 2)
            zeros = R.zeros(R.shape([n, 4]), "float32")
            gv = R.add(R.add(zeros, lv1), x)
            R.output(gv, parts)
        return (gv, parts)
'''

AFTER = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            lv1 = R.const([1.0, 2.0, 5.0, 10.0], "float32")
            parts = (R.const([1.0, 2.0], "float32"), R.const([5.0, 10.0], "float32"))
            zeros = R.zeros(R.shape([n, 4]), "float32")
            lv = R.add(zeros, lv1)
            gv = R.add(lv, x)
            R.output(gv, parts)
        return (gv, parts)
'''


def test_folds_chains_call_tir_and_tuples_exactly():
    before = rx.from_source(BEFORE)
    folded = assert_pass_preserves(FoldConstant(), before)
    cleaned = Sequential([FoldConstant(), DeadCodeElimination()])(before)
    rx.assert_structural_equal(cleaned, rx.from_source(AFTER))
    # the symbolic-shape zeros is not folded
    assert "R.zeros" in folded.script()


def test_size_limit_and_impure_calls_are_left_alone():
    text = '''
@R.function(pure=False)
def main(x: R.Tensor((4,), "float32")):
    c = R.const([1.0, 2.0, 3.0, 4.0], "float32")
    big = R.exp(c)
    effect = R.call_packed("test.effect", c, sinfo_args=R.Object)
    return big
'''
    mod = rx.IRModule({"main": rx.from_source(text)})
    assert FoldConstant(max_elements=3)(mod) is mod
    folded = FoldConstant(max_elements=4)(mod)
    values = [b.value for b in folded["main"].body.blocks[0].bindings]
    assert isinstance(values[1], rx.Constant)
    np.testing.assert_allclose(values[1].data, np.exp(np.float32([1, 2, 3, 4])))
    assert isinstance(values[2], rx.Call)


def test_reshape_then_reduction_fold_to_one_constant():
    text = '''
@R.function
def main(x: R.Tensor((4,), "float32")):
    c = R.const([1.0, 2.0, 3.0, 4.0], "float32")
    lv = R.reshape(c, R.shape([2, 2]))
    lv2 = R.sum(lv, axis=0)
    return lv2
'''
    mod = rx.IRModule({"main": rx.from_source(text)})
    after = assert_pass_preserves(FoldConstant(), mod)
    assert isinstance(after["main"].body.blocks[0].bindings[-1].value, rx.Constant)
