"""Gate and up in one quantized launch: the pair epilogue.

A block-quantized product of ``2F`` columns whose halves meet in one elementwise chain
(``silu(gu[:, :F]) * gu[:, F:]``, what ``MergeParallelMatmul`` or the model's ``gate_up_proj`` builds)
fuses with that chain (``fuse_partition.pair_epilogue_group``); the schedule rules mark it as a pair
epilogue and the generated GEMV (row walks: both halves of a column summed by one thread after the
barrier; the column-split kernels: the whole product, then a pass) and GEMM (each task both halves of
its panel) compute ``y[c]`` from columns ``c`` and ``c + F``. Checked against NumPy: the kernels alone
(hypothesis: formats, ragged halves, teams of 1..3, the native build, the forced AVX2 and SSE builds,
the column split, float16 scales), through the pipeline, and what must not fuse."""
from __future__ import annotations


import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.gemm import machine as gemm_machine
from backends.c.gemm.machine import MachineParams, machine_params
from backends.c.quantized_gemm import gemm_source
from backends.c.quantized_gemv import AVX2, SSE, ColumnEpilogue, VectorFeatures, detect_features, gemv_source
from backends.c.quantized_gemv_rows import ROW_WALK_MARK
from relaxscript.quantization import dequantize_numpy, fake_quantize_numpy, quantize_numpy
from relaxscript.transform import FuseOps, MergeParallelMatmul
from relaxscript.transform.fuse_partition import column_window
from relaxscript.transform.quantize_activations import QuantizeActivations
from relaxscript.transform.testing import assert_pass_preserves

from .native_operands import run_kernel, team_library
from .quantized_script import constant_script, dequantize_script, quantized_weights

# native: the machine's own kernels; avx2: forced AVX2 (gcc -march=x86-64 -mavx2, AVX2 features);
# no-avx512: the AVX-512 source built for its AVX2 branch; sse: the float kernel (scratch + pass)
BUILDS = {
    "native": (None, ["-march=native"]),
    "no-avx512": (None, ["-march=native", "-DRS_Q_NO_AVX512"]),
    "avx2": (AVX2, ["-march=x86-64", "-mavx2", "-mfma", "-mf16c"]),
    "sse": (SSE, ["-march=x86-64"]),
}



def _epilogue(half: int, row: str) -> ColumnEpilogue:
    """``silu(gate + h) * up``: both halves and another input (``h``, ``(rows, half)``) at the column."""
    return ColumnEpilogue(("const float* restrict h = (const float*)rs_buffers[5];",),
                          (f"const float rs_g = rs_prod + h[{row} * {half} + rs_col];",),
                          "rs_g / (1.0f + expf(-rs_g)) * rs_prod_hi")


def _expected(product: np.ndarray, h: np.ndarray) -> np.ndarray:
    half = product.shape[-1] // 2
    gate, up = product[..., :half] + h, product[..., half:]
    return gate / (1 + np.exp(-gate)) * up


def _assert_close(y, product, h, rows: int, message: str = ""):
    """Each output within what the two sums' rounding (relative 2e-4, absolute 2e-4 sqrt(K)) allows
    through ``silu(g) * u``."""
    half = product.shape[-1] // 2
    gate, up = product[..., :half] + h, product[..., half:]
    expected = _expected(product, h)
    err = 2e-4 * np.sqrt(rows) * (1 + np.abs(product[..., :half]) + np.abs(up))
    tol = err * (np.abs(up) * 1.2 + np.abs(gate) + 1) + 2e-4 * np.abs(expected)
    bad = ~(np.abs(y - expected) <= tol)
    assert not bad.any(), f"{message}: {bad.sum()} of {bad.size} wrong, e.g. {y[bad][:4]} vs {expected[bad][:4]}"


def _roles(fmt: str) -> dict:
    return {"codes": 0, "scale": 1, "x": 2, "y": 3} | ({"min": 4} if fmt == "q4_1" else {})


def _features(kind):
    return detect_features() if kind is None else VectorFeatures(*kind, detect_features().l1d_bytes)


