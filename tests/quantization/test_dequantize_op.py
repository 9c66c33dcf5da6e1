"""``R.dequantize``: deduction and its errors, the legalized loop nest (Before/Expected),
DispatchLibrary keeping quantized weights away from BLAS, FuseOps + the schedule
putting dequantize into its consumer's kernel with no float32 copy, and the
compiled kernels equal dequantize-then-matmul (NumPy) on random blocks with
ragged sizes and several values of the symbolic dims."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tests.targets import HAVE_OPENCL, OPENCL_REASON
import tensorir as tir
from relaxscript import R
from relaxscript.op import OpAttributeError, OpDeductionError
from relaxscript.quantization import dequantize_numpy, quantize_numpy
from relaxscript.transform import DispatchLibrary, LegalizeOps
from tensorir import T
from tensorir.errors import ShapeMismatchError
from tensorir.functor import collect
from tensorir.stmt import Block

FAST = settings(max_examples=6, deadline=None)


# ---------------------------------------------------------------- deduction
def test_deduced_shape_is_rows_by_cols():
    @R.function
    def main(qd: R.Tensor(("h", "n"), "uint8"), qs: R.Tensor(("h // 16", "n"), "float32"),
             qm: R.Tensor(("h // 16", "n"), "float32")):
        w = R.dequantize(qd, qs, qm, format="q4_1")
        return w
    assert "R.Tensor((h * 2, n), dtype=\"float32\")" in main.script()


@pytest.mark.parametrize("source, message", [
    ('R.dequantize(R.zeros((16, 4), "int8"), R.zeros((1, 4), "float32"), R.zeros((1, 4), "float32"), '
     'format="q4_1")', "data must be uint8"),
    ('R.dequantize(R.zeros((24, 4), "uint8"), R.zeros((1, 4), "float32"), R.zeros((1, 4), "float32"), '
     'format="q4_1")', "not whole blocks of 16"),
    ('R.dequantize(R.zeros((32, 4), "int8"), R.zeros((2, 3), "float32"), format="q8_0")',
     "scale must have shape"),
    ('R.dequantize(R.zeros((32, 4), "int8"), R.zeros((1, 4), "int32"), format="q8_0")',
     "scale must be float16 or float32"),
    ('R.dequantize(R.zeros((16, 4), "uint8"), R.zeros((1, 4), "float16"), R.zeros((1, 4), "float32"), '
     'format="q4_1")', "scale and min must have one dtype"),
])
def test_wrong_block_shapes_are_deduction_errors(source, message):
    with pytest.raises(OpDeductionError, match=message):
        rx.from_source(f"""
from relaxscript import R
@R.function
def main():
    w = {source}
    return w
""")


def test_missing_min_and_unknown_format_are_attribute_errors():
    codes, scale = rx.Var("q", R.Tensor((32, 4), "uint8")), rx.Var("s", R.Tensor((1, 4), "float32"))
    with pytest.raises(OpAttributeError, match="takes a min tensor"):
        rx.op.dequantize(codes, scale, format="q4_1")
    with pytest.raises(OpAttributeError, match="unknown quantization format 'q3'"):
        rx.op.dequantize(codes, scale, format="q3")


# ---------------------------------------------------------------- legalization
def test_legalize_q4_1_before_expected():
    @R.function
    def main(qd: R.Tensor(("h", "n"), "uint8"), qs: R.Tensor(("h // 16", "n"), "float32"),
             qm: R.Tensor(("h // 16", "n"), "float32")):
        with R.dataflow():
            w = R.dequantize(qd, qs, qm, format="q4_1")
            R.output(w)
        return w

    @T.prim_func
    def expected(data: T.Buffer(("h", "n"), "uint8"), scale: T.Buffer(("h // 16", "n"), "float32"),
                 minimum: T.Buffer(("h // 16", "n"), "float32"), out: T.Buffer(("h * 2", "n"), "float32")):
        h = T.int64()
        n = T.int64()
        for i, j in T.grid(h * 2, n):
            with T.block("T_dequantize_q4_1"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(data[v_i // 32 * 16 + v_i % 16, v_j], scale[v_i // 32, v_j], minimum[v_i // 32, v_j])
                T.writes(out[v_i, v_j])
                out[v_i, v_j] = T.Cast("float32", T.Cast("int32", data[v_i // 32 * 16 + v_i % 16, v_j]) % 16 + (
                    T.Cast("int32", data[v_i // 32 * 16 + v_i % 16, v_j]) // 16
                    - T.Cast("int32", data[v_i // 32 * 16 + v_i % 16, v_j]) % 16) * T.Cast("int32", v_i % 32 // 16)) \
                    * scale[v_i // 32, v_j] + minimum[v_i // 32, v_j]

    mod = LegalizeOps()(rx.IRModule({"main": main}))
    rx.assert_structural_equal(mod["dequantize_q4_1"].replace(attrs={}), expected.replace(attrs={}))
    assert "R.call_tir(cls.dequantize_q4_1, (qd, qs, qm)" in mod.script()


def linear_module(fmt: str, rows: int, cols: int, bias: bool = False, activation: bool = False,
                  tokens: str = '"n"', scale_dtype: str = "float32", flatten: bool = False):
    """``y = x @ dequantize(w) [+ b] [silu] [reshaped to (cols,)]`` with ``x: (tokens, rows)``."""
    extra = f', qm: R.Tensor(({rows // 32}, {cols}), "{scale_dtype}")' if fmt == "q4_1" else ""
    mins = ", qm" if fmt == "q4_1" else ""
    packed = rows // 2 if fmt.startswith("q4") else rows
    dtype = "uint8" if fmt.startswith("q4") else "int8"
    bias_param = f', b: R.Tensor(({cols},), "float32")' if bias else ""
    lines = [f'w = R.dequantize(qd, qs{mins}, format="{fmt}")', "y = R.matmul(x, w)"]
    if bias:
        lines.append("y = R.add(y, b)")
    if activation:
        lines.append("y = R.nn.silu(y)")
    if flatten:
        lines.append(f"y = R.reshape(y, ({cols},))")
    body = "\n        ".join(lines)
    return rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(x: R.Tensor(({tokens}, {rows}), "float32"), qd: R.Tensor(({packed}, {cols}), "{dtype}"),
         qs: R.Tensor(({rows // 32}, {cols}), "{scale_dtype}"){extra}{bias_param}):
    with R.dataflow():
        {body}
        R.output(y)
    return y
""")})


