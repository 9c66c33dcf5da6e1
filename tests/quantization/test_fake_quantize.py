"""R.fake_quantize (8-bit block-quantized activations) and the QuantizeActivations pass: the
NumPy meaning (rounding ties, zero blocks, shapes), deduction errors, print/parse, the
legalized block, every backend giving the reference's exact values, and the pass's
Before/Expected rewrite."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript import R
from relaxscript.op import OpAttributeError, OpDeductionError
from relaxscript.quantization import fake_quantize_numpy, quantize_activations_numpy
from relaxscript.quantization.activations import SCALE_PER_AMAX
from relaxscript.transform import LegalizeOps
from relaxscript.transform.quantize_activations import QuantizeActivations
from tensorir.functor import collect
from tensorir.stmt import Block

FAST = settings(max_examples=6, deadline=None)


# ---------------------------------------------------------------- the NumPy meaning
def test_codes_round_half_to_even_and_scale_is_amax_times_the_float32_reciprocal():
    # amax 127 makes 127 / amax exactly 1: the codes are x rounded, ties to even
    x = np.zeros((1, 32), np.float32)
    x[0, :8] = [127, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49]
    codes, scales = quantize_activations_numpy(x)
    assert codes.dtype == np.int8 and codes.shape == (1, 32) and scales.shape == (1, 1)
    assert codes[0, :8].tolist() == [127, 0, 2, 2, 0, -2, -2, 3]
    assert scales[0, 0] == np.float32(127) * np.float32(SCALE_PER_AMAX)
    np.testing.assert_array_equal(fake_quantize_numpy(x), codes.astype(np.float32) * scales[0, 0])


def test_an_all_zero_block_has_zero_codes_and_scale():
    x = np.concatenate([np.zeros(32, np.float32), np.linspace(-1, 1, 32, dtype=np.float32)])
    codes, scales = quantize_activations_numpy(x)
    assert not codes[:32].any() and scales[0] == 0
    assert abs(codes[32:]).max() == 127 and scales[1] == np.float32(1) * np.float32(SCALE_PER_AMAX)
    assert np.isfinite(fake_quantize_numpy(x)).all()


def test_each_block_of_the_last_axis_has_its_own_scale():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 96)) * 10.0 ** np.arange(3)[:, None]).astype(np.float32)
    codes, scales = quantize_activations_numpy(x)
    assert scales.shape == (2, 3, 3)
    np.testing.assert_allclose(scales, np.abs(x.reshape(2, 3, 3, 32)).max(-1) / 127, rtol=1e-6)
    # the rounding error is at most half a step of its block
    error = np.abs(fake_quantize_numpy(x) - x).reshape(2, 3, 3, 32)
    assert (error <= scales[..., None] * 0.5 * (1 + 1e-5)).all()


@pytest.mark.parametrize("shape", [(31,), (2, 48), (3, 0, 40)])
def test_a_last_axis_not_whole_blocks_is_rejected(shape):
    with pytest.raises(ValueError, match="not whole blocks of 32"):
        fake_quantize_numpy(np.zeros(shape, np.float32))


def test_reference_rejects_float64_and_unknown_formats():
    with pytest.raises(ValueError, match="must be float32"):
        fake_quantize_numpy(np.zeros(32))
    with pytest.raises(ValueError, match="unknown activation quantization format 'q4'"):
        fake_quantize_numpy(np.zeros(32, np.float32), "q4")


# ---------------------------------------------------------------- the op
@pytest.mark.parametrize("source, message", [
    ('R.fake_quantize(R.zeros((2, 48), "float32"))', "whole blocks of 32"),
    ('R.fake_quantize(R.zeros((2, 64), "float16"))', "x must be float32"),
])
def test_wrong_inputs_are_deduction_errors(source, message):
    with pytest.raises(OpDeductionError, match=message):
        rx.from_source(f"""
from relaxscript import R
@R.function
def main():
    y = {source}
    return y