@settings(max_examples=16, deadline=None)
@given(build=st.sampled_from(sorted(BUILDS)), fmt=st.sampled_from(["q4_1", "q4_0", "q8_0"]),
       blocks=st.sampled_from([1, 3, 18]), half=st.sampled_from([1, 16, 45, 96, 160, 577, 1536]),
       team=st.integers(1, 3), activations=st.sampled_from(["q8_0", None]),
       scale_dtype=st.sampled_from(["float32", "float16"]), row_walk=st.booleans(), small_l1=st.booleans(),
       seed=st.integers(0, 2**16))
def test_standalone_gemv_pair_equals_numpy(tmp_path_factory, build, fmt, blocks, half, team, activations,
                                           scale_dtype, row_walk, small_l1, seed):
    """Every GEMV kernel with the pair epilogue: the q4 row walks (512-bit and AVX2; with a small L1,
    ``small_l1``, pairs too wide for one walk walk each half in turn), the q8_0 pair walks, the
    register-blocked column split (``row_walk=False``) and the float kernel, which compute the whole
    product into a scratch row first; ragged halves (a column tail, a half narrower than a vector);
    y starts as NaN, so an output no thread wrote shows."""
    kind, flags = BUILDS[build]
    rows, cols = 32 * blocks, 2 * half
    roles = _roles(fmt)
    features = _features(kind)
    if small_l1:     # 4 KiB: whole rows up to 256 columns, halves up to 256 (half = 160 splits)
        features = VectorFeatures(features.name, features.vector_bytes, features.registers, 4 << 10)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RELAXSCRIPT_GEMV_ROW_WALK", "1" if row_walk else "0")
        source = gemv_source("rs_gemv", fmt, rows, cols, roles, features, _epilogue(half, "0"), activations,
                             scale_dtype, pair=True)
    assert f"pair epilogue over 2 x {half} columns" in source
    library = team_library(tmp_path_factory.mktemp("pair_gemv"), source, flags)
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt, scale_dtype)
    x = (rng.standard_normal(rows) * 3).astype(np.float32)
    h = rng.standard_normal(half).astype(np.float32)
    y = np.full(half, np.nan, np.float32)
    run_kernel(library, tensors, roles, x, y, h, team)
    xs = fake_quantize_numpy(x[None])[0] if activations else x
    product = xs.astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)
    _assert_close(y, product, h.astype(np.float64), rows, f"{build} {fmt} team={team}")


@pytest.mark.parametrize("build", ["native", "no-avx512", "avx2"])
@pytest.mark.parametrize("fmt, half, l1d", [("q4_1", 160, 4 << 10), ("q4_0", 1536, 32 << 10), ("q4_1", 203, 4 << 10)])
def test_split_row_walk_equals_numpy(tmp_path, build, fmt, half, l1d):
    """A pair too wide for one walk (each half fits): every block's halves walked in turn, ragged
    halves included (203: a 64- and a 32-column group and a scalar tail), teams of 1..3."""
    kind, flags = BUILDS[build]
    base = _features(kind)
    features = VectorFeatures(base.name, base.vector_bytes, base.registers, l1d)
    rows, cols = 96, 2 * half
    roles = _roles(fmt)
    source = gemv_source("rs_gemv", fmt, rows, cols, roles, features, _epilogue(half, "0"), "q8_0", "float16",
                         pair=True)
    assert ROW_WALK_MARK in source and "hh < 2" in source
    library = team_library(tmp_path, source, flags)
    rng = np.random.default_rng(half)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt, "float16")
    for team in (1, 2, 3):
        x = (rng.standard_normal(rows) * 3).astype(np.float32)
        h = rng.standard_normal(half).astype(np.float32)
        y = np.full(half, np.nan, np.float32)
        run_kernel(library, tensors, roles, x, y, h, team)
        product = fake_quantize_numpy(x[None])[0].astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)
        _assert_close(y, product, h.astype(np.float64), rows, f"{build} team={team}")