# ---------------------------------------------------------------- library dispatch and fusion
def test_dispatch_library_leaves_a_dequantized_weight_to_generated_code():
    before = linear_module("q8_0", 64, 8, bias=True)
    after = DispatchLibrary()(before)
    rx.assert_structural_equal(after, before)
    plain = rx.from_source("""
from relaxscript import R
@R.function
def main(x: R.Tensor(("n", 64), "float32"), w: R.Tensor((64, 8), "float32")):
    with R.dataflow():
        y = R.matmul(x, w)
        R.output(y)
    return y
""")
    assert '.sgemm", (x, w)' in DispatchLibrary()(rx.IRModule({"main": plain})).script()


def test_dispatch_library_also_refuses_a_transposed_dequantized_weight():
    before = rx.IRModule({"main": rx.from_source("""
from relaxscript import R
@R.function
def main(x: R.Tensor(("n", 8), "float32"), qd: R.Tensor((32, 8), "int8"), qs: R.Tensor((1, 8), "float32")):
    with R.dataflow():
        w = R.dequantize(qd, qs, format="q8_0")
        y = R.matmul(x, R.permute_dims(w))
        R.output(y)
    return y
""")})
    rx.assert_structural_equal(DispatchLibrary()(before), before)


def scheduled_module(mod):
    for p in rx.get_pipeline("c"):
        mod = p(mod)
        if type(p).__name__ == "DefaultCPUSchedule":
            return mod
    raise AssertionError("the pipeline has no DefaultCPUSchedule")


def allocations(func):
    return [(blk.name, b) for blk in collect(func.body, lambda n: isinstance(n, Block)) for b in blk.alloc_buffers]


def test_dequantize_matmul_bias_silu_is_one_kernel_decoding_weight_tiles():
    """Several tokens: the weight is decoded 64 x 64 at a time into a tile each parallel task
    owns; the float32 weight (128, 80) is never stored."""
    mod = scheduled_module(linear_module("q4_1", 128, 80, bias=True, activation=True))
    assert list(mod.prim_funcs) == ["fused_dequantize_q4_1_matmul_add_silu"]
    func = mod.prim_funcs["fused_dequantize_q4_1_matmul_add_silu"]
    assert func.attrs["fused_from"] == ("dequantize_q4_1", "matmul", "add", "silu")
    found = allocations(func)
    tiles = [b for name, b in found if name == "weight_tile"]
    assert [tuple(d.value for d in b.shape) for b in tiles] == [(64, 64)] and tiles[0].scope == "local"
    others = [b for name, b in found if name != "weight_tile"]   # the product before its epilogue
    assert len(others) == 1 and isinstance(others[0].shape[0], tir.Var)
    task_loops = collect(func.body, lambda n: isinstance(n, tir.stmt.For) and n.kind == "parallel")
    assert any(collect(loop.body, lambda n: isinstance(n, Block) and n.name == "weight_tile")
               for loop in task_loops)


def test_single_token_kernel_reads_the_codes_in_the_product():
    """One token (decode): no tile at all; the product block reads the codes."""
    mod = linear_module("q8_0", 64, 80, bias=True, tokens="1")
    func = next(iter(scheduled_module(mod).prim_funcs.values()))
    assert all(b.shape[0].value == 1 for _, b in allocations(func))
    product = [blk for blk in collect(func.body, lambda n: isinstance(n, Block)) if blk.name == "T_matmul"]
    assert any(r.buffer.dtype == "int8" for r in product[0].reads)