""")


def test_unknown_format_is_an_attribute_error():
    x = rx.Var("x", R.Tensor((1, 32), "float32"))
    with pytest.raises(OpAttributeError, match="unknown activation quantization format 'q4_1'"):
        rx.op.fake_quantize(x, format="q4_1")


SOURCE = '''
from relaxscript import R
@R.function
def main(x: R.Tensor(("n", "k"), "float32")):
    with R.dataflow():
        y = R.fake_quantize(x, format="q8_0")
        R.output(y)
    return y
'''


def test_symbolic_last_axis_is_accepted_and_the_module_round_trips():
    from tests.relaxscript.test_pipeline_roundtrip import assert_round_trips
    mod = rx.IRModule({"main": rx.from_source(SOURCE)})
    assert 'R.fake_quantize(x, format="q8_0")' in mod.script()
    assert_round_trips(mod, "parsing")
    assert_round_trips(LegalizeOps()(mod), "LegalizeOps")


def test_legalized_op_is_one_injective_block_reading_its_block_of_x():
    mod = LegalizeOps()(rx.IRModule({"main": rx.from_source(SOURCE.replace('"k"', "64"))}))
    func = mod["fake_quantize_q8_0"]
    blocks = collect(func.body, lambda n: isinstance(n, Block) and n.name != "root")
    assert [b.name for b in blocks] == ["T_fake_quantize_q8_0"]
    assert all(iv.kind == "S" for iv in blocks[0].iter_vars)
    assert "T.round(" in func.script() and func.attrs.get("op_pattern", "Injective") == "Injective"


@FAST
@given(blocks=st.integers(1, 3), rows=st.lists(st.integers(1, 5), min_size=2, max_size=3, unique=True),
       seed=st.integers(0, 2**16), target=st.sampled_from(["c", "interp"]))
def test_every_backend_gives_the_reference_values_exactly(blocks, rows, seed, target):
    """Symbolic n bound to several values; ties and zero blocks included."""
    mod = rx.IRModule({"main": rx.from_source(SOURCE.replace('"k"', str(32 * blocks)))})
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    rng = np.random.default_rng(seed)
    for n in rows:
        x = (rng.standard_normal((n, 32 * blocks)) * 4).astype(np.float32)
        x[0, :32] = 0                                   # a zero block
        if n > 1:                                       # exact ties: amax 127, halves
            x[1, :32] = np.arange(32) - np.float32(15.5)
            x[1, 0] = 127
        expected = fake_quantize_numpy(x)
        np.testing.assert_array_equal(vm["main"](x), expected)
        np.testing.assert_array_equal(rx.interpret(mod, "main", x), expected)


# ---------------------------------------------------------------- QuantizeActivations
def test_pass_before_expected():
    @R.function
    def before(x: R.Tensor(("n", 64), "float32"), qd: R.Tensor((32, 8), "uint8"),
               qs: R.Tensor((2, 8), "float32"), qm: R.Tensor((2, 8), "float32"),
               w: R.Tensor((64, 8), "float32")):
        with R.dataflow():
            d = R.dequantize(qd, qs, qm, format="q4_1")
            a = R.matmul(x, d)
            b = R.matmul(x, d)
            c = R.matmul(x, w)
            y = R.add(R.add(a, b), c)
            R.output(y)
        return y

    @R.function
    def expected(x: R.Tensor(("n", 64), "float32"), qd: R.Tensor((32, 8), "uint8"),
                 qs: R.Tensor((2, 8), "float32"), qm: R.Tensor((2, 8), "float32"),
                 w: R.Tensor((64, 8), "float32")):
        with R.dataflow():
            d = R.dequantize(qd, qs, qm, format="q4_1")
            xq = R.fake_quantize(x, format="q8_0")
            a = R.matmul(xq, d)
            xq1 = R.fake_quantize(x, format="q8_0")
            b = R.matmul(xq1, d)
            c = R.matmul(x, w)
            y = R.add(R.add(a, b), c)
            R.output(y)
        return y

    after = QuantizeActivations()(rx.IRModule({"main": before}))
    rx.assert_structural_equal(after, rx.IRModule({"main": expected}))


def test_pass_leaves_inputs_that_are_not_whole_blocks():
    @R.function
    def main(x: R.Tensor((1, "k"), "float32"), qd: R.Tensor(("k", 8), "int8"), qs: R.Tensor(("k // 32", 8), "float32")):
        with R.dataflow():
            y = R.matmul(x, R.dequantize(qd, qs, format="q8_0"))
            R.output(y)
        return y

    mod = rx.IRModule({"main": main})
    rx.assert_structural_equal(QuantizeActivations()(mod), mod)
    with pytest.raises(ValueError, match="unknown activation quantization format"):
        QuantizeActivations("q4_0")


def test_export_spec_option_applies_the_pass():
    from relaxscript import nn

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(64, 16, bias=False, weight_format=nn.Quantized("q8_0"))

        def forward(self, x):
            return self.proj(x)

    methods = {"forward": {"x": nn.Tensor(("n", 64), "float32")}}
    rounded = nn.export(Layer(), nn.ExportSpec(methods, dims={"n": 8}, activations="q8")).mod
    exact = nn.export(Layer(), nn.ExportSpec(methods, dims={"n": 8})).mod
    assert rounded.script().count("R.fake_quantize(") == 1 and "fake_quantize" not in exact.script()
    with pytest.raises(ValueError, match="activations must be one of f32, q8"):
        nn.ExportSpec(methods, activations="int8")