def test_the_row_walk_takes_the_pair_in_its_final_sum():
    """The q4 row walks sum both halves of a column after their barrier (no scratch row); the
    other kernels compute the product into one first."""
    features = VectorFeatures(*AVX2, 48 << 10)
    walk = gemv_source("f", "q4_1", 576, 3072, _roles("q4_1"), features, _epilogue(1536, "0"), "q8_0", pair=True)
    assert ROW_WALK_MARK in walk and "prod_hi[c - t0] = s" in walk and "malloc" not in walk.split("#else")[0]
    float_kernel = gemv_source("f", "q4_1", 576, 3072, _roles("q4_1"), features, _epilogue(1536, "0"), pair=True)
    assert ROW_WALK_MARK not in float_kernel and "rs_prod_hi = y[rs_col + 1536]" in float_kernel
    # a 32 KiB L1 (AVX2 machines such as Zen 3): SmolLM2's 3072 columns do not fit one walk, each
    # 1536-column half does: the walk takes the halves in turn
    small = VectorFeatures(*AVX2, 32 << 10)
    split = gemv_source("f", "q4_1", 576, 3072, _roles("q4_1"), small, _epilogue(1536, "0"), "q8_0", pair=True)
    assert ROW_WALK_MARK in split and "for (int64_t hh = 0; hh < 2; ++hh)" in split
    assert "hh < 2" not in walk
    with pytest.raises(ValueError, match="pair epilogue needs"):
        gemv_source("f", "q4_1", 64, 31, _roles("q4_1"), features, _epilogue(15, "0"), pair=True)
    with pytest.raises(ValueError, match="pair epilogue needs"):
        gemv_source("f", "q4_1", 64, 32, _roles("q4_1"), features, None, pair=True)


GEMM_BUILDS = {"native": (None, None, ["-march=native"]),
               "avx2": (AVX2, gemm_machine.AVX2, ["-march=x86-64", "-mavx2", "-mfma", "-mf16c"]),
               "sse": (SSE, gemm_machine.SSE, ["-march=x86-64"])}


@settings(max_examples=10, deadline=None)
@given(build=st.sampled_from(sorted(GEMM_BUILDS)), fmt=st.sampled_from(["q4_1", "q4_0", "q8_0"]),
       blocks=st.sampled_from([1, 3, 7]), half=st.integers(1, 80), scale_dtype=st.sampled_from(["float32", "float16"]),
       tokens=st.lists(st.integers(1, 70), min_size=2, max_size=3), team=st.integers(1, 3),
       caches=st.sampled_from([(8 << 10, 32 << 10), (48 << 10, 2 << 20)]), seed=st.integers(0, 2**16))
def test_standalone_gemm_pair_equals_numpy(tmp_path_factory, build, fmt, blocks, half, scale_dtype, tokens, team,
                                           caches, seed):
    """The prefill GEMM with the pair epilogue: each task's panel of both halves (ragged last panels),
    several ``kc`` panels and row chunks (small caches), one token (the GEMV) and many."""
    kind, isa, flags = GEMM_BUILDS[build]
    features = _features(kind)
    machine = MachineParams(isa or machine_params().isa, *caches, 8 << 20, 2)
    rows, cols = 32 * blocks, 2 * half
    roles = _roles(fmt)
    source = gemm_source("rs_gemm", fmt, rows, cols, roles, features, "rs_syms[0]",
                         epilogue=_epilogue(half, "rs_row"), one_row_epilogue=_epilogue(half, "0"),
                         machine=machine, scale_dtype=scale_dtype, pair=True)
    library = team_library(tmp_path_factory.mktemp("pair_gemm"), source, flags)
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt, scale_dtype)
    weight = dequantize_numpy(*tensors, format=fmt)
    for count in tokens + [1, 300]:
        x = rng.standard_normal((count, rows)).astype(np.float32)
        h = rng.standard_normal((count, half)).astype(np.float32)
        y = np.full((count, half), np.nan, np.float32)
        run_kernel(library, tensors, roles, x, y, h, team, tokens=count)
        _assert_close(y, x.astype(np.float64) @ weight, h.astype(np.float64), rows,
                      f"{build} {fmt} n={count} team={team}")


# ---------------------------------------------------------------- the graph: merge, fuse, build
def _module(text: str) -> rx.IRModule:
    return rx.IRModule({"main": rx.from_source(text)})


GATE, UP = quantized_weights(1, 64, 6, "q4_1"), quantized_weights(2, 64, 6, "q4_1")

BEFORE = f'''
@R.function
def main(x: R.Tensor(("n", 64), "float32")):
    n = T.int64()
    with R.dataflow():
        gate = R.matmul(x, {dequantize_script(GATE, "q4_1")})
        up = R.matmul(x, {dequantize_script(UP, "q4_1")})
        gv = R.multiply(R.nn.silu(gate), up)
        R.output(gv)
    return gv
'''

