"""Before/Expected tests in TVM's style (a ``Before`` module, a pass, an ``Expected``
module, ``assert_structural_equal``), written in TVMScript's printed forms:
``@I.ir_module``, ``cls = Module`` and ``T.handle`` prim_funcs with ``T.match_buffer``
and ``tir.noalias`` (issue 15). Each pass's output also runs equal to its input."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from relaxscript.transform import (AnnotateTIROpPattern, CallTIRRewrite, FuseOps, FuseTIR,
                                   InlineFunctions, LegalizeOps, StaticPlanBlockMemory)

_EXP_AND_SCALE = '''
    @T.prim_func(private=True)
    def exp(a: T.handle, b: T.handle):
        T.func_attr({"tir.noalias": T.bool(True)%(pattern)s})
        n = T.int64()
        A = T.match_buffer(a, (n, 4))
        B = T.match_buffer(b, (n, 4))
        for i, j in T.grid(n, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = T.exp(A[vi, vj])

    @T.prim_func(private=True)
    def scale(a: T.handle, b: T.handle):
        T.func_attr({"tir.noalias": T.bool(True)%(pattern)s})
        n = T.int64()
        A = T.match_buffer(a, (n, 4))
        B = T.match_buffer(b, (n, 4))
        for i, j in T.grid(n, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(0.5)
'''
PLAIN = _EXP_AND_SCALE % {"pattern": ""}
ANNOTATED = _EXP_AND_SCALE % {"pattern": ', "op_pattern": "ElementWise"'}

CALLS = '''
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.exp, (x,), out_sinfo=R.Tensor((n, 4), dtype="float32"))
            gv = R.call_tir(cls.scale, (lv,), out_sinfo=R.Tensor((n, 4), dtype="float32"))
            R.output(gv)
        return gv
'''

FUSED_FUNCTION = '''
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
            gv = cls.fused_exp_scale(x)
            R.output(gv)
        return gv

    @R.function
    def fused_exp_scale(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        R.func_attr({"primitive": True, "fused_from": ("exp", "scale")})
        n = T.int64()
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.exp, (x,), out_sinfo=R.Tensor((n, 4), dtype="float32"))
            gv = R.call_tir(cls.scale, (lv,), out_sinfo=R.Tensor((n, 4), dtype="float32"))
            R.output(gv)
        return gv
'''

FUSED_KERNEL = '''
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
            gv = R.call_tir(cls.fused_exp_scale, (x,), out_sinfo=R.Tensor((n, 4), dtype="float32"))
            R.output(gv)
        return gv

    @T.prim_func(private=True)
    def fused_exp_scale(p_x: T.handle, p_gv: T.handle):
        T.func_attr({"fused_from": ("exp", "scale"), "tir.noalias": T.bool(True),
                     "op_pattern": "ElementWise"})
        n = T.int64()
        x = T.match_buffer(p_x, (n, 4))
        gv = T.match_buffer(p_gv, (n, 4))
        lv = T.alloc_buffer((n, 4))
        for i, j in T.grid(n, 4):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                lv[vi, vj] = T.exp(x[vi, vj])
        for i, j in T.grid(n, 4):
            with T.block("B_1"):
                vi, vj = T.axis.remap("SS", [i, j])
                gv[vi, vj] = lv[vi, vj] * T.float32(0.5)
'''

REWRITTEN_CALLS = '''
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        cls = Module
        lv = R.builtin.alloc_tensor(R.shape([n, 4]), dtype="float32")
        _ = R.call_tir_dps(cls.exp, (x, lv))
        gv = R.builtin.alloc_tensor(R.shape([n, 4]), dtype="float32")
        _1 = R.call_tir_dps(cls.scale, (lv, gv))
        return gv
'''

PLANNED_CALLS = '''
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        cls = Module
        storage0 = R.memory.alloc_storage(R.shape([n * 16]), virtual_device_index=0,
                                          storage_scope="global", dtype="uint8")
        lv = R.memory.alloc_tensor(storage0, R.prim_value(0), R.shape([n, 4]), dtype="float32")
        _ = R.call_tir_dps(cls.exp, (x, lv))
        gv = R.builtin.alloc_tensor(R.shape([n, 4]), dtype="float32")
        _1 = R.call_tir_dps(cls.scale, (lv, gv))
        _2 = R.memory.kill_storage(storage0)
        return gv
'''


def module(*parts: str):
    return rx.from_source("@I.ir_module\nclass Module:\n" + "".join(parts))


CASES = {
    "legalize_ops": (
        (lambda: module('''
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32"), y: R.Tensor((4,), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        with R.dataflow():
            gv = R.add(x, y)
            R.output(gv)
        return gv
''')),
        LegalizeOps,
        lambda: module('''
    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32"), y: R.Tensor((4,), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
            gv = R.call_tir(cls.add, (x, y), out_sinfo=R.Tensor((n, 4), dtype="float32"))
            R.output(gv)
        return gv

    @T.prim_func(private=True)
    def add(var_a: T.handle, b: T.Buffer((T.int64(4),), "float32"), var_T_add: T.handle):
        T.func_attr({"tir.noalias": T.bool(True)})
        n = T.int64()
        a = T.match_buffer(var_a, (n, T.int64(4)))
        T_add = T.match_buffer(var_T_add, (n, T.int64(4)))
        for i, j in T.grid(n, T.int64(4)):
            with T.block("T_add"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(a[v_i, v_j], b[v_j])
                T.writes(T_add[v_i, v_j])
                T_add[v_i, v_j] = a[v_i, v_j] + b[v_j]
'''),
        lambda rng, n: [rng.standard_normal((n, 4)).astype("float32"), rng.standard_normal(4).astype("float32")]),
    "fuse_ops": (lambda: module(ANNOTATED, CALLS), FuseOps, lambda: module(ANNOTATED, FUSED_FUNCTION), None),
    "fuse_tir": (lambda: module(ANNOTATED, FUSED_FUNCTION), FuseTIR, lambda: module(FUSED_KERNEL), None),
    "call_tir_rewrite": (lambda: module(PLAIN, CALLS), CallTIRRewrite, lambda: module(PLAIN, REWRITTEN_CALLS),
                         None),
    "static_plan_block_memory": (lambda: module(PLAIN, REWRITTEN_CALLS), StaticPlanBlockMemory,
                                 lambda: module(PLAIN, PLANNED_CALLS), None),
    "inline_functions": (
        lambda: module('''
    @R.function(private=True)
    def silu(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        y = R.multiply(x, R.sigmoid(x))
        return y

    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        cls = Module
        with R.dataflow():
            lv = cls.silu(x)
            gv = R.add(lv, x)
            R.output(gv)
        return gv
'''),
        InlineFunctions,
        lambda: module('''
    @R.function(private=True)
    def silu(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        y = R.multiply(x, R.sigmoid(x))
        return y

    @R.function
    def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
        with R.dataflow():
            lv = R.sigmoid(x)
            y = R.multiply(x, lv)
            gv = R.add(y, x)
            R.output(gv)
        return gv
'''), None),
}


@pytest.mark.parametrize("name", list(CASES))
def test_before_expected(name):
    before, make_pass, expected, _inputs = CASES[name]
    after = make_pass()(before())
    rx.assert_structural_equal(after, expected())


@pytest.mark.parametrize("name", [n for n in CASES if n not in ("call_tir_rewrite", "static_plan_block_memory")])
@pytest.mark.parametrize("n", [1, 5])
def test_pass_output_runs_like_its_input(name, n):
    before, make_pass, _expected, inputs = CASES[name]
    rng = np.random.default_rng(n)
    args = inputs(rng, n) if inputs else [rng.standard_normal((n, 4)).astype("float32")]
    mod = before()
    np.testing.assert_allclose(rx.interpret(make_pass()(mod), "main", *args),
                               rx.interpret(mod, "main", *args), rtol=1e-6)


def test_annotate_op_pattern_then_fuse_on_tvm_style_kernels():
    annotated = AnnotateTIROpPattern()(module(PLAIN, CALLS))
    rx.assert_structural_equal(annotated, module(ANNOTATED, CALLS))
