"""Graph-level forms the s13 sweep of public TVMScript found missing (docs/ARCHITECTURE.md,
"s13-corpus3"): TVM's split layouts on convolutions and pools (``data_layout="NCHW4c"``,
``kernel_layout="OIHW4o"``: C cut into C // 4 where ``C`` stands and C % 4 where ``4c`` stands),
``n = T.Var("n", "int64")`` as a symbolic-variable declaration, and newer TVM's ``out_ty=``
keyword of the DPS calls. Sources are written for this project; each parses, round-trips and
runs on the interpreter and every VM target, equal to NumPy formulas written here."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of


def _conv_nchw(x, w):
    """Direct NCHW/OIHW convolution, stride 1, no padding."""
    kh, kw = w.shape[2:]
    win = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
    return np.einsum("nchwij,ocij->nohw", win.astype("float64"), w.astype("float64")).astype("float32")


def _unsplit(a, axis, into):
    """Merge a trailing sub-axis (last) back into ``axis``: NCHW4c -> NCHW for axis 1."""
    a = np.moveaxis(a, -1, axis + 1)
    shape = list(a.shape)
    shape[axis:axis + 2] = [shape[axis] * shape[axis + 1]]
    return a.reshape(shape)


def _split(a, axis, factor):
    """NCHW -> NCHW<factor>c for ``axis`` 1 (the sub-axis last)."""
    shape = list(a.shape)
    shape[axis:axis + 1] = [shape[axis] // factor, factor]
    return np.moveaxis(a.reshape(shape), axis + 1, -1)


CONV_SPLIT = '''
@R.function
def main(x: R.Tensor(({n}, {cb}, {h}, {w}, 4), dtype="float32"),
         k: R.Tensor(({ob}, {c}, 3, 2, 4), dtype="float32")):
    with R.dataflow():
        y: R.Tensor(({n}, {ob}, {oh}, {ow}, 4), dtype="float32") = R.nn.conv2d(
            x, k, data_layout="NCHW4c", kernel_layout="OIHW4o", out_layout="NCHW4c",
            out_dtype="float32")
        R.output(y)
    return y
'''


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 2), cb=st.integers(1, 2), ob=st.integers(1, 2), h=st.integers(3, 6),
       w=st.integers(2, 5), seed=st.integers(0, 2**31))
def test_conv2d_in_split_layouts_is_the_convolution_of_the_unsplit_tensors(n, cb, ob, h, w, seed):
    mod = module_of(CONV_SPLIT.format(n=n, cb=cb, ob=ob, h=h, w=w, c=4 * cb, oh=h - 2, ow=w - 1))
    text = assert_round_trip(mod)
    assert "R.layout_transform" in text
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, cb, h, w, 4)).astype("float32")
    k = rng.standard_normal((ob, 4 * cb, 3, 2, 4)).astype("float32")
    plain = _conv_nchw(_unsplit(x, 1, 4), _unsplit(k, 0, 4))
    assert_runs_alike(mod, x, k, expected=_split(plain, 1, 4), tol=1e-4)


CONV_NHWC_SPLIT = '''
@R.function
def main(x: R.Tensor((2, 5, 4, 2, 8), dtype="float32"), k: R.Tensor((3, 16, 3, 2), dtype="float32")):
    y = R.nn.conv2d(x, k, data_layout="NHWC8c", kernel_layout="OIHW", out_layout="NCHW")
    return y
'''


def test_conv2d_split_channels_last_data_with_a_plain_output_layout():
    """"NHWC8c" is (N, H, W, C // 8, C % 8): here C = 16 against a plain OIHW kernel."""
    mod = module_of(CONV_NHWC_SPLIT)
    assert_round_trip(mod)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 4, 2, 8)).astype("float32")
    k = rng.standard_normal((3, 16, 3, 2)).astype("float32")
    plain_x = np.moveaxis(x.reshape(2, 5, 4, 16), 3, 1)
    assert_runs_alike(mod, x, k, expected=_conv_nchw(plain_x, k), tol=1e-4)


