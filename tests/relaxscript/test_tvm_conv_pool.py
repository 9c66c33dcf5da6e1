"""R.nn.conv1d/conv2d and the 2-D pools written as TVM's printer writes them: parse,
round trip, and results equal to a direct NumPy loop on the interpreter and the C
build, with the image's spatial dims symbolic and bound to several values."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.op.registry import OpAttributeError, OpDeductionError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

CONV_NET = '''
@I.ir_module
class ConvNet:
    @R.function
    def main(x: R.Tensor((1, 4, "h", "w"), dtype="float32"), w1: R.Tensor((8, 2, 3, 3), dtype="float32"), w2: R.Tensor((8, 8, 1, 1), dtype="float32")):
        h = T.int64()
        w = T.int64()
        with R.dataflow():
            lv: R.Tensor((1, 8, (h - 1) // 2 + 1, (w - 1) // 2 + 1), dtype="float32") = R.nn.conv2d(x, w1, strides=[2, 2], padding=[1, 1, 1, 1], dilation=[1, 1], groups=2, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype="void")
            lv1: R.Tensor((1, 8, (h - 1) // 2 + 1, (w - 1) // 2 + 1), dtype="float32") = R.nn.relu(lv)
            lv2: R.Tensor((1, 8, (h - 1) // 2 + 1, (w - 1) // 2 + 1), dtype="float32") = R.nn.conv2d(lv1, w2, strides=[1, 1], padding=[0, 0, 0, 0], dilation=[1, 1], groups=1, data_layout="NCHW", kernel_layout="OIHW", out_layout="NCHW", out_dtype="float32")
            gv = R.nn.max_pool2d(lv2, pool_size=[2, 2], strides=[2, 2], padding=[0, 0, 0, 0], dilation=[1, 1], ceil_mode=False, count_include_pad=False, layout="NCHW", out_layout="NCHW")
            R.output(gv)
        return gv
'''

POOLS = '''
@R.function
def main(x: R.Tensor((2, 3, "h", "w"), dtype="float32"), s: R.Tensor((2, 3, "w"), dtype="float32"), k: R.Tensor((4, 3, 3), dtype="float32")):
    h = T.int64()
    w = T.int64()
    with R.dataflow():
        a = R.nn.avg_pool2d(x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1, 1, 1], ceil_mode=True, count_include_pad=True)
        b = R.nn.avg_pool2d(x, pool_size=[2, 3], strides=[1, 1], padding=[0, 1, 1, 1])
        c = R.nn.adaptive_avg_pool2d(x, output_size=[2, 3])
        d = R.nn.conv1d(s, k, strides=1, padding=[2, 0], dilation=2)
        gv = (a, b, c, d)
        R.output(gv)
    return gv
'''


def conv2d_loops(x, w, stride, pad, groups):
    """A direct loop nest: the textbook definition, independent of the reference."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float64)
    for oc in range(o):
        g = oc // (o // groups)
        for i in range(oh):
            for j in range(ow):
                window = xp[:, g * cg:(g + 1) * cg, i * stride:i * stride + kh, j * stride:j * stride + kw]
                out[:, oc, i, j] = (window * w[oc]).sum(axis=(1, 2, 3))
    return out


