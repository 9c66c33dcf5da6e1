"""DeadCodeElimination: exact before/after modules and the reachability rules."""
import numpy as np
import pytest

import relaxscript as rx
from relaxscript.transform import DeadCodeElimination
from relaxscript.transform.testing import assert_pass_preserves

BEFORE = '''
@R.ir_module
class Module:
    @T.prim_func
    def neg(X: T.Buffer(("n",), "float32"), Y: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in T.serial(n):
            with T.block("neg"):
                vi = T.axis.remap("S", [i])
                Y[vi] = -X[vi]

    @T.prim_func
    def orphan(X: T.Buffer((4,), "float32"), Y: T.Buffer((4,), "float32")):
        for i in T.serial(4):
            with T.block("copy"):
                vi = T.axis.remap("S", [i])
                Y[vi] = X[vi]

    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        with R.dataflow():
            dead0 = R.exp(x)
            dead1 = R.add(dead0, x)
            dead_call = Module.unused(x)
            lv0 = R.call_tir(Module.neg, [x], R.Tensor((n,), "float32"))
            gv = R.nn.relu(lv0)
            R.output(gv)
        with R.dataflow():
            only_dead = R.exp(gv)
            R.output(only_dead)
        checked = R.match_cast(gv, R.Tensor(ndim=1, dtype="float32"))
        return gv

    @R.function
    def unused(x: R.Tensor(("n",), "float32")):
        return x
'''

AFTER = '''
@R.ir_module
class Module:
    @T.prim_func
    def neg(X: T.Buffer(("n",), "float32"), Y: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in T.serial(n):
            with T.block("neg"):
                vi = T.axis.remap("S", [i])
                Y[vi] = -X[vi]

    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(Module.neg, [x], R.Tensor((n,), "float32"))
            gv = R.nn.relu(lv0)
            R.output(gv)
        checked = R.match_cast(gv, R.Tensor(ndim=1, dtype="float32"))
        return gv
'''


def test_removes_dead_bindings_blocks_and_functions_exactly():
    before = rx.from_source(BEFORE)
    after = assert_pass_preserves(DeadCodeElimination(), before)
    rx.assert_structural_equal(after, rx.from_source(AFTER))


def test_keeps_impure_calls():
    text = '''
@R.function(pure=False)
def main(x: R.Tensor((4,), "float32")):
    unused = R.call_packed("test.effect", x, sinfo_args=R.Object)
    return x
'''
    func = rx.from_source(text)
    mod = rx.IRModule({"main": func})
    assert DeadCodeElimination()(mod) is mod


def recursive_local_module(use_it: bool) -> rx.IRModule:
    """``main`` binds a local function ``loop`` that calls itself (the parser has no syntax for it)."""
    sinfo = rx.TensorStructInfo((2,), "float32")
    loop = rx.Var("loop", rx.FuncStructInfo([sinfo], sinfo))
    y, z = rx.Var("y", sinfo), rx.Var("z", sinfo)
    body = rx.SeqExpr([rx.BindingBlock([rx.VarBinding(z, rx.Call(loop, [y]))])], z)
    bb = rx.BlockBuilder()
    x = rx.Var("x", sinfo)
    with bb.function("main", [x]):
        bb.emit_normalized(rx.VarBinding(loop, bb.normalize(rx.Function([y], body, sinfo))))
        out = bb.emit(rx.Call(loop, [x])) if use_it else x
        bb.emit_func_output(out)
    return bb.get()


def test_dead_recursive_local_function_is_removed():
    after = DeadCodeElimination()(recursive_local_module(use_it=False))
    assert not after["main"].body.blocks
    kept = recursive_local_module(use_it=True)
    assert DeadCodeElimination()(kept) is kept


def test_entry_rules():
    mod = rx.from_source(BEFORE)
    # Explicit entries keep exactly what they reach.
    only_unused = DeadCodeElimination(entry_functions=["unused"])(mod)
    assert sorted(only_unused.functions) == ["unused"]
    # global_symbol marks public functions.
    public = mod.with_function("unused", mod["unused"].replace(attrs={"global_symbol": "unused"}))
    kept = DeadCodeElimination()(public)
    assert sorted(kept.functions) == ["unused"]
    with pytest.raises(ValueError, match="nope"):
        DeadCodeElimination(entry_functions=["nope"])(mod)


def test_without_main_uncalled_functions_are_entries():
    mod = rx.from_source(BEFORE)
    renamed = rx.IRModule({("top" if k == "main" else k): v for k, v in mod.functions.items()})
    # main's body names Module.unused only in a dead binding, so both graph functions are uncalled roots.
    after = DeadCodeElimination()(renamed)
    assert sorted(after.functions) == ["neg", "top", "unused"]
    x = np.arange(3, dtype="float32")
    np.testing.assert_array_equal(rx.interpret(after, "top", x), np.maximum(-x, 0))


def test_module_of_prim_funcs_only_is_kept():
    mod = rx.from_source(BEFORE)
    prims = rx.IRModule(mod.prim_funcs)
    assert sorted(DeadCodeElimination()(prims).functions) == ["neg", "orphan"]
