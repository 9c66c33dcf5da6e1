"""CallTIRRewrite: call_tir / call_dps_library become explicit allocation + DPS calls (Figure 5)."""
from __future__ import annotations

import numpy as np

import relaxscript as rx
from relaxscript.expr import BindingBlock, DataflowBlock, DataflowVar

from .test_memory_plan import FIGURE10, module, ops_of

MULTI = '''
    @T.prim_func
    def split2(x: T.Buffer(("p", 4), "float32"), y: T.Buffer(("p", 2), "float32"),
               z: T.Buffer(("p", 2), "float32")):
        p = T.int64()
        for i, j in T.grid(p, 2):
            with T.block("s"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = x[vi, vj]
                z[vi, vj] = x[vi, vj + 2]

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 2), "float32"):
        n = T.int64()
        with R.dataflow():
            parts = R.call_tir(Module.split2, [x], [R.Tensor((n, 2), "float32"), R.Tensor((n, 2), "float32")])
            a = parts[0]
            b = parts[1]
            c = R.add(a, b)
            R.output(c)
        with R.dataflow():
            d = R.multiply(c, c)
            R.output(d)
        return d
'''


def test_figure5_semantics_alloc_then_dps_call_in_plain_blocks():
    mod = module(FIGURE10)
    lowered = rx.transform.CallTIRRewrite()(mod)
    main = lowered["main"]
    assert not ops_of(main, "relax.call_tir")
    assert len(ops_of(main, "relax.builtin.alloc_tensor")) == len(ops_of(main, "relax.call_tir_dps")) == 5
    assert all(type(b) is BindingBlock for b in main.body.blocks)
    bindings = [b for block in main.body.blocks for b in block.bindings]
    assert not any(isinstance(b.var, DataflowVar) for b in bindings)
    # each allocation directly precedes the DPS call that writes it, as its last argument
    for alloc, call in zip(bindings[::2], bindings[1::2]):
        assert alloc.value.op.name == "relax.builtin.alloc_tensor"
        assert call.value.args[1].fields[-1] is alloc.var
    assert rx.analysis.well_formed(lowered)
    rx.assert_structural_equal(rx.from_source(lowered.script()), lowered)
    assert mod["main"].body.blocks[0].__class__ is DataflowBlock  # the input is not mutated
    x = np.random.default_rng(0).standard_normal((2, 7)).astype("float32")
    np.testing.assert_allclose(rx.interpret(lowered, "main", x), rx.interpret(mod, "main", x), rtol=1e-6)


def test_multi_output_calls_and_untouched_dataflow_blocks():
    mod = rx.from_source("@R.ir_module\nclass Module:\n" + MULTI)
    lowered = rx.transform.CallTIRRewrite()(mod)
    main = lowered["main"]
    assert len(ops_of(main, "relax.builtin.alloc_tensor")) == 2
    dps = ops_of(main, "relax.call_tir_dps")[0]
    assert len(dps.args[1].fields) == 3
    kinds = [type(b) for b in main.body.blocks]
    assert kinds == [BindingBlock, DataflowBlock]   # only the block with a call_tir changes
    assert rx.analysis.well_formed(lowered)
    rx.assert_structural_equal(rx.from_source(lowered.script()), lowered)
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        np.testing.assert_allclose(rx.interpret(lowered, "main", x), rx.interpret(mod, "main", x))


def test_block_turned_plain_merges_with_the_plain_block_after_it():
    """Two adjacent plain blocks print as one and parse back as one: the pass merges them."""
    mod = rx.from_source("@R.ir_module\nclass Module:\n" + MULTI.replace(
        "        with R.dataflow():\n            d = R.multiply(c, c)\n            R.output(d)\n",
        "        d = R.call_tir(Module.split2, [R.concat([c, c], axis=1)], "
        "[R.Tensor((n, 2), \"float32\"), R.Tensor((n, 2), \"float32\")])[0]\n"))
    assert [type(b) for b in mod["main"].body.blocks] == [DataflowBlock, BindingBlock]
    lowered = rx.transform.CallTIRRewrite()(mod)
    assert [type(b) for b in lowered["main"].body.blocks] == [BindingBlock]
    again = rx.from_source(lowered.script())
    rx.assert_structural_equal(again, lowered)
    assert again.script() == lowered.script()
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    np.testing.assert_allclose(rx.interpret(lowered, "main", x), rx.interpret(mod, "main", x))


def test_legalized_operator_program_lowers_and_plans():
    mod = rx.from_source('''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 8), "float32"),
             w: R.Tensor((8, 8), "float32")) -> R.Tensor(("n", 8), "float32"):
        n = T.int64()
        with R.dataflow():
            a = R.matmul(x, w)
            b = R.nn.silu(a)
            c = R.multiply(b, a)
            d = R.nn.softmax(c, axis=-1)
            e = R.add(d, x)
            R.output(e)
        return e
''')
    legal = rx.transform.LegalizeOps()(mod)
    lowered = rx.transform.CallTIRRewrite()(legal)
    planned = rx.transform.StaticPlanBlockMemory()(lowered)
    assert not ops_of(lowered["main"], "relax.call_tir")
    assert ops_of(planned["main"], "relax.memory.alloc_storage")
    for m in (lowered, planned):
        assert rx.analysis.well_formed(m)
        rx.assert_structural_equal(rx.from_source(m.script()), m)
    rng = np.random.default_rng(1)
    w = rng.standard_normal((8, 8)).astype("float32")
    for n in (1, 5):
        x = rng.standard_normal((n, 8)).astype("float32")
        ref = rx.interpret(mod, "main", x, w)
        np.testing.assert_allclose(rx.interpret(planned, "main", x, w), ref, rtol=1e-5, atol=1e-6)
