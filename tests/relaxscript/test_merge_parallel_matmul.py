"""MergeParallelMatmul and BindParams: exact before/after modules, what must not merge,
random programs against the interpreter, and built modules against NumPy."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.transform import BindParams, MergeParallelMatmul
from relaxscript.transform.pass_check import _same, random_inputs
from relaxscript.transform.testing import assert_pass_preserves, dataflow_modules
from tests.quantization.quantized_script import dequantize_script, quantized_weights

WQ = np.arange(12, dtype="float32").reshape(4, 3) / 8
WK = np.arange(20, dtype="float32").reshape(4, 5) / -16
WV = np.arange(8, dtype="float32").reshape(4, 2) / 4


def _const(array) -> str:
    return f"R.const({array.tolist()!r}, \"float32\")"


BEFORE = f'''
@R.function
def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    with R.dataflow():
        wv = {_const(WV)}
        q = R.matmul(x, {_const(WQ)})
        other = R.matmul(y, {_const(WQ)})
        k = R.matmul(x, {_const(WK)})
        s = R.add(q, other)
        v = R.matmul(x, wv)
        gv = R.concat([s, k, v], axis=1)
        R.output(gv)
    return gv
'''

EXPECTED = f'''
@R.function
def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    with R.dataflow():
        wv = {_const(WV)}
        merged_matmul = R.matmul(x, {_const(np.concatenate([WQ, WK, WV], axis=1))})
        q = R.strided_slice(merged_matmul, R.shape([1]), R.shape([0]), R.shape([3]), R.shape([1]))
        other = R.matmul(y, {_const(WQ)})
        k = R.strided_slice(merged_matmul, R.shape([1]), R.shape([3]), R.shape([8]), R.shape([1]))
        s = R.add(q, other)
        v = R.strided_slice(merged_matmul, R.shape([1]), R.shape([8]), R.shape([10]), R.shape([1]))
        gv = R.concat([s, k, v], axis=1)
        R.output(gv)
    return gv
'''


def _module(text: str) -> rx.IRModule:
    parsed = rx.from_source(text)
    return parsed if isinstance(parsed, rx.IRModule) else rx.IRModule({"main": parsed})


def test_qkv_projections_merge_into_one_matmul_exactly():
    before = _module(BEFORE)
    after = assert_pass_preserves(MergeParallelMatmul(), before)
    rx.assert_structural_equal(after, _module(EXPECTED))


def test_nothing_to_merge_leaves_the_module_alone():
    text = f'''
@R.function
def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n", 4), "float32"), w: R.Tensor((4, 3), "float32")):
    with R.dataflow():
        a = R.matmul(x, {_const(WQ)})
        b = R.matmul(y, {_const(WK)})
        c = R.matmul(x, w)
        d = R.matmul(x, {_const(WQ[:, :2].copy())}, out_dtype="float64")
        R.output(a, b, c, d)
    return (a, b, c, d)
'''
    # different left operands, a parameter weight, a different out_dtype: no group of two
    mod = _module(text)
    assert MergeParallelMatmul()(mod).script() == mod.script()


def test_size_limit_keeps_big_groups_apart():
    mod = _module(BEFORE)
    assert "merged_matmul" not in MergeParallelMatmul(max_elements=39)(mod).script()
    assert "merged_matmul" in MergeParallelMatmul(max_elements=40)(mod).script()
    with pytest.raises(ValueError, match="max_elements"):
        MergeParallelMatmul(max_elements=-1)


PARAMS_SOURCE = '''
@R.function
def main(x: R.Tensor(("n", 4), "float32"), w_gate: R.Tensor((4, 6), "float32"),
         w_up: R.Tensor((4, 6), "float32"), w_down: R.Tensor((6, 4), "float32")):
    with R.dataflow():
        gate = R.matmul(x, w_gate)
        up = R.matmul(x, w_up)
        hidden = R.multiply(R.nn.silu(gate), up)
        gv = R.matmul(hidden, w_down)
        R.output(gv)
    return gv
'''


def _gated_mlp_weights(rng):
    return {"w_gate": rng.standard_normal((4, 6)).astype("float32"),
            "w_up": rng.standard_normal((4, 6)).astype("float32"),
            "w_down": rng.standard_normal((6, 4)).astype("float32")}


def test_bind_params_then_merge_gate_and_up_builds_and_matches_numpy():
    rng = np.random.default_rng(1)
    weights = _gated_mlp_weights(rng)
    bound = BindParams("main", weights)(_module(PARAMS_SOURCE))
    assert [p.name_hint for p in bound["main"].params] == ["x"]
    merged = assert_pass_preserves(MergeParallelMatmul(), bound)
    assert merged.script().count("R.matmul") == 2  # gate/up merged, down alone
    vm = rx.VirtualMachine(rx.build(bound))
    for n in (1, 3, 17):
        x = rng.standard_normal((n, 4)).astype("float32")
        gate, up = x @ weights["w_gate"], x @ weights["w_up"]
        expected = (gate / (1 + np.exp(-gate)) * up) @ weights["w_down"]
        np.testing.assert_allclose(vm["main"](x), expected, rtol=1e-4, atol=1e-5)


def test_bind_params_errors_name_the_function_and_parameter():
    mod = _module(PARAMS_SOURCE)
    weights = _gated_mlp_weights(np.random.default_rng(0))
    with pytest.raises(ValueError, match="no parameter.*w_side"):
        BindParams("main", {"w_side": weights["w_up"]})(mod)
    with pytest.raises(ValueError, match="no graph function 'decode'"):
        BindParams("decode", weights)(mod)
    with pytest.raises(ValueError, match=r"main parameter 'w_up' is float32\[4, 6\], got an array float32\[6, 4\]"):
        BindParams("main", {"w_up": weights["w_down"]})(mod)
    with pytest.raises(ValueError, match="'x' must be a tensor with a static shape"):
        BindParams("main", {"x": np.zeros((2, 4), "float32")})(mod)
    with pytest.raises(ValueError, match="float64"):
        BindParams("main", {"w_up": weights["w_up"].astype("float64")})(mod)


def test_default_pipeline_merges():
    names = [type(p).__name__ for p in rx.get_pipeline("c")]
    assert names.index("MergeParallelMatmul") < names.index("DispatchLibrary")


QUICK = settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))


@QUICK
@given(mod=dataflow_modules(kinds=("shared_matmul", "unary", "binary", "reduce", "permute", "copy")))
def test_random_programs_keep_interpreter_results(mod):
    assert_pass_preserves(MergeParallelMatmul(), mod, samples=3)


def _check_build(mod, seed):
    vm = rx.VirtualMachine(rx.build(mod))
    rng = np.random.default_rng(seed)
    for _ in range(3):
        args = random_inputs(mod["main"], rng)
        assert _same(rx.interpret(mod, "main", *args), vm["main"](*args), 1e-4, 1e-5)


@QUICK
@given(mod=dataflow_modules(max_blocks=2, max_steps=3, kinds=("shared_matmul", "unary", "broadcast")),
       seed=st.integers(0, 2 ** 16))
def test_random_programs_build_and_match_interpreter(mod, seed):
    _check_build(mod, seed)


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(mod=dataflow_modules(max_blocks=3, max_steps=5), seed=st.integers(0, 2 ** 16))
def test_random_programs_build_and_match_interpreter_thoroughly(mod, seed):
    assert_pass_preserves(MergeParallelMatmul(), mod, samples=2)
    _check_build(mod, seed)


LAYER_BEFORE = f'''
@R.ir_module
class Module:
    @R.function
    def layer(x: R.Tensor(("n", 4), "float32"), wq: R.Tensor((4, 3), "float32"), wk: R.Tensor((4, 5), "float32")):
        n = T.int64()
        with R.dataflow():
            q = R.matmul(x, wq)
            k = R.matmul(x, wk)
            gv = R.concat([k, q], axis=1)
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), wk: R.Tensor((4, 5), "float32")):
        n = T.int64()
        h0 = Module.layer(x, {_const(WQ)}, {_const(WK)})
        h1 = Module.layer(R.strided_slice(h0, [1], [0], [4]), {_const(WQ * 2)}, {_const(WK * 3)})
        h2 = Module.layer(x, {_const(WQ)}, wk)
        return (h1, h2)
'''

LAYER_EXPECTED = f'''
@R.ir_module
class Module:
    @R.function
    def layer(x: R.Tensor(("n", 4), "float32"), wq: R.Tensor((4, 3), "float32"), wk: R.Tensor((4, 5), "float32")):
        n = T.int64()
        with R.dataflow():
            q = R.matmul(x, wq)
            k = R.matmul(x, wk)
            gv = R.concat([k, q], axis=1)
            R.output(gv)
        return gv

    @R.function
    def layer_merged_weights(x: R.Tensor(("n", 4), "float32"), wq: R.Tensor((4, 3), "float32"),
                             wk: R.Tensor((4, 5), "float32"), merged_weight0: R.Tensor((4, 8), "float32")):
        n = T.int64()
        with R.dataflow():
            merged_matmul = R.matmul(x, merged_weight0)
            q = R.strided_slice(merged_matmul, R.shape([1]), R.shape([0]), R.shape([3]), R.shape([1]))
            k = R.strided_slice(merged_matmul, R.shape([1]), R.shape([3]), R.shape([8]), R.shape([1]))
            gv = R.concat([k, q], axis=1)
            R.output(gv)
        return gv

    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), wk: R.Tensor((4, 5), "float32")):
        n = T.int64()
        h0 = Module.layer_merged_weights(x, {_const(WQ)}, {_const(WK)}, {_const(np.concatenate([WQ, WK], 1))})
        lv = R.strided_slice(h0, [1], [0], [4])
        h1 = Module.layer_merged_weights(lv, {_const(WQ * 2)}, {_const(WK * 3)},
                                         {_const(np.concatenate([WQ * 2, WK * 3], 1))})
        h2 = Module.layer(x, {_const(WQ)}, wk)
        return (h1, h2)
'''


def test_weights_passed_as_constant_arguments_merge_in_a_copy_of_the_callee():
    before = rx.from_source(LAYER_BEFORE)
    after = assert_pass_preserves(MergeParallelMatmul(), before)
    rx.assert_structural_equal(after, rx.from_source(LAYER_EXPECTED))
    # the copy owns its variables: none is shared with the original function
    from relaxscript.expr_functor import ExprVisitor

    class Defs(ExprVisitor):
        def __init__(self):
            super().__init__()
            self.defs = set()

        def visit_var_def(self, var):
            self.defs.add(var)
    original, copy = Defs(), Defs()
    original.visit(after["layer"])
    copy.visit(after["layer_merged_weights"])
    assert original.defs and copy.defs and not original.defs & copy.defs
    vm = rx.VirtualMachine(rx.build(before))
    rng = np.random.default_rng(3)
    for n in (1, 5):
        x, wk = rng.standard_normal((n, 4)).astype("float32"), rng.standard_normal((4, 5)).astype("float32")
        h1, h2 = vm["main"](x, wk)
        layer = lambda v, a, b: np.concatenate([v @ b, v @ a], axis=1)  # noqa: E731
        np.testing.assert_allclose(h1, layer(layer(x, WQ, WK)[:, :4], WQ * 2, WK * 3), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(h2, layer(x, WQ, wk), rtol=1e-4, atol=1e-4)


def test_no_constant_caller_leaves_no_copy_behind():
    mod = rx.from_source(LAYER_BEFORE.split("    @R.function\n    def main")[0] + '''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), wq: R.Tensor((4, 3), "float32"), wk: R.Tensor((4, 5), "float32")):
        return Module.layer(x, wq, wk)
''')
    after = MergeParallelMatmul()(mod)
    assert list(after.relax_functions) == ["layer", "main"]
    assert after.script() == mod.script()


# ---------------------------------------------------------------- block-quantized constant weights
def _quantized_before(fmt_k: str = "q4_1") -> str:
    q, k, v = (quantized_weights(seed, 64, cols, fmt) for seed, cols, fmt in ((1, 3, "q4_1"), (2, 5, fmt_k),
                                                                              (3, 2, "q4_1")))
    return f'''
@R.function
def main(x: R.Tensor(("n", 64), "float32")):
    n = T.int64()
    with R.dataflow():
        wq = {dequantize_script(q, "q4_1")}
        q = R.matmul(x, wq)
        wk = {dequantize_script(k, fmt_k)}
        k = R.matmul(x, wk)
        v = R.matmul(x, {dequantize_script(v, "q4_1")})
        gv = R.concat([q, k, v], axis=1)
        R.output(gv)
    return gv
'''


def test_quantized_projections_merge_with_their_blocks_joined_by_column():
    q, k, v = (quantized_weights(seed, 64, cols, "q4_1") for seed, cols in ((1, 3), (2, 5), (3, 2)))
    joined = [np.concatenate(parts, axis=-1) for parts in zip(q, k, v)]
    expected = f'''
@R.function
def main(x: R.Tensor(("n", 64), "float32")):
    n = T.int64()
    with R.dataflow():
        wq = {dequantize_script(q, "q4_1")}
        merged_weight = {dequantize_script(joined, "q4_1")}
        merged_matmul = R.matmul(x, merged_weight)
        q = R.strided_slice(merged_matmul, R.shape([1]), R.shape([0]), R.shape([3]), R.shape([1]))
        wk = {dequantize_script(k, "q4_1")}
        k = R.strided_slice(merged_matmul, R.shape([1]), R.shape([3]), R.shape([8]), R.shape([1]))
        lv = {dequantize_script(v, "q4_1")}
        v = R.strided_slice(merged_matmul, R.shape([1]), R.shape([8]), R.shape([10]), R.shape([1]))
        gv = R.concat([q, k, v], axis=1)
        R.output(gv)
    return gv
'''
    after = assert_pass_preserves(MergeParallelMatmul(), _module(_quantized_before()))
    rx.assert_structural_equal(after, _module(expected))


def test_quantized_formats_merge_only_with_their_own_format():
    after = MergeParallelMatmul()(_module(_quantized_before("q8_0"))).script()
    assert after.count("R.matmul") == 2 and "R.strided_slice" in after   # q and v merged, k alone


@pytest.mark.parametrize("fmt_k", ["q4_1", "q8_0"])
def test_merged_quantized_module_builds_and_matches_numpy(fmt_k):
    from relaxscript.quantization.formats import dequantize_numpy
    mod = _module(_quantized_before(fmt_k))
    weights = [dequantize_numpy(*quantized_weights(1, 64, 3, "q4_1"), format="q4_1"),
               dequantize_numpy(*quantized_weights(2, 64, 5, fmt_k), format=fmt_k),
               dequantize_numpy(*quantized_weights(3, 64, 2, "q4_1"), format="q4_1")]
    vm = rx.VirtualMachine(rx.build(mod))
    rng = np.random.default_rng(4)
    for n in (1, 3):
        x = rng.standard_normal((n, 64)).astype("float32")
        np.testing.assert_allclose(vm["main"](x), np.concatenate([x @ w for w in weights], axis=1),
                                   rtol=1e-4, atol=1e-4)