EXPECTED = f'''
@R.function
def main(x: R.Tensor(("n", 64), "float32")):
    n = T.int64()
    with R.dataflow():
        lv = {dequantize_script(GATE, "q4_1")}
        merged_weight = {dequantize_script([np.concatenate(p, axis=-1) for p in zip(GATE, UP)], "q4_1")}
        merged_matmul = R.matmul(x, merged_weight)
        gate = R.strided_slice(merged_matmul, R.shape([1]), R.shape([0]), R.shape([6]), R.shape([1]))
        lv1 = {dequantize_script(UP, "q4_1")}
        up = R.strided_slice(merged_matmul, R.shape([1]), R.shape([6]), R.shape([12]), R.shape([1]))
        lv2 = R.nn.silu(gate)
        gv = R.multiply(lv2, up)
        R.output(gv)
    return gv
'''


def test_quantized_gate_and_up_merge_into_halves_of_one_product():
    after = assert_pass_preserves(MergeParallelMatmul(), _module(BEFORE))
    rx.assert_structural_equal(after, _module(EXPECTED))


def _fused(mod):
    for p in rx.get_pipeline("c"):
        mod = p(mod)
        if isinstance(p, FuseOps):
            return mod
    raise AssertionError("no FuseOps in the pipeline")


def _fused_from(mod) -> list[tuple]:
    return sorted(tuple(f.attrs["fused_from"]) for f in mod.relax_functions.values() if "fused_from" in f.attrs)


def test_merged_halves_and_their_product_are_one_kernel():
    """The product, both slices, silu and the multiply: one function (the down projection's rounding
    stays out of it)."""
    groups = _fused_from(_fused(QuantizeActivations()(_module(BEFORE))))
    pair = [g for g in groups if "matmul" in g]
    assert len(pair) == 1 and {"strided_slice", "strided_slice1", "silu", "multiply"} <= set(pair[0]), groups


@pytest.mark.parametrize("scale_dtype", ["float32", "float16"])
def test_gated_mlp_with_merged_weights_builds_and_matches_numpy(scale_dtype):
    """The model's form (one ``gate_up`` parameter, its halves into silu * up, then down plus a
    residual) on rounded activations: one token runs the GEMV with the pair epilogue, several the
    GEMM with it."""
    k, f = 96, 40
    mins_gu = f', gum: R.Tensor(({k // 32}, {2 * f}), "{scale_dtype}")'
    # the down projection's depth (F = 40) is not whole blocks: a float32 weight here
    text = f'''
@R.function
def main(x: R.Tensor(("n", {k}), "float32"), gud: R.Tensor(({k // 2}, {2 * f}), "uint8"),
         gus: R.Tensor(({k // 32}, {2 * f}), "{scale_dtype}"){mins_gu}, wd: R.Tensor(({f}, {k}), "float32")):
    n = T.int64()
    with R.dataflow():
        gu = R.matmul(x, R.dequantize(gud, gus, gum, format="q4_1"))
        gate = R.strided_slice(gu, R.shape([1]), R.shape([0]), R.shape([{f}]), R.shape([1]))
        up = R.strided_slice(gu, R.shape([1]), R.shape([{f}]), R.shape([{2 * f}]), R.shape([1]))
        hidden = R.multiply(R.nn.silu(gate), up)
        gv = R.add(x, R.matmul(hidden, wd))
        R.output(gv)
    return gv
'''
    mod = QuantizeActivations()(_module(text))
    built = rx.build(mod, target="c")
    source = built.c_library.source
    assert f"pair epilogue over 2 x {f} columns" in source and " gemm n x " in source
    vm = rx.VirtualMachine(built)
    rng = np.random.default_rng(5)
    tensors = quantize_numpy(rng.standard_normal((k, 2 * f)).astype("float32"), "q4_1", scale_dtype)
    wd = rng.standard_normal((f, k)).astype("float32")
    weight = dequantize_numpy(*tensors, format="q4_1")
    for n in (1, 3, 17):
        x = rng.standard_normal((n, k)).astype("float32")
        product = fake_quantize_numpy(x).astype(np.float64) @ weight
        expected = x + _expected(product, 0.0) @ wd
        np.testing.assert_allclose(vm["main"](x, *tensors, wd), expected, rtol=2e-4, atol=2e-3)