def max_pool_loops(x, size, stride):
    n, c, h, w = x.shape
    oh, ow = (h - size) // stride + 1, (w - size) // stride + 1
    out = np.empty((n, c, oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            out[:, :, i, j] = x[:, :, i * stride:i * stride + size, j * stride:j * stride + size].max(axis=(2, 3))
    return out


@settings(max_examples=3, deadline=None)
@given(h=st.integers(4, 9), w=st.integers(4, 9), seed=st.integers(0, 2**31))
def test_conv_net_matches_loops_on_every_target(h, w, seed):
    mod = module_of(CONV_NET)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((1, 4, h, w)).astype("float32")
    w1 = rng.standard_normal((8, 2, 3, 3)).astype("float32")
    w2 = rng.standard_normal((8, 8, 1, 1)).astype("float32")
    hidden = np.maximum(conv2d_loops(x, w1, 2, 1, 2), 0)
    expected = max_pool_loops(conv2d_loops(hidden, w2, 1, 0, 1), 2, 2).astype("float32")
    got = assert_runs_alike(mod, x, w1, w2, tol=1e-4)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_conv_net_round_trips():
    text = assert_round_trip(module_of(CONV_NET))
    assert "R.nn.conv2d(x, w1, strides=(2, 2), padding=(1, 1, 1, 1)" in text and "groups=2" in text
    # TVM's "void" out_dtype is "none given"
    assert 'out_dtype=None' in text


@settings(max_examples=4, deadline=None)
@given(h=st.integers(1, 7), w=st.integers(3, 8), seed=st.integers(0, 2**31))
def test_pools_and_conv1d_run_alike(h, w, seed):
    mod = module_of(POOLS)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, h, w)).astype("float32")
    s = rng.standard_normal((2, 3, w)).astype("float32")
    k = rng.standard_normal((4, 3, 3)).astype("float32")
    a, b, c, d = assert_runs_alike(mod, x, s, k, tol=1e-4)
    # adaptive bins: rows floor(i * h / 2) .. ceil((i + 1) * h / 2)
    rows = [(0, -(-h // 2)), (h // 2, h)]
    cols = [(0, -(-w // 3)), (w // 3, -(-2 * w // 3)), (2 * w // 3, w)]
    for i, (r0, r1) in enumerate(rows):
        for j, (c0, c1) in enumerate(cols):
            np.testing.assert_allclose(c[:, :, i, j], x[:, :, r0:r1, c0:c1].mean(axis=(2, 3)),
                                       rtol=1e-5, atol=1e-6)
    # conv1d: left pad 2, dilation 2 -> output position i reads s[i - 2], s[i], s[i + 2]
    sp = np.pad(s, [(0, 0), (0, 0), (2, 0)])
    want = sum(np.einsum("nc...,oc->no...", sp[:, :, 2 * t:2 * t + d.shape[2]], k[:, :, t])
               for t in range(3))
    np.testing.assert_allclose(d, want, rtol=1e-4, atol=1e-4)
    # count_include_pad with ceil_mode: a corner window counts its padded cells, not the overhang
    np.testing.assert_allclose(a[:, :, 0, 0], x[:, :, :2, :2].sum(axis=(2, 3)) / 9, rtol=1e-5)


def test_pools_round_trip():
    text = assert_round_trip(module_of(POOLS))
    assert "R.nn.adaptive_avg_pool2d(x, output_size=(2, 3)" in text and "ceil_mode=True" in text


@pytest.mark.parametrize("source, error, message", [
    ("R.nn.conv2d(x, R.zeros((4, 3, 3, 3), 'float32'))", OpDeductionError, "data has 4 channels"),
    ("R.nn.conv2d(x, R.zeros((4, 4, 3), 'float32'))", OpDeductionError, "weight must have 4 dims"),
    # permuted layouts are transposes around NCHW (test_tvmscript_sweep_forms); split ones
    # (test_tvm_corpus_s13) need the split axis: NCHW4c is 5-d
    ("R.nn.conv2d(x, R.zeros((4, 4, 3, 3), 'float32'), data_layout='NCHW4c')", OpAttributeError,
     "data_layout 'NCHW4c' has 5 axes but the operand has 4 dims"),
    ("R.nn.conv2d(x, R.zeros((4, 4, 3, 3), 'float32'), strides=[0, 1])", OpAttributeError,
     "strides must be at least 1"),
    ("R.nn.max_pool2d(x, pool_size=[2, 2], padding=[1, 1, 1])", OpAttributeError,
     "padding must be an int, 2 or 4 ints"),
    ("R.nn.avg_pool2d(R.astype(x, 'int32'))", OpDeductionError, "requires a floating-point"),
])
def test_bad_arguments_name_the_op_and_argument(source, error, message):
    from tensorir.errors import ParseError
    text = f'''
@R.function
def main(x: R.Tensor((1, 4, 8, 8), dtype="float32")):
    y = {source}
    return y
'''
    with pytest.raises((error, ParseError), match=message):
        module_of(text)


TRANSPOSED = '''
@R.function
def main(x: R.Tensor(("n", 3, 7, 6), dtype="float32"), w: R.Tensor((4, 3, 3, 3), dtype="float32"), g: R.Tensor(("n", 4, 4, 3), dtype="float32")):
    n = T.int64()
    with R.dataflow():
        y: R.Tensor((n, 4, 4, 3), dtype="float32") = R.nn.conv2d(x, w, strides=[2, 2], padding=[1, 1, 1, 1])
        back: R.Tensor((n, 3, 7, 6), dtype="float32") = R.nn.conv2d_transpose(g, w, strides=[2, 2], padding=[1, 1, 1, 1], output_padding=[0, 1], dilation=[1, 1], groups=1, data_layout="NCHW", kernel_layout="IOHW", out_layout="NCHW", out_dtype="void")
        gv = (y, back)
        R.output(gv)
    return gv
'''


@settings(max_examples=3, deadline=None)
@given(n=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_conv2d_transpose_is_the_adjoint_of_conv2d_on_every_target(n, seed):
    """<conv2d(x, w), g> == <x, conv2d_transpose(g, w)>: an independent definition."""
    mod = module_of(TRANSPOSED)
    assert_round_trip(mod)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3, 7, 6)).astype("float32")
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    g = rng.standard_normal((n, 4, 4, 3)).astype("float32")
    y, back = assert_runs_alike(mod, x, w, g, tol=1e-4)
    # float32 outputs: the error scales with the terms of the sums, not with the (cancelling) total
    magnitude = np.vdot(np.abs(y).astype("float64"), np.abs(g))
    np.testing.assert_allclose(np.vdot(y.astype("float64"), g), np.vdot(x.astype("float64"), back),
                               rtol=1e-4, atol=1e-6 * magnitude)
