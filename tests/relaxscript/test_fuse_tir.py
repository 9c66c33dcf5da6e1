"""FuseTIR: merged prim_funcs (paper Figure 9), symbolic var solving between
callee and caller shapes, and the fusion report."""
import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from tensorir.analysis import PatternKind, analyze_pattern

FIGURE9 = '''
@I.ir_module
class Module:
    @T.prim_func
    def decode_q4(wdata: T.Buffer((16, 8), "int32"), wscale: T.Buffer((16, 2), "float32"), w: T.Buffer((16, 16), "float32")):
        for k, j in T.grid(16, 16):
            with T.block("decode"):
                vk, vj = T.axis.remap("SS", [k, j])
                w[vk, vj] = T.Cast("float32", T.floormod(T.floordiv(wdata[vk, vj // 2], 1 + 15 * (vj % 2)), 16) - 7) * wscale[vk, vj // 8]

    @T.prim_func
    def mm(x: T.Buffer(("n", 16), "float32"), w: T.Buffer((16, 16), "float32"), y: T.Buffer(("n", 16), "float32")):
        n = T.int64()
        for i, j, k in T.grid(n, 16, 16):
            with T.block("mm"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    y[vi, vj] = T.float32(0)
                y[vi, vj] = y[vi, vj] + x[vi, vk] * w[vk, vj]

    @T.prim_func
    def relu(x: T.Buffer(("n", 16), "float32"), y: T.Buffer(("n", 16), "float32")):
        n = T.int64()
        for i, j in T.grid(n, 16):
            with T.block("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = T.max(x[vi, vj], T.float32(0))

    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), wdata: R.Tensor((16, 8), "int32"), wscale: R.Tensor((16, 2), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            w = R.call_tir(cls.decode_q4, (wdata, wscale), R.Tensor((16, 16), "float32"))
            lv0 = R.call_tir(cls.mm, (x, w), R.Tensor((n, 16), "float32"))
            lv1 = R.call_tir(cls.relu, (lv0,), R.Tensor((n, 16), "float32"))
            R.output(lv1)
        return lv1
'''


# After FuseOps: the three calls form one primitive subgraph function.
FIGURE9_GROUPED_MAIN = '''
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), wdata: R.Tensor((16, 8), "int32"), wscale: R.Tensor((16, 2), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            lv1 = cls.fused_decode_q4_mm_relu(wdata, wscale, x)
            R.output(lv1)
        return lv1

    @R.function
    def fused_decode_q4_mm_relu(wdata: R.Tensor((16, 8), "int32"), wscale: R.Tensor((16, 2), "float32"), x: R.Tensor(("n", 16), "float32")) -> R.Tensor(("n", 16), "float32"):
        R.func_attr({"primitive": True, "fused_from": ("decode_q4", "mm", "relu")})
        n = T.int64()
        with R.dataflow():
            w = R.call_tir(cls.decode_q4, (wdata, wscale), R.Tensor((16, 16), "float32"))
            lv0 = R.call_tir(cls.mm, (x, w), R.Tensor((n, 16), "float32"))
            lv1 = R.call_tir(cls.relu, (lv0,), R.Tensor((n, 16), "float32"))
            R.output(lv1)
        return lv1
'''