POOL_SPLIT = '''
@R.function
def main(x: R.Tensor((1, 2, 6, 5, 4), dtype="float32")):
    y = R.nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 1), layout="NCHW4c")
    return y
'''


def test_max_pool2d_in_a_split_layout_keeps_the_layout():
    mod = module_of(POOL_SPLIT)
    assert_round_trip(mod)
    x = np.random.default_rng(2).standard_normal((1, 2, 6, 5, 4)).astype("float32")
    plain = _unsplit(x, 1, 4)
    win = np.lib.stride_tricks.sliding_window_view(plain, (2, 2), axis=(2, 3))[:, :, ::2, :]
    assert_runs_alike(mod, x, expected=_split(win.max(axis=(-2, -1)), 1, 4))


@pytest.mark.parametrize("layout, message", [
    ("NCHW4x", "not supported"),       # a sub-axis of no primal axis
    ("NCH4c", "not supported"),        # a primal axis missing
    ("NCHW4c4c", "not supported"),     # the same axis split twice
    ("NCHW0c", "not supported"),
])
def test_malformed_split_layouts_are_refused_at_their_line(layout, message):
    src = ('@R.function\ndef main(x: R.Tensor((1, 1, 4, 4, 4), "float32"), '
           'k: R.Tensor((4, 4, 1, 1), "float32")):\n'
           f'    y = R.nn.conv2d(x, k, data_layout="{layout}")\n    return y\n')
    with pytest.raises(ParseError, match=message):
        module_of(src)


# ---------------------------------------------------------------- T.Var declarations, out_ty=
DPS = '''
@I.ir_module
class Module:
    @T.prim_func
    def twice(a: T.handle, b: T.handle):
        n = T.int64()
        A = T.match_buffer(a, (n, 3))
        B = T.match_buffer(b, (n, 3))
        for i, j in T.grid(n, 3):
            with T.block("B"):
                vi, vj = T.axis.remap("SS", [i, j])
                B[vi, vj] = A[vi, vj] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("batch", 3), dtype="float32")) -> R.Tensor(("batch", 3), dtype="float32"):
        batch = T.Var("batch", "int64")
        with R.dataflow():
            y = R.call_tir(Module.twice, (x,), out_ty=R.Tensor((batch, 3), dtype="float32"))
            R.output(y)
        return y
'''


@settings(max_examples=3, deadline=None)
@given(batch=st.integers(1, 5))
def test_t_var_declares_the_signatures_variable_and_out_ty_names_the_output(batch):
    mod = module_of(DPS)
    assert_round_trip(mod)
    main = mod["main"]
    # one variable: the output annotation's dim is the parameter's
    rx.assert_structural_equal(main.ret_struct_info, main.params[0].struct_info)
    x = np.random.default_rng(batch).standard_normal((batch, 3)).astype("float32")
    assert_runs_alike(mod, x, expected=x * 2)


def test_t_var_under_another_name_is_refused():
    src = DPS.replace('batch = T.Var("batch", "int64")', 'b = T.Var("batch", "int64")')
    with pytest.raises(ParseError, match="uses its own name"):
        module_of(src)


TY = '''
@R.function
def main(x: R.Tensor(("n", 3), dtype="float32")):
    y = R.call_pure_packed("numpy.negative", x, ty_args=[x.ty])
    z = R.call_pure_packed("numpy.negative", y, sinfo_args=[y.struct_info])
    return (y, z)
'''


def test_ty_is_the_annotation_of_a_value_and_ty_args_names_sinfo_args():
    """Newer TVM writes ``x.ty`` for ``x.struct_info`` and ``ty_args=`` for ``sinfo_args=``."""
    mod = module_of(TY)
    assert_round_trip(mod)
    text = mod.script()
    assert text.count('sinfo_args=[R.Tensor((n, 3), dtype="float32")]') == 2, text
    x = np.random.default_rng(0).standard_normal((4, 3)).astype("float32")
    y, z = rx.interpret(mod, "main", x)
    np.testing.assert_array_equal(y, -x)
    np.testing.assert_array_equal(z, x)