def test_embedding_lookup_from_a_quantized_table_is_one_kernel():
    mod = rx.IRModule({"main": rx.from_source("""
from relaxscript import R
@R.function
def main(ids: R.Tensor(("n",), "int64"), qd: R.Tensor((64, 100), "int8"), qs: R.Tensor((2, 100), "float32")):
    with R.dataflow():
        table = R.dequantize(qd, qs, format="q8_0")
        rows = R.permute_dims(R.take(table, ids, axis=1))
        R.output(rows)
    return rows
""")})
    scheduled = scheduled_module(mod)
    assert len(scheduled.prim_funcs) == 1
    func = next(iter(scheduled.prim_funcs.values()))
    assert [b for blk in collect(func.body, lambda n: isinstance(n, Block)) for b in blk.alloc_buffers] == []
    rng = np.random.default_rng(3)
    codes, scale = quantize_numpy(rng.standard_normal((64, 100)), "q8_0")
    ids = np.array([5, 99, 0, 5])
    vm = rx.VirtualMachine(rx.build(mod, target="c"))
    np.testing.assert_allclose(vm["main"](ids, codes, scale),
                               dequantize_numpy(codes, scale, format="q8_0")[:, ids].T, rtol=1e-6)


# ---------------------------------------------------------------- kernels == dequantize-then-matmul
def run_case(fmt, rows, cols, tokens, bias, activation, seed, targets, scale_dtype="float32"):
    mod = linear_module(fmt, rows, cols, bias=bias, activation=activation, scale_dtype=scale_dtype)
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt, scale_dtype)
    b = rng.standard_normal(cols).astype(np.float32)
    weight = dequantize_numpy(*tensors, format=fmt)
    for target in targets:
        vm = rx.VirtualMachine(rx.build(mod, target=target))
        for n in tokens:
            x = rng.standard_normal((n, rows)).astype(np.float32)
            expected = x.astype(np.float64) @ weight
            if bias:
                expected = expected + b
            if activation:
                expected = expected / (1 + np.exp(-expected))
            got = vm["main"](x, *tensors, *([b] if bias else []))
            np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4 * np.sqrt(rows),
                                       err_msg=f"{fmt} {rows}x{cols} n={n} on {target}")
            interpreted = rx.interpret(mod, "main", x, *tensors, *([b] if bias else []))
            np.testing.assert_allclose(interpreted, expected, rtol=2e-4, atol=2e-4 * np.sqrt(rows))


@FAST
@given(fmt=st.sampled_from(["q4_1", "q8_0", "q4_0"]), blocks=st.integers(1, 3), cols=st.integers(1, 70),
       tokens=st.lists(st.sampled_from([1, 2, 3, 5, 7]), min_size=2, max_size=3, unique=True),
       bias=st.booleans(), activation=st.booleans(), seed=st.integers(0, 2**16),
       scale_dtype=st.sampled_from(["float16", "float32"]))
def test_compiled_kernels_equal_dequantize_then_matmul(fmt, blocks, cols, tokens, bias, activation, seed,
                                                       scale_dtype):
    """Columns not a multiple of the vector tile, n = 1 and n not a multiple of the row tile."""
    run_case(fmt, 32 * blocks, cols, tokens, bias, activation, seed, ["c"], scale_dtype)


@pytest.mark.parametrize("fmt", ["q4_1", "q8_0", "q4_0"])
def test_loop_interpreter_target_agrees(fmt):
    run_case(fmt, 64, 9, [1, 3], True, False, 0, ["interp"], "float16")


@pytest.mark.skipif(not HAVE_OPENCL, reason=OPENCL_REASON)
@pytest.mark.parametrize("fmt", ["q4_1", "q8_0", "q4_0"])
def test_opencl_target_agrees(fmt):
    """The quantized linear layers on the OpenCL target (GPU schedules), cols no tile divides, n = 1."""
    run_case(fmt, 64, 37, [1, 5], True, True, 2, ["opencl"], "float16")


@pytest.mark.parametrize("fmt, shape", [("q4_1", (256, 576)), ("q8_0", (576, 192))])
def test_model_shaped_kernels(fmt, shape):
    run_case(fmt, shape[0], shape[1], [1, 17], False, False, 1, ["c"], "float16")


def test_codes_of_the_wrong_shape_at_run_time_are_a_shape_error():
    vm = rx.VirtualMachine(rx.build(linear_module("q4_1", 64, 8), target="c"))
    x = np.zeros((1, 64), np.float32)
    with pytest.raises(ShapeMismatchError, match="qs"):
        vm["main"](x, np.zeros((32, 8), np.uint8), np.zeros((3, 8), np.float32), np.zeros((2, 8), np.float32))


@pytest.mark.parametrize("tokens", ['"n"', "1"])
def test_every_pipeline_stage_of_a_quantized_linear_round_trips(tokens):
    from tests.relaxscript.test_pipeline_roundtrip import assert_every_stage_round_trips
    assert_every_stage_round_trips(linear_module("q4_1", 64, 72, bias=True, activation=True, tokens=tokens))