# After FuseTIR: one prim_func (paper Figure 9, right): the decoded weight and the
# matmul result live in buffers allocated inside it; the callees are gone.
FIGURE9_AFTER = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), wdata: R.Tensor((16, 8), "int32"), wscale: R.Tensor((16, 2), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            lv1 = R.call_tir(cls.fused_decode_q4_mm_relu, (wdata, wscale, x), R.Tensor((n, 16), "float32"))
            R.output(lv1)
        return lv1

    @T.prim_func
    def fused_decode_q4_mm_relu(wdata: T.Buffer((16, 8), "int32"), wscale: T.Buffer((16, 2), "float32"), x: T.Buffer(("n", 16), "float32"), out: T.Buffer(("n", 16), "float32")):
        n = T.int64()
        T.func_attr({"fused_from": ("decode_q4", "mm", "relu"), "op_pattern": "OutputWiseFusible"})
        w = T.alloc_buffer((16, 16), "float32")
        mm_out = T.alloc_buffer((n, 16), "float32")
        for k, j in T.grid(16, 16):
            with T.block("decode"):
                vk, vj = T.axis.remap("SS", [k, j])
                T.reads(wdata[vk, vj // 2], wscale[vk, vj // 8])
                T.writes(w[vk, vj])
                w[vk, vj] = T.Cast("float32", T.Cast("int64", wdata[vk, vj // 2]) // (1 + 15 * (vj % 2)) % 16 - 7) * wscale[vk, vj // 8]
        for i, j, k in T.grid(n, 16, 16):
            with T.block("mm"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                T.reads(mm_out[vi, vj], x[vi, vk], w[vk, vj])
                T.writes(mm_out[vi, vj])
                with T.init():
                    mm_out[vi, vj] = T.float32(0)
                mm_out[vi, vj] = mm_out[vi, vj] + x[vi, vk] * w[vk, vj]
        for i, j in T.grid(n, 16):
            with T.block("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                T.reads(mm_out[vi, vj])
                T.writes(out[vi, vj])
                out[vi, vj] = T.max(mm_out[vi, vj], T.float32(0))
'''


def test_figure9_exact_before_and_after():
    before = rx.transform.AnnotateTIROpPattern()(rx.from_source(FIGURE9))
    grouped = rx.transform.FuseOps()(before)
    kernels = FIGURE9.split("    @R.function")[0]  # the three prim_funcs, unchanged by FuseOps
    expected_grouped = rx.transform.AnnotateTIROpPattern()(rx.from_source(kernels + FIGURE9_GROUPED_MAIN))
    rx.assert_structural_equal(grouped, expected_grouped)
    rx.assert_structural_equal(rx.transform.FuseTIR()(grouped), rx.from_source(FIGURE9_AFTER))


def _decode_reference(wdata, wscale):
    j = np.arange(16)
    nibbles = (wdata[:, j // 2] >> (4 * (j % 2))) & 15
    return (nibbles - 7).astype("float32") * wscale[:, j // 8]


def _check(mod):
    rx.assert_structural_equal(rx.from_source(mod.script()), mod)
    assert rx.analysis.well_formed(mod)


def test_figure9_decode_fuses_into_matmul_and_epilogue():
    before = rx.transform.AnnotateTIROpPattern()(rx.from_source(FIGURE9))
    assert before["decode_q4"].attrs["op_pattern"] == "Injective"
    assert before["mm"].attrs["op_pattern"] == "OutputWiseFusible"
    grouped = rx.transform.FuseOps()(before)
    after = rx.transform.FuseTIR()(grouped)
    _check(grouped)
    _check(after)
    rows = rx.analysis.fusion_table(after)
    assert [(r.kernel_name, r.pattern_kind, r.fused_ops) for r in rows] == [
        ("fused_decode_q4_mm_relu", "OutputWiseFusible", ("decode_q4", "mm", "relu"))]
    kernel = after["fused_decode_q4_mm_relu"]
    assert analyze_pattern(kernel) == PatternKind.OutputWiseFusible
    assert [b.shape for b in kernel.root_block.alloc_buffers][0][0].value == 16  # decoded W lives inside
    assert sorted(after.prim_funcs) == ["fused_decode_q4_mm_relu"]  # callees removed
    assert not after.relax_functions.keys() - {"main"}
    rng = np.random.default_rng(0)
    wdata = rng.integers(0, 256, (16, 8)).astype("int32")
    wscale = rng.standard_normal((16, 2)).astype("float32")
    for n in (1, 3):
        x = rng.standard_normal((n, 16)).astype("float32")
        expected = np.maximum(x @ _decode_reference(wdata, wscale), 0)
        for mod in (before, grouped, after):
            np.testing.assert_allclose(rx.interpret(mod, "main", x, wdata, wscale), expected, rtol=1e-4, atol=1e-4)
    assert "fused_decode_q4_mm_relu" in rx.analysis.fusion_summary(after)


SOLVE = '''
@I.ir_module
class Module:
    @T.prim_func
    def tile_scale(x: T.Buffer(("n * m",), "float32"), s: T.Buffer(("m",), "float32"), y: T.Buffer(("n * m",), "float32")):
        n = T.int64()
        m = T.int64()
        for i in range(n * m):
            with T.block("tile"):
                vi = T.axis.spatial(n * m, i)
                y[vi] = x[vi] * s[vi % m] + T.Cast("float32", n)

    @T.prim_func
    def shifted(a: T.Buffer(("n - 1",), "float32"), b: T.Buffer(("n - 1",), "float32")):
        n = T.int64()
        for i in range(n - 1):
            with T.block("shifted"):
                vi = T.axis.spatial(n - 1, i)
                b[vi] = a[vi] * T.float32(2) + T.Cast("float32", n)

    @R.function
    def main(x: R.Tensor((256,), "float32"), s: R.Tensor((16,), "float32")) -> R.Tensor((256,), "float32"):
        with R.dataflow():
            lv0 = R.call_tir(cls.tile_scale, (x, s), R.Tensor((256,), "float32"))
            lv1 = R.call_tir(cls.shifted, (lv0,), R.Tensor((256,), "float32"))
            R.output(lv1)
        return lv1

    @R.function
    def dyn(x: R.Tensor(("k",), "float32")) -> R.Tensor(("k",), "float32"):
        k = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(cls.shifted, (x,), R.Tensor((k,), "float32"))
            lv1 = R.call_tir(cls.shifted, (lv0,), R.Tensor((k,), "float32"))
            R.output(lv1)
        return lv1
'''


def test_callee_vars_are_solved_from_caller_shapes():
    before = rx.from_source(SOLVE)
    after = rx.transform.FuseTIR()(rx.transform.FuseOps()(before))
    _check(after)
    static = after["fused_tile_scale_shifted"]
    assert [tuple(d.value for d in b.shape) for b in static.buffer_params] == [(256,), (16,), (256,)]
    assert not static.scalar_params  # n = 256 / 16 and n' = 257 are constants
    x = np.linspace(-1, 1, 256).astype("float32")
    s = np.arange(16).astype("float32")
    expected = (x * np.tile(s, 16) + 16) * 2 + 257
    np.testing.assert_allclose(rx.interpret(after, "main", x, s), expected, rtol=1e-6)
    np.testing.assert_allclose(rx.interpret(before, "main", x, s), expected, rtol=1e-6)
    for k in (1, 5):
        xk = np.arange(k).astype("float32")
        np.testing.assert_allclose(rx.interpret(after, "dyn", xk), (xk * 2 + k + 1) * 2 + k + 1)
    assert len(after["fused_shifted_shifted"].root_block.body.seq) == 2  # one prim_func inlined twice
    assert analyze_pattern(after["fused_shifted_shifted"]) == PatternKind.ElementWise


def test_unsolvable_callee_var_is_reported():
    from relaxscript.transform.fuse_tir_bind import CalleeVarBinder, FuseTIRError
    n, m = tir.size_var("n"), tir.size_var("m")
    binder = CalleeVarBinder("f")
    binder.add_shape((n * m,), (tir.IntImm(256, "int64"),), "buffer 'x'")
    with pytest.raises(FuseTIRError, match="cannot determine symbolic var"):
        binder.solve()
    binder = CalleeVarBinder("g")
    binder.add_shape((n * 2 + 1,), (tir.IntImm(6, "int64"),), "buffer 'x'")
    with pytest.raises(FuseTIRError, match="no integer solution"):
        binder.solve()


def test_primitive_function_that_is_not_a_call_tir_chain_is_left_alone():
    src = '''
@I.ir_module
class Module:
    @R.function
    def helper(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        R.func_attr({"primitive": True})
        with R.dataflow():
            lv = R.nn.relu(x)
            R.output(lv)
        return lv

    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        lv = cls.helper(x)
        return lv
'''
    mod = rx.from_source(src)
    assert rx.transform.FuseTIR()(mod) is mod


def test_fusion_summary_before_and_after():
    before = rx.from_source(FIGURE9)
    grouped = rx.transform.FuseOps()(before)
    table = rx.analysis.fusion_table(grouped)
    assert [(r.kernel_name, r.group) for r in table] == [
        ("decode_q4", "fused_decode_q4_mm_relu"), ("mm", "fused_decode_q4_mm_relu"),
        ("relu", "fused_decode_q4_mm_relu")]
    text = rx.analysis.fusion_summary(rx.transform.FuseTIR()(grouped))
    assert text.splitlines()[-1] == "1 kernel(s), 1 call_tir site(s)"
    assert "decode_q4, mm, relu" in text
