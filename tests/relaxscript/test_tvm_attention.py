"""R.nn.attention in TVM's BSNH layout, written as TVM's printer writes it: round trip,
and results equal to a per-head NumPy softmax(q k^T) v on the interpreter and the C
build, with the sequence lengths symbolic."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.op.registry import OpAttributeError, OpDeductionError
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

ATTENTION = '''
@R.function
def main(q: R.Tensor((1, "s", 2, 8), dtype="float32"), k: R.Tensor((1, "t", 2, 8), dtype="float32"), v: R.Tensor((1, "t", 2, 4), dtype="float32"), bias: R.Tensor((1, 2, "s", "t"), dtype="float32")):
    s = T.int64()
    t = T.int64()
    with R.dataflow():
        plain: R.Tensor((1, s, 2, 4), dtype="float32") = R.nn.attention(q, k, v)
        causal: R.Tensor((1, s, 2, 4), dtype="float32") = R.nn.attention(q, k, v, scale=0.25, causal_mask="TopLeft")
        biased: R.Tensor((1, s, 2, 4), dtype="float32") = R.nn.attention(q, k, v, bias, causal_mask="BottomRight")
        gv = (plain, causal, biased)
        R.output(gv)
    return gv
'''


def per_head(q, k, v, bias, scale, allowed):
    """Loop over heads and rows: the textbook definition."""
    out = np.zeros(q.shape[:3] + (v.shape[3],), np.float64)
    for h in range(q.shape[2]):
        for i in range(q.shape[1]):
            logits = np.array([q[0, i, h] @ k[0, j, h] * scale + bias[0, h, i, j]
                               if allowed(i, j) else -np.inf for j in range(k.shape[1])])
            p = np.exp(logits - logits.max())
            out[0, i, h] = (p / p.sum()) @ v[0, :, h]
    return out


@settings(max_examples=3, deadline=None)
@given(s=st.integers(1, 5), extra=st.integers(0, 3), seed=st.integers(0, 2**31))
def test_attention_matches_per_head_softmax_on_every_target(s, extra, seed):
    t = s + extra   # every query sees at least one key under either mask
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((1, s, 2, 8)).astype("float32")
    k = rng.standard_normal((1, t, 2, 8)).astype("float32")
    v = rng.standard_normal((1, t, 2, 4)).astype("float32")
    bias = rng.standard_normal((1, 2, s, t)).astype("float32")
    plain, causal, biased = assert_runs_alike(module_of(ATTENTION), q, k, v, bias, tol=1e-4)
    zero = np.zeros_like(bias)
    np.testing.assert_allclose(plain, per_head(q, k, v, zero, 8 ** -0.5, lambda i, j: True),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(causal, per_head(q, k, v, zero, 0.25, lambda i, j: j <= i),
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(biased, per_head(q, k, v, bias, 8 ** -0.5,
                                                lambda i, j: j <= i + t - s), rtol=1e-4, atol=1e-5)


def test_attention_round_trips():
    text = assert_round_trip(module_of(ATTENTION))
    assert 'R.nn.attention(q, k, v, bias, scale=None, causal_mask="BottomRight")' in text


@pytest.mark.parametrize("call, error, message", [
    ('R.nn.attention(q, q, R.zeros((1, 4, 3, 4), "float32"))', OpDeductionError,
     "heads of key .* and value .* differ"),
    ('R.nn.attention(q, R.zeros((1, 4, 2, 5), "float32"), q)', OpDeductionError, "head_dim of query"),
    ('R.nn.attention(q, q, q, causal_mask="Diagonal")', OpAttributeError, "causal_mask must be"),
    ('R.nn.attention(q, q, q, window_size=4)', OpAttributeError, "window_size"),
    ('R.nn.attention(q, q, q, R.zeros((3, 4, 4), "float32"))', OpDeductionError, "cannot broadcast"),
])
def test_bad_attention_arguments_are_clear(call, error, message):
    text = f'''
@R.function
def main(q: R.Tensor((1, 4, 2, 8), dtype="float32")):
    y = {call}
    return y
'''
    with pytest.raises((error, ParseError), match=message):
        module_of(text)
