"""TVM graph ops found missing by the s11 sweep of public TVMScript (docs/ARCHITECTURE.md,
"s11-tvmcorpus"): R.nn.conv3d_transpose, R.median, R.image.affine_grid. Sources are written
for this project in the style TVM's printer writes: each parses, round-trips, and runs on the
interpreter and every VM target equal to NumPy formulas written here (not the op
references), with the symbolic dims bound to several values by hypothesis."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.op.registry import OpDeductionError
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

# ---------------------------------------------------------------- conv3d_transpose
CONV3D_ADJOINT = '''
@R.function
def main(x: R.Tensor((1, 2, "d", 5, 4), dtype="float32"), w: R.Tensor((3, 2, 2, 3, 1), dtype="float32"), g: R.Tensor((1, 3, "e", 2, 4), dtype="float32")):
    d = T.int64()
    e = T.int64()
    with R.dataflow():
        y = R.nn.conv3d(x, w, strides=[2, 2, 1], padding=[1, 0, 0, 0, 1, 0], dilation=[1, 1, 1], data_layout="NCDHW", kernel_layout="OIDHW")
        back = R.nn.conv3d_transpose(g, w, strides=[2, 2, 1], padding=[1, 0, 0, 0, 1, 0], output_padding=[1, 1, 0], dilation=[1, 1, 1], groups=1, data_layout="NCDHW", kernel_layout="IODHW", out_layout="NCDHW", out_dtype="void")
        gv = (y, back)
        R.output(gv)
    return gv
'''


@settings(max_examples=5, deadline=None)
@given(e=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_conv3d_transpose_is_the_adjoint_of_conv3d_on_every_target(e, seed):
    """<conv3d(x, w), g> == <x, conv3d_transpose(g, w)>: an independent definition. Depth
    ``d = 2 e`` (stride 2, pad 1 + 0, kernel 2) gives conv3d depth ``e``; output_padding 1
    restores the dropped last row of each strided axis."""
    rng = np.random.default_rng(seed)
    d = 2 * e
    x = rng.standard_normal((1, 2, d, 5, 4)).astype("float32")
    w = rng.standard_normal((3, 2, 2, 3, 1)).astype("float32")
    g = rng.standard_normal((1, 3, e, 2, 4)).astype("float32")
    y, back = assert_runs_alike(module_of(CONV3D_ADJOINT), x, w, g, tol=1e-4)
    assert y.shape == g.shape and back.shape == x.shape
    np.testing.assert_allclose(float((y.astype("float64") * g).sum()),
                               float((x.astype("float64") * back).sum()), rtol=1e-4, atol=1e-4)


CONV3D_T_GROUPED = '''
@R.function
def main(x: R.Tensor((2, 4, "n", 3, 2), dtype="float32"), w: R.Tensor((4, 1, 2, 2, 3), dtype="float32")):
    n = T.int64()
    y = R.nn.conv3d_transpose(x, w, strides=[1, 2, 1], padding=[0, 1, 1, 1, 0, 0], output_padding=[0, 1, 0], dilation=[2, 1, 1], groups=2)
    return y
'''


def _conv3d_transpose_loops(x, w, strides, padding, output_padding, dilation, groups):
    """Scatter every input element through every tap, then cut the padding: written out."""
    n, c, *spatial = x.shape
    _, per_out, *kernel = w.shape
    in_group = c // groups
    full = [(spatial[i] - 1) * strides[i] + dilation[i] * (kernel[i] - 1) + 1 + output_padding[i]
            for i in range(3)]
    out = np.zeros((n, per_out * groups, *full), "float64")
    for b, ci, z, yy, xx in np.ndindex(n, c, *spatial):
        grp = ci // in_group
        for o, kz, ky, kx in np.ndindex(per_out, *kernel):
            pos = (z * strides[0] + kz * dilation[0], yy * strides[1] + ky * dilation[1],
                   xx * strides[2] + kx * dilation[2])
            out[(b, grp * per_out + o, *pos)] += x[b, ci, z, yy, xx] * w[ci, o, kz, ky, kx]
    lo, hi = padding[:3], padding[3:]
    return out[:, :, lo[0]:full[0] - hi[0], lo[1]:full[1] - hi[1], lo[2]:full[2] - hi[2]]


@settings(max_examples=5, deadline=None)
@given(n=st.integers(1, 3), seed=st.integers(0, 2**31))
def test_grouped_dilated_conv3d_transpose_matches_scatter_loops(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 4, n, 3, 2)).astype("float32")
    w = rng.standard_normal((4, 1, 2, 2, 3)).astype("float32")
    got = assert_runs_alike(module_of(CONV3D_T_GROUPED), x, w, tol=1e-5)
    want = _conv3d_transpose_loops(x, w, (1, 2, 1), (0, 1, 1, 1, 0, 0), (0, 1, 0), (2, 1, 1), 2)
    assert got.shape == want.shape == (2, 2, n + 1, 6, 3)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


CONV3D_T_NDHWC = '''
@R.function
def main(data: R.Tensor((1, 3, 3, "n", 2), dtype="float32"), kernel: R.Tensor((2, 2, 1, 4, 2), dtype="float32")):
    n = T.int64()
    with R.dataflow():
        gv = R.nn.conv3d_transpose(data, kernel, strides=[1, 1, 1], padding=[0, 0, 0, 0, 0, 0], output_padding=[0, 0, 0], dilation=[1, 1, 1], groups=1, data_layout="NDHWC", kernel_layout="DHWOI", out_layout="NDHWC", out_dtype="void")
        R.output(gv)
    return gv
'''


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_conv3d_transpose_in_tvm_frontend_layouts(n, seed):
    """NDHWC data with a DHWOI kernel (TVM's TFLite frontend) is the NCDHW/IODHW op between
    transposes: compare with the scatter loops on the transposed operands."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((1, 3, 3, n, 2)).astype("float32")
    kernel = rng.standard_normal((2, 2, 1, 4, 2)).astype("float32")
    got = assert_runs_alike(module_of(CONV3D_T_NDHWC), data, kernel, tol=1e-5)
    want = _conv3d_transpose_loops(data.transpose(0, 4, 1, 2, 3), kernel.transpose(4, 3, 0, 1, 2),
                                   (1, 1, 1), (0,) * 6, (0, 0, 0), (1, 1, 1), 1)
    np.testing.assert_allclose(got, want.transpose(0, 2, 3, 4, 1), rtol=1e-5, atol=1e-5)


def test_conv3d_transpose_round_trips_and_refuses_bad_forms():
    text = assert_round_trip(module_of(CONV3D_T_GROUPED))
    assert "R.nn.conv3d_transpose(x, w, strides=(1, 2, 1)" in text
    assert_round_trip(module_of(CONV3D_T_NDHWC))
    src = ('@R.function\ndef main(x: R.Tensor((1, 2, 3, 3, 3), "float32"), '
           'w: R.Tensor((3, 2, 2, 2, 2), "float32")):\n'
           '    y = R.nn.conv3d_transpose(x, w)\n    return y\n')
    with pytest.raises(OpDeductionError, match="data has 2 channels but weight"):
        module_of(src)
    with pytest.raises(OpDeductionError, match="must have 5 dims"):
        module_of(src.replace("(3, 2, 2, 2, 2)", "(2, 2, 2, 2)"))
    with pytest.raises(ParseError, match="output_padding") as err:
        module_of(src.replace("(3, 2, 2, 2, 2)", "(2, 3, 2, 2, 2)").replace(
            "(x, w)", "(x, w, output_padding=[1, 0, 0])"))
    assert ":3" in str(err.value)


# ---------------------------------------------------------------- median
MEDIANS = '''
@R.function
def main(x: R.Tensor(("n", "m"), dtype="float32"), k: R.Tensor(("m", 3), dtype="int32")):
    n = T.int64()
    m = T.int64()
    with R.dataflow():
        rows: R.Tuple(R.Tensor((n,), dtype="float32"), R.Tensor((n,), dtype="int64")) = R.median(x, axis=[1])
        cols: R.Tuple(R.Tensor((1, m), dtype="float32"), R.Tensor((1, m), dtype="int64")) = R.median(x, axis=0, keepdims=True)
        whole: R.Tensor((), dtype="float32") = R.median(x)
        whole_kept: R.Tensor((1, 1), dtype="float32") = R.median(x, keepdims=True)
        ints: R.Tuple(R.Tensor((3,), dtype="int32"), R.Tensor((3,), dtype="int64")) = R.median(k, axis=-2)
        gv = (rows, cols, whole, whole_kept, ints)
        R.output(gv)
    return gv
'''


def _check_median_along(x, axis, values, indices):
    """``values`` is the element ranked ``(size - 1) // 2`` (ties by position) and ``indices``
    its position: counted directly, not by a sort."""
    moved = np.moveaxis(x, axis, -1)
    size = moved.shape[-1]
    for lead in np.ndindex(*moved.shape[:-1]):
        row, i = moved[lead], int(indices[lead])
        assert row[i] == values[lead]
        below = int((row < row[i]).sum()) + int((row[:i] == row[i]).sum())
        assert below == (size - 1) // 2, (row, i)


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 5), m=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_median_matches_counted_ranks_on_every_target(n, m, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=(n, m)).astype("float32")     # small ints: ties are likely
    x[rng.random((n, m)) < 0.3] += 0.5
    k = rng.integers(-5, 6, size=(m, 3)).astype("int32")
    (rv, ri), (cv, ci), whole, whole_kept, (kv, ki) = assert_runs_alike(module_of(MEDIANS), x, k)
    _check_median_along(x, 1, rv, ri)
    _check_median_along(x, 0, cv[0], ci[0])
    _check_median_along(k, 0, kv, ki)
    assert ri.dtype == np.int64 and kv.dtype == np.int32
    lower = sorted(x.reshape(-1).tolist())[(x.size - 1) // 2]
    assert whole.shape == () and float(whole) == lower
    assert whole_kept.shape == (1, 1) and float(whole_kept[0, 0]) == lower


def test_median_round_trips_and_refuses_bad_forms():
    text = assert_round_trip(module_of(MEDIANS))
    assert "R.median(x, axis=1, keepdims=False)" in text
    src = ('@R.function\ndef main(x: R.Tensor((2, 3), "float32")):\n'
           '    y = R.median(x, axis=[0, 1])\n    return y\n')
    with pytest.raises(ParseError, match="axis must be None or a single axis") as err:
        module_of(src)
    assert ":3" in str(err.value)
    with pytest.raises(OpDeductionError, match="axis 2 is out of range"):
        module_of(src.replace("[0, 1]", "2"))
    with pytest.raises(OpDeductionError, match="is empty"):
        module_of(src.replace("(2, 3)", "(2, 0)").replace("[0, 1]", "1"))


# ---------------------------------------------------------------- affine_grid
AFFINE_GRIDS = '''
@R.function
def main(theta: R.Tensor(("b", 2, 3), dtype="float32"), like: R.Tensor(("h", "w"), dtype="float32")):
    b = T.int64()
    h = T.int64()
    w = T.int64()
    with R.dataflow():
        corners: R.Tensor((b, 2, h, w), dtype="float32") = R.image.affine_grid(theta, size=(h, w))
        centres: R.Tensor((b, 2, 4, w), dtype="float32") = R.image.affine_grid(theta, size=(4, w), align_corners=False)
        gv = (corners, centres)
        R.output(gv)
    return gv
'''


def _axis(count, align_corners):
    if count == 1:
        return np.zeros(1)
    if align_corners:
        return np.array([-1 + 2 * i / (count - 1) for i in range(count)])
    return np.array([(2 * i + 1) / count - 1 for i in range(count)])


@settings(max_examples=8, deadline=None)
@given(b=st.integers(1, 3), h=st.integers(1, 6), w=st.integers(1, 7), seed=st.integers(0, 2**31))
def test_affine_grid_matches_the_affine_map_on_every_target(b, h, w, seed):
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((b, 2, 3)).astype("float32")
    corners, centres = assert_runs_alike(module_of(AFFINE_GRIDS), theta,
                                         np.zeros((h, w), "float32"), tol=1e-5)
    for got, rows, align in ((corners, h, True), (centres, 4, False)):
        ys, xs = _axis(rows, align), _axis(w, align)
        for bi, d, i, j in np.ndindex(b, 2, rows, w):
            want = theta[bi, d, 0] * xs[j] + theta[bi, d, 1] * ys[i] + theta[bi, d, 2]
            assert abs(got[bi, d, i, j] - want) <= 1e-5 * (1 + abs(want))


def test_affine_grid_round_trips_and_refuses_bad_forms():
    text = assert_round_trip(module_of(AFFINE_GRIDS))
    assert "align_corners=False" in text
    src = ('@R.function\ndef main(t: R.Tensor((2, 2, 3), "float32")):\n'
           '    y = R.image.affine_grid(t, size=(4, 4))\n    return y\n')
    assert module_of(src)["main"].ret_struct_info.shape is not None
    with pytest.raises(OpDeductionError, match=r"must be \(batch, 2, 3\)"):
        module_of(src.replace("(2, 2, 3)", "(2, 3, 3)"))
    with pytest.raises(OpDeductionError, match="must be a float tensor"):
        module_of(src.replace('"float32"', '"int32"'))
    with pytest.raises(ParseError, match="align_corners must be a bool") as err:
        module_of(src.replace("size=(4, 4)", 'size=(4, 4), align_corners="yes"'))
    assert ":3" in str(err.value)


# ---------------------------------------------------------------- resize3d
RESIZE3D = '''
@R.function
def main(x: R.Tensor((2, 3, "d", 4, 3), dtype="float32")):
    d = T.int64()
    with R.dataflow():
        near: R.Tensor((2, 3, d * 2, 2, 6), dtype="float32") = R.image.resize3d(x, size=(d * 2, 2, 6), layout="NCDHW", method="nearest_neighbor", coordinate_transformation_mode="asymmetric", rounding_method="floor")
        lin: R.Tensor((2, 3, 3, 5, 3), dtype="float32") = R.image.resize3d(x, R.shape([5, 3, 3]), layout="NHWDC", method="linear", coordinate_transformation_mode="half_pixel")
        gv = (near, lin)
        R.output(gv)
    return gv
'''


def _lerp_axis(x, axis, out_size):
    """Half-pixel linear resampling of one axis (float64, clamped neighbours)."""
    n = x.shape[axis]
    pos = (np.arange(out_size) + 0.5) * n / out_size - 0.5
    lo = np.floor(pos).astype(int)
    t = pos - lo
    a = np.take(x, np.clip(lo, 0, n - 1), axis=axis)
    b = np.take(x, np.clip(lo + 1, 0, n - 1), axis=axis)
    shape = [1] * x.ndim
    shape[axis] = out_size
    return a * (1 - t.reshape(shape)) + b * t.reshape(shape)


@settings(max_examples=6, deadline=None)
@given(d=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_resize3d_nearest_and_trilinear_on_every_target(d, seed):
    """Nearest with floor rounding at an exact 1/2 scale repeats each source element; the
    separable trilinear form in float64 equals the float32 kernels to rounding."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, d, 4, 3)).astype("float32")
    near, lin = assert_runs_alike(module_of(RESIZE3D), x, tol=1e-5)
    want_near = x.repeat(2, axis=2)[:, :, :, ::2, :].repeat(2, axis=4)
    np.testing.assert_array_equal(near, want_near)
    # layout NHWDC: axis 1 is H, 2 is W, 3 is D; size (5, 3, 3) is in D, H, W order
    want = x.astype("float64")
    for axis, size in ((3, 5), (1, 3), (2, 3)):
        want = _lerp_axis(want, axis, size)
    np.testing.assert_allclose(lin, want, rtol=1e-5, atol=1e-5)


def test_resize3d_round_trips_and_refuses_bad_forms():
    text = assert_round_trip(module_of(RESIZE3D))
    assert 'layout="NHWDC"' in text
    src = ('@R.function\ndef main(x: R.Tensor((1, 2, 4, 4, 4), "float32")):\n'
           '    y = R.image.resize3d(x, size=(2, 2, 2), layout="NCDHW")\n    return y\n')
    module_of(src)
    with pytest.raises(ParseError, match="layout 'NCDHW8c' is not supported") as err:
        module_of(src.replace('"NCDHW"', '"NCDHW8c"'))
    assert ":3" in str(err.value)
    with pytest.raises(ParseError, match="method \"cubic\" is not supported"):
        module_of(src.replace('layout="NCDHW"', 'method="cubic"'))
    with pytest.raises(OpDeductionError, match="size has 3 values"):
        module_of(src.replace("size=(2, 2, 2)", "R.shape([2, 2])"))


# ---------------------------------------------------------------- slice_scatter, take modes, clip
CIRCULAR_PAD = '''
@R.function
def main(x: R.Tensor((2, "n"), dtype="float32"), idx: R.Tensor((5,), dtype="int64")):
    n = T.int64()
    with R.dataflow():
        z: R.Tensor((2, n + 2), dtype="float32") = R.zeros(R.shape([2, n + 2]), dtype="float32")
        mid: R.Tensor((2, n + 2), dtype="float32") = R.slice_scatter(z, x, R.prim_value(2), R.prim_value(100), R.prim_value(1), axis=1)
        head = R.strided_slice(x, axes=[1], begin=[n - 2], end=[n])
        left: R.Tensor((2, n + 2), dtype="float32") = R.slice_scatter(mid, head, 0, 2, 1, axis=1)
        strided: R.Tensor((2, n + 2), dtype="float32") = R.slice_scatter(left, R.full(R.shape([2, 2]), R.const(7, "float32"), dtype="float32"), start=1, end=100, step=n, axis=-1)
        clipped: R.Tensor((2, 5), dtype="float32") = R.take(x, idx, axis=1, mode="clip")
        wrapped: R.Tensor((2, 5), dtype="float32") = R.take(x, idx, axis=1, mode="wrap")
        fast: R.Tensor((2, 5), dtype="float32") = R.take(x, R.clip(idx, R.prim_value(0), R.prim_value(1)), axis=1, mode="fast")
        gv = (left, strided, clipped, wrapped, fast)
        R.output(gv)
    return gv
'''


@settings(max_examples=8, deadline=None)
@given(n=st.integers(2, 7), seed=st.integers(0, 2**31))
def test_slice_scatter_take_modes_and_prim_clip_on_every_target(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, n)).astype("float32")
    idx = rng.integers(-2 * n, 2 * n, size=5).astype("int64")
    src = CIRCULAR_PAD.replace("step=n,", f"step={n},")
    left, strided, clipped, wrapped, fast = assert_runs_alike(module_of(src), x, idx)
    want = np.zeros((2, n + 2), "float32")
    want[:, 2:n + 2] = x
    want[:, 0:2] = x[:, n - 2:n]     # a circular pad of 2 on the left
    np.testing.assert_array_equal(left, want)
    want[:, [1, n + 1]] = 7
    np.testing.assert_array_equal(strided, want)
    np.testing.assert_array_equal(clipped, x[:, [min(max(int(i), 0), n - 1) for i in idx]])
    np.testing.assert_array_equal(wrapped, x[:, [int(i) % n for i in idx]])
    np.testing.assert_array_equal(fast, x[:, [min(max(int(i), 0), 1) for i in idx]])


def test_slice_scatter_and_take_modes_round_trip_and_refuse_bad_forms():
    text = assert_round_trip(module_of(CIRCULAR_PAD.replace("step=n,", "step=3,")))
    assert 'mode="clip"' in text and 'mode="fast"' in text
    assert "R.slice_scatter(left, " in text and "start=1, end=100, step=3, axis=-1" in text
    with pytest.raises(ParseError, match="step must be an int, got n") as err:
        module_of(CIRCULAR_PAD)     # step=n: symbolic
    assert ":10" in str(err.value)
    src = ('@R.function\ndef main(x: R.Tensor((4, 6), "float32"), s: R.Tensor((4, 2), "float32")):\n'
           '    y = R.slice_scatter(x, s, 1, 5, 2, axis=1)\n    return y\n')
    module_of(src)
    with pytest.raises(OpDeductionError, match="does not fit the slice 1:6:1 of axis 1"):
        module_of(src.replace("1, 5, 2", "1, 6, 1"))
    with pytest.raises(ParseError, match="step must be at least 1"):
        module_of(src.replace("1, 5, 2", "1, 5, 0"))
    with pytest.raises(ParseError, match="mode must be one of fast, clip, wrap"):
        module_of(src.replace("R.slice_scatter(x, s, 1, 5, 2, axis=1)",
                              'R.take(x, R.const([0], "int64"), axis=1, mode="nearest")'))


# ---------------------------------------------------------------- mod
ROLL = '''
@R.function
def main(x: R.Tensor(("n", 3), dtype="int64"), a: R.Tensor(("n", 3), dtype="float32"), b: R.Tensor((3,), dtype="float32"), k: R.Tensor(("n", 3), dtype="int32")):
    n = T.int64()
    with R.dataflow():
        pos: R.Tensor((n,), dtype="int64") = R.arange(R.prim_value(0), R.prim_value(n), R.prim_value(1), dtype="int64")
        shifted: R.Tensor((n,), dtype="int64") = R.add(pos, R.const(2, "int64"))
        src: R.Tensor((n,), dtype="int64") = R.mod(shifted, R.shape_to_tensor(R.shape([n])))
        rolled: R.Tensor((n, 3), dtype="int64") = R.take(x, src, axis=0, mode="fast")
        fm: R.Tensor((n, 3), dtype="float32") = R.mod(a, b)
        im: R.Tensor((n, 3), dtype="int32") = R.mod(k, R.const(-3, "int32"))
        gv = (rolled, fm, im)
        R.output(gv)
    return gv
'''


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_mod_is_the_truncating_remainder_on_every_target(n, seed):
    """R.mod keeps the dividend's sign (C's %, fmod), unlike floor_mod; with it, arange + mod +
    take rolls an axis (TVM's torch.roll decomposition)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-9, 10, size=(n, 3)).astype("int64")
    a = rng.uniform(-6, 6, size=(n, 3)).astype("float32")
    b = np.array([1.5, -2.25, 4.0], "float32")
    k = rng.integers(-20, 21, size=(n, 3)).astype("int32")
    rolled, fm, im = assert_runs_alike(module_of(ROLL), x, a, b, k, tol=1e-6)
    np.testing.assert_array_equal(rolled, np.roll(x, -2, axis=0))
    for i, j in np.ndindex(n, 3):
        q = int(a[i, j] / b[j])          # truncated quotient
        assert abs(fm[i, j] - (a[i, j] - q * b[j])) <= 1e-5 * (1 + abs(a[i, j]))
        assert fm[i, j] == 0 or np.sign(fm[i, j]) == np.sign(a[i, j])
        r = abs(int(k[i, j])) % 3
        assert im[i, j] == (r if k[i, j] >= 0 else -r)


def test_mod_round_trips_and_checks_dtypes():
    assert "R.mod(shifted, " in assert_round_trip(module_of(ROLL))
    with pytest.raises(OpDeductionError):
        module_of('@R.function\ndef main(x: R.Tensor((2,), "float32"), y: R.Tensor((2,), "int32")):\n'
                  '    z = R.mod(x, y)\n    return z\n')


def test_return_annotation_none_means_deduced():
    """``-> None`` on a graph function is no annotation (TVM deduces the result), also for a
    callee whose result its caller's deduction needs first."""
    src = '''
@I.ir_module
class Module:
    @R.function
    def main(x1: R.Tensor((3, 3), dtype="float32")):
        res1 = Module.mul(x1)
        return res1

    @R.function
    def mul(x: R.Tensor((3, 3), dtype="float32")) -> None:
        res = R.multiply(x, x)
        return res
'''
    mod = module_of(src)
    plain = module_of(src.replace(" -> None:", ":"))
    import relaxscript as rx
    rx.assert_structural_equal(mod, plain)
    assert mod["main"].ret_struct_info.shape is not None
    x = np.arange(9, dtype="float32").reshape(3, 3)
    np.testing.assert_array_equal(assert_runs_alike(mod, x), x * x)
    with pytest.raises(ParseError, match="expected an annotation") as err:
        module_of(src.replace(" -> None:", " -> 3:"))
    assert ":10" in str(err.value)


# ---------------------------------------------------------------- gather_elements
GATHERS = '''
@R.function
def main(x: R.Tensor(("n", 4), dtype="float32"), i0: R.Tensor((2, 3), dtype="int64"), i1: R.Tensor(("n", 6), dtype="int32")):
    n = T.int64()
    with R.dataflow():
        rows: R.Tensor((2, 3), dtype="float32") = R.gather_elements(x, i0, axis=0)
        cols: R.Tensor((n, 6), dtype="float32") = R.gather_elements(x, i1, axis=-1)
        gv = (rows, cols)
        R.output(gv)
    return gv
'''


@settings(max_examples=8, deadline=None)
@given(n=st.integers(2, 6), seed=st.integers(0, 2**31))
def test_gather_elements_on_every_target(n, seed):
    """torch.gather's meaning, negative indices from the end; the indices may be smaller than
    the data on the other axes (2 x 3 of n x 4)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype("float32")
    i0 = rng.integers(-n, n, size=(2, 3)).astype("int64")
    i1 = rng.integers(-4, 4, size=(n, 6)).astype("int32")
    rows, cols = assert_runs_alike(module_of(GATHERS), x, i0, i1)
    for a, b in np.ndindex(2, 3):
        assert rows[a, b] == x[int(i0[a, b]) % n, b]
    for a, b in np.ndindex(n, 6):
        assert cols[a, b] == x[a, int(i1[a, b]) % 4]


def test_gather_elements_refuses_bad_forms_and_indices():
    assert "R.gather_elements(x, i1, axis=-1)" in assert_round_trip(module_of(GATHERS))
    src = ('@R.function\ndef main(x: R.Tensor((2, 4), "float32"), i: R.Tensor((2, 4), "int64")):\n'
           '    y = R.gather_elements(x, i, axis=1)\n    return y\n')
    with pytest.raises(OpDeductionError, match="is larger than data"):
        module_of(src.replace('i: R.Tensor((2, 4)', 'i: R.Tensor((3, 4)'))
    with pytest.raises(OpDeductionError, match="must have the 2 dims"):
        module_of(src.replace('i: R.Tensor((2, 4)', 'i: R.Tensor((2, 4, 1)'))
    with pytest.raises(OpDeductionError, match="integer"):
        module_of(src.replace('"int64"', '"float32"'))
    import relaxscript as rx
    mod = module_of(src)
    bad = np.array([[0, 1, 2, 4], [0, 0, 0, 0]], "int64")     # 4 is past the axis
    with pytest.raises(Exception, match="index|out of range|bounds"):
        rx.interpret(mod, "main", np.zeros((2, 4), "float32"), bad)
    with pytest.raises(Exception, match="index|out of range|bounds"):
        rx.VirtualMachine(rx.build(mod, target="c"))["main"](np.zeros((2, 4), "float32"), bad)


# ---------------------------------------------------------------- index_put
INDEX_PUTS = '''
@R.function
def main(data: R.Tensor((5, "n"), dtype="float32"), cols: R.Tensor((7,), dtype="int64"), v: R.Tensor((7,), dtype="float32"), r: R.Tensor(("k",), dtype="int64"), c: R.Tensor(("k",), dtype="int64")):
    n = T.int64()
    k = T.int64()
    with R.dataflow():
        rows: R.Tensor((5, 1), dtype="int64") = R.expand_dims(R.arange(R.prim_value(0), R.prim_value(5), R.prim_value(1), dtype="int64"), axis=[1])
        grid: R.Tensor((5, n), dtype="float32") = R.index_put(data, R.tuple(rows, cols), v, accumulate=False)
        added: R.Tensor((5, n), dtype="float32") = R.index_put(data, R.tuple(r, c), R.const(1.5, "float32"), accumulate=True)
        gv = (grid, added)
        R.output(gv)
    return gv
'''


@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 6), k=st.integers(1, 9), seed=st.integers(0, 2**31))
def test_index_put_on_every_target(n, k, seed):
    """torch's index_put_: broadcast index tensors (a (5, 1) column against 7 columns), the
    last write of a repeated position kept; with accumulate every write adds (repeats too)."""
    rng = np.random.default_rng(seed)
    data = rng.standard_normal((5, n)).astype("float32")
    cols = rng.integers(-n, n, size=7).astype("int64")
    v = rng.standard_normal(7).astype("float32")
    r = rng.integers(-5, 5, size=k).astype("int64")
    c = rng.integers(-n, n, size=k).astype("int64")
    grid, added = assert_runs_alike(module_of(INDEX_PUTS), data, cols, v, r, c)
    want = data.copy()
    for row in range(5):
        for j in range(7):                 # row-major order: the later j wins
            want[row, int(cols[j]) % n] = v[j]
    np.testing.assert_array_equal(grid, want)
    want = data.astype("float64")
    for a, b in zip(r, c):
        want[int(a) % 5, int(b) % n] += 1.5
    np.testing.assert_allclose(added, want, rtol=1e-6, atol=1e-6)


def test_index_put_round_trips_and_refuses_bad_forms():
    assert "accumulate=True" in assert_round_trip(module_of(INDEX_PUTS))
    src = ('@R.function\ndef main(x: R.Tensor((4, 3), "float32"), i: R.Tensor((2,), "int64"), '
           'j: R.Tensor((2,), "int64"), v: R.Tensor((2,), "float32")):\n'
           '    y = R.index_put(x, R.tuple(i, j), v)\n    return y\n')
    module_of(src)
    with pytest.raises(OpDeductionError, match="one index tensor per axis"):
        module_of(src.replace("R.tuple(i, j)", "R.tuple(i,)"))
    with pytest.raises(OpDeductionError, match="cannot broadcast"):
        module_of(src.replace('v: R.Tensor((2,), "float32")', 'v: R.Tensor((3,), "float32")'))
    with pytest.raises(OpDeductionError, match=r"do not broadcast to the indices' shape \(2,\)"):
        module_of(src.replace('v: R.Tensor((2,), "float32")', 'v: R.Tensor((3, 2), "float32")'))
    with pytest.raises(OpDeductionError, match="integer tensors"):
        module_of(src.replace('j: R.Tensor((2,), "int64")', 'j: R.Tensor((2,), "float32")'))
    with pytest.raises(ParseError, match="accumulate must be a bool") as err:
        module_of(src.replace("R.index_put(x, R.tuple(i, j), v)", 'R.index_put(x, R.tuple(i, j), v, accumulate="no")'))
    assert ":3" in str(err.value)
