"""TVM graph ops found missing by the s10 sweep of public TVMScript (docs/ARCHITECTURE.md,
"s10-tvms"): R.sort, R.einsum, R.std, R.cumprod, R.linear, R.nn.batch_norm / group_norm /
instance_norm / prelu, R.hint_on_device. Sources are written for this project in the
style TVM's printer writes: each parses, round-trips, and runs on the interpreter and
every VM target equal to NumPy formulas (written here, not the op references), with the
symbolic dims bound to several values by hypothesis."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.op.registry import OpAttributeError, OpDeductionError
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

SORTS = '''
@R.function
def main(x: R.Tensor(("n", "m"), dtype="float32")):
    n = T.int64()
    m = T.int64()
    with R.dataflow():
        up: R.Tensor((n, m), dtype="float32") = R.sort(x, axis=-1, descending=False)
        down: R.Tensor((n, m), dtype="float32") = R.sort(x, axis=0, descending=True)
        prod: R.Tensor((n, m), dtype="float32") = R.cumprod(x, axis=1, dtype="float32", exclusive=False)
        prod_ex: R.Tensor((n, m), dtype="float64") = R.cumprod(x, axis=-1, dtype="float64", exclusive=True)
        spread: R.Tensor((n,), dtype="float32") = R.std(x, axis=[1], keepdims=False)
        gv = (up, down, prod, prod_ex, spread)
        R.output(gv)
    return gv
'''


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 5), m=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_sort_cumprod_std_match_numpy_on_every_target(n, m, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=(n, m)).astype("float32")   # small ints: ties are likely
    x[rng.random((n, m)) < 0.3] += 0.5
    up, down, prod, prod_ex, spread = assert_runs_alike(module_of(SORTS), x, tol=1e-5)
    np.testing.assert_array_equal(up, np.sort(x, axis=1))
    np.testing.assert_array_equal(down, np.sort(x, axis=0)[::-1])
    np.testing.assert_allclose(prod, np.cumprod(x, axis=1), rtol=1e-6)
    wide = x.astype("float64")
    want_ex = np.ones_like(wide)
    for j in range(1, m):
        want_ex[:, j] = want_ex[:, j - 1] * wide[:, j - 1]
    np.testing.assert_allclose(prod_ex, want_ex, rtol=1e-12)
    mean = x.mean(axis=1, keepdims=True)
    np.testing.assert_allclose(spread, np.sqrt(((x - mean) ** 2).mean(axis=1)), rtol=1e-5, atol=1e-6)


EINSUMS = '''
@R.function
def main(a: R.Tensor(("b", "n", 4), dtype="float32"), w: R.Tensor((4, "k"), dtype="float32"), v: R.Tensor((1, 4), dtype="float32"), r: R.Tensor(("n", 4), dtype="float32")):
    b = T.int64()
    n = T.int64()
    k = T.int64()
    with R.dataflow():
        mm: R.Tensor((b, n, k), dtype="float32") = R.einsum((a, w), subscripts="bij,jk->bik")
        dots: R.Tensor((n,), dtype="float32") = R.einsum((v, r), subscripts="ij, ij -> i")
        outer: R.Tensor((k, n, 4), dtype="float32") = R.einsum((w, r), subscripts="jk,nj->knj")
        implicit: R.Tensor((b, k, n), dtype="float32") = R.einsum((w, a), subscripts="jk,bnj")
        batched: R.Tensor((b, n), dtype="float32") = R.einsum((a, r), subscripts="...j,...j->...")
        trace: R.Tensor((), dtype="float32") = R.einsum((a,), subscripts="bij->")
        gv = (mm, dots, outer, implicit, batched, trace)
        R.output(gv)
    return gv
'''


@settings(max_examples=6, deadline=None)
@given(b=st.integers(1, 3), n=st.integers(1, 4), k=st.integers(1, 5), seed=st.integers(0, 2**31))
def test_einsum_matches_numpy_loops_on_every_target(b, n, k, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((b, n, 4)).astype("float32")
    w = rng.standard_normal((4, k)).astype("float32")
    v = rng.standard_normal((1, 4)).astype("float32")
    r = rng.standard_normal((n, 4)).astype("float32")
    mm, dots, outer, implicit, batched, trace = assert_runs_alike(module_of(EINSUMS), a, w, v, r,
                                                                  tol=1e-4)
    np.testing.assert_allclose(mm, a @ w, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(dots, (r * v).sum(axis=1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(outer, w.T[:, None, :] * r[None, :, :], rtol=1e-6)
    np.testing.assert_allclose(implicit, np.transpose(a @ w, (0, 2, 1)), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(batched, (a * r).sum(axis=-1), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(trace, a.sum(), rtol=1e-4, atol=1e-4)


def test_einsum_and_sort_round_trip_and_refuse_bad_forms():
    text = assert_round_trip(module_of(EINSUMS))
    assert 'R.einsum((a, w), subscripts="bij,jk->bik")' in text
    assert_round_trip(module_of(SORTS))
    for subscripts, message in (("ij,jk->il", "appears in no input"), ("...i...", "two ellipses"),
                                ("ij->i->j", "more than one"), ("i1", "unexpected")):
        with pytest.raises(ParseError, match=message):
            module_of(f'@R.function\ndef main(x: R.Tensor((2, 3), "float32")):\n'
                      f'    y = R.einsum((x,), "{subscripts}")\n    return y\n')
    with pytest.raises(OpDeductionError, match="does not fit"):
        module_of('@R.function\ndef main(x: R.Tensor((2, 3), "float32")):\n'
                  '    y = R.einsum((x,), "ijk->i")\n    return y\n')
    with pytest.raises(OpDeductionError, match="cannot broadcast"):
        module_of('@R.function\ndef main(x: R.Tensor((2, 3), "float32"), y: R.Tensor((3, 3), "float32")):\n'
                  '    z = R.einsum((x, y), "ij,ij->i")\n    return z\n')


NORMS = '''
@R.function
def main(x: R.Tensor(("n", 4, "h", 3), dtype="float32"), gamma: R.Tensor((4,), dtype="float32"), beta: R.Tensor((4,), dtype="float32"), mean: R.Tensor((4,), dtype="float32"), var: R.Tensor((4,), dtype="float32"), alpha: R.Tensor((1,), dtype="float32")):
    n = T.int64()
    h = T.int64()
    with R.dataflow():
        train: R.Tuple(R.Tensor((n, 4, h, 3), dtype="float32"), R.Tensor((4,), dtype="float32"), R.Tensor((4,), dtype="float32")) = R.nn.batch_norm(x, gamma, beta, mean, var, axis=1, epsilon=1.0000000000000001e-05, center=True, scale=True, momentum=0.10000000000000001, training=True)
        infer: R.Tuple(R.Tensor((n, 4, h, 3), dtype="float32"), R.Tensor((4,), dtype="float32"), R.Tensor((4,), dtype="float32")) = R.nn.batch_norm(x, gamma, beta, mean, var, axis=1, epsilon=0.001, center=False, scale=True, momentum=0.5, training=False)
        groups: R.Tensor((n, 4, h, 3), dtype="float32") = R.nn.group_norm(x, gamma, beta, num_groups=2, channel_axis=1, axes=[2, 3], epsilon=1.0000000000000001e-05, center=True, scale=True)
        inst: R.Tensor((n, 4, h, 3), dtype="float32") = R.nn.instance_norm(x, gamma, beta, channel_axis=1, axes=[2, 3], epsilon=1.0000000000000001e-05, center=True, scale=False)
        leaky: R.Tensor((n, 4, h, 3), dtype="float32") = R.nn.prelu(x, alpha, axis=1)
        per_channel: R.Tensor((n, 4, h, 3), dtype="float32") = R.nn.prelu(x, gamma, axis=1)
        gv = (train, infer, groups, inst, leaky, per_channel)
        R.output(gv)
    return gv
'''


def _c(v):
    return v.reshape(1, 4, 1, 1)


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 3), h=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_norms_and_prelu_match_numpy_formulas_on_every_target(n, h, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4, h, 3)).astype("float32") * 2 + 1
    gamma, beta, mean = (rng.standard_normal(4).astype("float32") for _ in range(3))
    var = rng.random(4).astype("float32") + 0.5
    alpha = np.array([0.25], "float32")
    mod = module_of(NORMS)
    assert_round_trip(mod)
    train, infer, groups, inst, leaky, per_channel = assert_runs_alike(
        mod, x, gamma, beta, mean, var, alpha, tol=2e-4)
    xd = x.astype("float64")
    bmean, bvar = xd.mean(axis=(0, 2, 3)), xd.var(axis=(0, 2, 3))
    np.testing.assert_allclose(train[0], (xd - _c(bmean)) / np.sqrt(_c(bvar) + 1e-5) * _c(gamma)
                               + _c(beta), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(train[1], 0.9 * mean + 0.1 * bmean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(train[2], 0.9 * var + 0.1 * bvar, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(infer[0], (x - _c(mean)) / np.sqrt(_c(var) + 1e-3) * _c(gamma),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(infer[1], mean)
    np.testing.assert_array_equal(infer[2], var)
    want_groups = np.empty_like(xd)
    for b in range(n):
        for g in range(2):
            part = xd[b, 2 * g:2 * g + 2]
            want_groups[b, 2 * g:2 * g + 2] = (part - part.mean()) / np.sqrt(part.var() + 1e-5)
    np.testing.assert_allclose(groups, want_groups * _c(gamma) + _c(beta), rtol=1e-4, atol=1e-4)
    imean, ivar = xd.mean(axis=(2, 3), keepdims=True), xd.var(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(inst, (xd - imean) / np.sqrt(ivar + 1e-5) + _c(beta),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(leaky, np.where(x < 0, x * np.float32(0.25), x))
    np.testing.assert_array_equal(per_channel, np.where(x < 0, x * _c(gamma), x))


def test_norm_deductions_refuse_mismatches():
    head = ('@R.function\ndef main(x: R.Tensor((2, 6, 3), "float32"), g: R.Tensor((6,), "float32"), '
            'b: R.Tensor((5,), "float32")):\n')
    with pytest.raises(OpDeductionError, match="do not split into 4 groups"):
        module_of(head + "    y = R.nn.group_norm(x, g, g, num_groups=4, channel_axis=1, axes=[2])\n"
                  "    return y\n")
    with pytest.raises(OpDeductionError, match="does not match axis 1"):
        module_of(head + "    y = R.nn.batch_norm(x, g, b, g, g, axis=1)\n    return y\n")
    with pytest.raises(OpDeductionError, match="include the channel axis"):
        module_of(head + "    y = R.nn.instance_norm(x, g, g, channel_axis=1, axes=[1, 2])\n"
                  "    return y\n")
    with pytest.raises(ParseError, match="num_groups must be positive"):
        module_of(head + "    y = R.nn.group_norm(x, g, g, num_groups=0, channel_axis=1, axes=[2])\n"
                  "    return y\n")
    assert issubclass(OpAttributeError, ValueError)


LINEAR = '''
@R.function
def main(x: R.Tensor(("n", 5), dtype="float32"), w: R.Tensor((3, 5), dtype="float32"), bias: R.Tensor((3,), dtype="float32")):
    n = T.int64()
    y = R.linear(x, w, bias)
    z = R.hint_on_device(y, R.device(1, 0))
    c = R.hint_on_device(z, R.cpu(), "global")
    return c
'''


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 5), seed=st.integers(0, 2**31))
def test_linear_is_matmul_of_the_transpose_plus_bias(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 5)).astype("float32")
    w = rng.standard_normal((3, 5)).astype("float32")
    bias = rng.standard_normal(3).astype("float32")
    mod = module_of(LINEAR)
    text = assert_round_trip(mod)
    assert "R.permute_dims(w" in text and "R.matmul(" in text and "hint_on_device" not in text
    out = assert_runs_alike(mod, x, w, bias, tol=1e-5)
    np.testing.assert_allclose(out, x @ w.T + bias, rtol=1e-5, atol=1e-5)


def test_hint_on_another_device_is_a_parse_error_at_its_line():
    src = ('@R.function\ndef main(x: R.Tensor((2,), "float32")):\n'
           '    y = R.hint_on_device(x, R.device(2, 0))\n    return y\n')
    with pytest.raises(ParseError, match="the only device is the host CPU") as err:
        module_of(src)
    assert "line 3" in str(err.value) or ":3" in str(err.value)
    with pytest.raises(ParseError, match="scope 'global.texture' is not supported"):
        module_of(src.replace("R.device(2, 0)", 'R.device(1, 0), "global.texture"'))
