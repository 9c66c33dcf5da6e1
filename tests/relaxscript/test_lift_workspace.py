"""LiftWorkspace (paper Figure 11): a prim_func's global scratch buffer becomes a
graph-level allocation that memory planning can reuse."""
from __future__ import annotations

import numpy as np

import relaxscript as rx
import relaxscript.interpreter as interp
from relaxscript.expr import TupleGetItem
from tensorir.buffer import Buffer

from .test_memory_checker import check_no_overlap

SPLIT_K = '''
@R.ir_module
class Module:
    @T.prim_func
    def mm_split_k(X: T.Buffer(("n", 16), "float32"), W: T.Buffer((16, 8), "float32"),
                   Y: T.Buffer(("n", 8), "float32")):
        n = T.int64()
        ws = T.alloc_buffer((4, n, 8), "float32")
        for ko, i, j, ki in T.grid(4, n, 8, 4):
            with T.block("partial"):
                vko, vi, vj, vki = T.axis.remap("SSSR", [ko, i, j, ki])
                with T.init():
                    ws[vko, vi, vj] = T.float32(0)
                ws[vko, vi, vj] = ws[vko, vi, vj] + X[vi, vko * 4 + vki] * W[vko * 4 + vki, vj]
        for i, j, ko in T.grid(n, 8, 4):
            with T.block("sum"):
                vi, vj, vko = T.axis.remap("SSR", [i, j, ko])
                with T.init():
                    Y[vi, vj] = T.float32(0)
                Y[vi, vj] = Y[vi, vj] + ws[vko, vi, vj]

    @R.function
    def main(x: R.Tensor(("m", 16), "float32"),
             w: R.Tensor((16, 8), "float32")) -> R.Tensor(("m", 8), "float32"):
        m = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(Module.mm_split_k, [x, w], R.Tensor((m, 8), "float32"))
            lv1 = R.call_tir(Module.mm_split_k, [x, w], R.Tensor((m, 8), "float32"))
            lv2 = R.call_tir(Module.mm_split_k, [x, w], R.Tensor((m, 8), "float32"))
            s = R.add(lv0, lv1)
            t = R.add(s, lv2)
            R.output(t)
        return t
'''


def test_workspace_becomes_a_trailing_parameter_and_a_call_output():
    mod = rx.from_source(SPLIT_K)
    lifted = rx.transform.LiftWorkspace()(mod)
    func = lifted["mm_split_k"]
    assert [p.name for p in func.params if isinstance(p, Buffer)] == ["X", "W", "Y", "ws"]
    assert not func.root_block.alloc_buffers
    assert "mm_split_k" in mod and mod["mm_split_k"].root_block.alloc_buffers  # input untouched
    bindings = [b for block in lifted["main"].body.blocks for b in block.bindings]
    names = [b.var.name_hint for b in bindings]
    assert names == ["lv0_ws", "lv0", "lv1_ws", "lv1", "lv2_ws", "lv2", "s", "t"]
    assert isinstance(bindings[1].value, TupleGetItem)
    assert rx.analysis.well_formed(lifted)
    rx.assert_structural_equal(rx.from_source(lifted.script()), lifted)


def test_lifted_workspaces_join_the_memory_plan():
    mod = rx.from_source(SPLIT_K)
    lifted = rx.transform.LiftWorkspace()(mod)
    unplanned = rx.transform.CallTIRRewrite()(lifted)
    planned = rx.transform.StaticPlanBlockMemory()(unplanned)
    info = rx.analysis.memory_plan_info(planned)["main"]
    owner = {t.name: s.name for s in info.storages for t in s.tensors}
    # each workspace dies right after its call, so the three share one storage
    assert owner["lv0_ws_out1"] == owner["lv1_ws_out1"] == owner["lv2_ws_out1"]
    assert "m * 128" in rx.analysis.memory_plan(planned)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((16, 8)).astype("float32")
    for m in (1, 5):
        x = rng.standard_normal((m, 16)).astype("float32")
        ref = rx.interpret(mod, "main", x, w)
        np.testing.assert_allclose(ref, 3 * x @ w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(rx.interpret(lifted, "main", x, w), ref, rtol=1e-5)
        got = rx.interpret(planned, "main", x, w)
        planned_bytes = interp.last_run_stats().allocated_bytes
        np.testing.assert_allclose(got, ref, rtol=1e-5)
        rx.interpret(unplanned, "main", x, w)
        assert planned_bytes < interp.last_run_stats().allocated_bytes
        check_no_overlap(planned, {"m": m})
    rx.assert_structural_equal(rx.from_source(planned.script()), planned)


def test_workspace_whose_shape_the_caller_cannot_express_is_not_lifted():
    text = SPLIT_K.replace('x: R.Tensor(("m", 16), "float32")', 'x: R.Tensor(ndim=2, dtype="float32")')
    text = text.replace('R.Tensor((m, 8), "float32")', 'R.Tensor(ndim=2, dtype="float32")')
    text = text.replace('-> R.Tensor(("m", 8), "float32")', '-> R.Tensor(ndim=2, dtype="float32")')
    text = text.replace("        m = T.int64()\n        with", "        with")
    mod = rx.from_source(text)
    assert rx.transform.LiftWorkspace()(mod) is mod