def _halves_module(consumer: str, cols: int = 64, fmt: str = "q4_1", weight: str | None = None) -> rx.IRModule:
    weight = weight or dequantize_script(quantized_weights(3, 64, cols, fmt), fmt)
    half = cols // 2
    return _module(f'''
@R.function
def main(x: R.Tensor((1, 64), "float32")):
    with R.dataflow():
        gu = R.matmul(x, {weight})
        a = R.strided_slice(gu, R.shape([1]), R.shape([0]), R.shape([{half}]), R.shape([1]))
        b = R.strided_slice(gu, R.shape([1]), R.shape([{half}]), R.shape([{cols}]), R.shape([1]))
        gv = {consumer}
        R.output(gv)
    return gv
''')


def test_halves_not_combined_elementwise_keep_the_product_apart():
    """Halves joined by a concat (not elementwise per column) are no pair epilogue: the product stays
    its own kernel (the plain GEMV), and the results are right."""
    mod = _halves_module("R.concat([b, a], axis=1)")
    groups = _fused_from(_fused(mod))
    assert not any("matmul" in g and "strided_slice" in g for g in groups), groups
    x = np.random.default_rng(0).standard_normal((1, 64)).astype("float32")
    np.testing.assert_allclose(rx.VirtualMachine(rx.build(mod, target="c"))["main"](x), rx.interpret(mod, "main", x),
                               rtol=1e-4, atol=1e-4)


def test_a_reduction_after_the_pair_stays_out_of_it():
    """``sum(a * b)``: the product of the halves is the pair epilogue; the reduction (an anchor) is
    its own kernel, not the epilogue's."""
    mod = _halves_module("R.sum(R.multiply(a, b), axis=[1], keepdims=True)")
    groups = _fused_from(_fused(mod))
    pair = [g for g in groups if "matmul" in g]
    assert pair == [("dequantize_q4_1", "matmul", "strided_slice", "strided_slice1", "multiply")], groups
    built = rx.build(mod, target="c")
    assert "pair epilogue over 2 x 32 columns" in built.c_library.source
    x = np.random.default_rng(0).standard_normal((1, 64)).astype("float32")
    np.testing.assert_allclose(rx.VirtualMachine(built)["main"](x), rx.interpret(mod, "main", x), rtol=1e-4, atol=1e-3)


def test_unequal_slices_and_float_weights_do_not_pair():
    """Slices other than the two halves (q/k/v widths), and float32 weights (the library's GEMMs),
    leave the product alone."""
    thirds = _module(f'''
@R.function
def main(x: R.Tensor((1, 64), "float32")):
    with R.dataflow():
        gu = R.matmul(x, {dequantize_script(quantized_weights(4, 64, 96, "q4_1"), "q4_1")})
        a = R.strided_slice(gu, R.shape([1]), R.shape([0]), R.shape([32]), R.shape([1]))
        b = R.strided_slice(gu, R.shape([1]), R.shape([32]), R.shape([96]), R.shape([1]))
        gv = R.multiply(R.nn.silu(a), R.strided_slice(b, R.shape([1]), R.shape([0]), R.shape([32]), R.shape([1])))
        R.output(gv)
    return gv
''')
    dense = _halves_module("R.multiply(R.nn.silu(a), b)",
                           weight=constant_script(np.random.default_rng(1).standard_normal((64, 64)).astype("float32")))
    for mod in (thirds, dense):
        groups = _fused_from(_fused(mod))
        assert not any("matmul" in g and "strided_slice" in g for g in groups), groups
        x = np.random.default_rng(2).standard_normal((1, 64)).astype("float32")
        np.testing.assert_allclose(rx.VirtualMachine(rx.build(mod, target="c"))["main"](x),
                                   rx.interpret(mod, "main", x), rtol=1e-4, atol=1e-4)


def test_column_window_reads_a_legalized_slice():
    mod = rx.get_pipeline("c")
    legal = _halves_module("R.multiply(a, b)")
    for p in mod:
        legal = p(legal)
        if type(p).__name__ == "AnnotateTIROpPattern":
            break
    windows = sorted(column_window(f) for name, f in legal.prim_funcs.items() if name.startswith("strided_slice"))
    assert windows == [(0, 32), (32, 32)]
    assert column_window(next(f for name, f in legal.prim_funcs.items() if name == "multiply")) is None
