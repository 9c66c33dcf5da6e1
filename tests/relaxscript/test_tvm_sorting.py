"""R.argsort and R.topk written as TVM's printer writes them: round trip, and results
equal to NumPy's stable sorts on the interpreter and the C build (ties and NaN
included), with the sorted length symbolic."""
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
def main(x: R.Tensor((2, "n"), dtype="float32")):
    n = T.int64()
    with R.dataflow():
        up: R.Tensor((2, n), dtype="int32") = R.argsort(x, axis=-1, descending=False, dtype="int32")
        down: R.Tensor((2, n), dtype="int64") = R.argsort(x, axis=1, descending=True, dtype="int64")
        best: R.Tuple(R.Tensor((2, 2), dtype="float32"), R.Tensor((2, 2), dtype="int32")) = R.topk(x, k=2, axis=-1, ret_type="both", largest=True, dtype="int32")
        low: R.Tensor((2, 1), dtype="int64") = R.topk(x, k=1, axis=1, ret_type="indices", largest=False, dtype="int64")
        every: R.Tensor((2, n), dtype="float32") = R.topk(x, k=0, ret_type="values")
        gv = (up, down, best, low, every)
        R.output(gv)
    return gv
'''


def stable(row, descending):
    key = [(-(v if not np.isnan(v) else np.inf) if descending else
            (v if not np.isnan(v) else np.inf), i) for i, v in enumerate(row)]
    if descending:   # NaN first when descending
        key = [((-np.inf if np.isnan(row[i]) else k), i) for (k, i) in key]
    return [i for _, i in sorted(key)]


@settings(max_examples=6, deadline=None)
@given(n=st.integers(2, 7), seed=st.integers(0, 2**31), with_nan=st.booleans())
def test_sorts_match_stable_python_sorts_on_every_target(n, seed, with_nan):
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, size=(2, n)).astype("float32")   # many ties
    if with_nan:
        x[0, rng.integers(0, n)] = np.nan
    up, down, (values, indices), low, every = assert_runs_alike(module_of(SORTS), x)
    for r in range(2):
        assert list(up[r]) == stable(x[r], False)
        assert list(down[r]) == stable(x[r], True)
        assert list(indices[r]) == stable(x[r], True)[:2]
        np.testing.assert_array_equal(values[r], x[r][stable(x[r], True)[:2]])
        assert list(low[r]) == stable(x[r], False)[:1]
        np.testing.assert_array_equal(every[r], x[r][stable(x[r], True)])


def test_sorts_round_trip():
    text = assert_round_trip(module_of(SORTS))
    assert 'R.topk(x, k=2, axis=-1, ret_type="both", largest=True, dtype="int32")' in text


@pytest.mark.parametrize("call, error, message", [
    ("R.topk(x, k=5)", OpDeductionError, "k=5 is larger than axis -1"),
    ("R.topk(x, ret_type='top')", OpAttributeError, "ret_type must be one of"),
    ("R.argsort(x, dtype='float32')", OpAttributeError, "must be an integer type"),
    ("R.argsort(x, axis=3)", OpDeductionError, "axis 3 is out of range"),
])
def test_bad_sort_arguments_are_clear(call, error, message):
    text = f'''
@R.function
def main(x: R.Tensor((4, 4), dtype="float32")):
    y = {call}
    return y
'''
    with pytest.raises((error, ParseError), match=message):
        module_of(text)
