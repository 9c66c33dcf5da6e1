"""R.cumsum, R.flip, R.one_hot, R.gather_nd, R.scatter_nd and R.scatter_elements written
as TVM's printer writes them: round trip, and results equal to NumPy loops on the
interpreter and the C build, with symbolic lengths bound to several values."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.op.registry import OpAttributeError, OpDeductionError
from tensorir.errors import IndexOutOfRangeError, ParseError
from tests.targets import VM_TARGETS

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

SCANS = '''
@R.function
def main(x: R.Tensor(("n", 3), dtype="float32"), labels: R.Tensor(("n",), dtype="int64")):
    n = T.int64()
    with R.dataflow():
        running: R.Tensor((n, 3), dtype="float32") = R.cumsum(x, axis=0, dtype="float32", exclusive=False)
        before: R.Tensor((n * 3,), dtype="float64") = R.cumsum(x, dtype="float64", exclusive=True)
        flipped: R.Tensor((n, 3), dtype="float32") = R.flip(x, axis=0)
        hot: R.Tensor((n, 4), dtype="float32") = R.one_hot(labels, R.prim_value(T.float32(1.0)), R.prim_value(T.float32(0.0)), 4, -1)
        gv = (running, before, flipped, hot)
        R.output(gv)
    return gv
'''

SCATTERS = '''
@R.function
def main(x: R.Tensor(("n", 3), dtype="float32"), pos: R.Tensor(("m", 1), dtype="int64"), rows: R.Tensor(("m", 3), dtype="float32"), cols: R.Tensor((2, 3), dtype="int64"), vals: R.Tensor((2, 3), dtype="float32")):
    n = T.int64()
    m = T.int64()
    with R.dataflow():
        picked: R.Tensor((m, 3), dtype="float32") = R.gather_nd(x, pos, batch_dims=0)
        put: R.Tensor((n, 3), dtype="float32") = R.scatter_nd(x, pos, rows, reduction="update")
        added: R.Tensor((n, 3), dtype="float32") = R.scatter_nd(x, pos, rows, reduction="add")
        e_upd: R.Tensor((n, 3), dtype="float32") = R.scatter_elements(x, cols, vals, axis=0, reduction="update")
        e_mul: R.Tensor((n, 3), dtype="float32") = R.scatter_elements(x, cols, vals, axis=0, reduction="mul")
        e_min: R.Tensor((n, 3), dtype="float32") = R.scatter_elements(x, cols, vals, axis=0, reduction="min")
        gv = (picked, put, added, e_upd, e_mul, e_min)
        R.output(gv)
    return gv
'''


@settings(max_examples=5, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_scans_flip_one_hot_match_numpy_on_every_target(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)).astype("float32")
    labels = rng.integers(-1, 6, size=n)   # -1, 4, 5 are outside the depth: all off
    running, before, flipped, hot = assert_runs_alike(module_of(SCANS), x, labels, tol=1e-4)
    np.testing.assert_allclose(running, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-5)
    flat = x.reshape(-1).astype("float64")
    np.testing.assert_allclose(before, [flat[:i].sum() for i in range(flat.size)], rtol=1e-6)
    np.testing.assert_array_equal(flipped, x[::-1])
    np.testing.assert_array_equal(hot, [[1.0 if c == label else 0.0 for c in range(4)]
                                        for label in labels])


@settings(max_examples=5, deadline=None)
@given(n=st.integers(1, 6), m=st.integers(1, 6), seed=st.integers(0, 2**31))
def test_gathers_and_scatters_match_numpy_loops_on_every_target(n, m, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 3)).astype("float32")
    pos = rng.integers(-n, n, size=(m, 1))           # duplicates are likely
    rows = rng.standard_normal((m, 3)).astype("float32")
    cols = rng.integers(-n, n, size=(2, 3))
    vals = rng.standard_normal((2, 3)).astype("float32")
    picked, put, added, e_upd, e_mul, e_min = assert_runs_alike(
        module_of(SCATTERS), x, pos, rows, cols, vals, tol=1e-4)
    np.testing.assert_array_equal(picked, x[pos[:, 0]])
    want_put, want_add = x.copy(), x.copy()
    for i in range(m):   # the last update to a row wins
        want_put[pos[i, 0]] = rows[i]
        want_add[pos[i, 0]] += rows[i]
    np.testing.assert_array_equal(put, want_put)
    np.testing.assert_allclose(added, want_add, rtol=1e-5, atol=1e-6)
    want_upd, want_mul, want_min = x.copy(), x.copy(), x.copy()
    for i in range(2):
        for j in range(3):
            want_upd[cols[i, j], j] = vals[i, j]
            want_mul[cols[i, j], j] *= vals[i, j]
            want_min[cols[i, j], j] = min(want_min[cols[i, j], j], vals[i, j])
    np.testing.assert_array_equal(e_upd, want_upd)
    np.testing.assert_allclose(e_mul, want_mul, rtol=1e-5)
    np.testing.assert_array_equal(e_min, want_min)


@pytest.mark.parametrize("source", [SCANS, SCATTERS])
def test_index_ops_round_trip(source):
    text = assert_round_trip(module_of(source))
    assert "R.cumsum(" in text or "R.scatter_elements(" in text


@pytest.mark.parametrize("target", VM_TARGETS)
@pytest.mark.parametrize("bad", [7, -3])
def test_out_of_range_index_is_an_error_on_every_target(target, bad):
    """Never a read outside the input or a silently dropped update: the interpreter's error."""
    mod = module_of(SCATTERS)
    x = np.ones((2, 3), "float32")
    args = (x, np.array([[bad]]), np.full((1, 3), 5.0, "float32"), np.zeros((2, 3), "int64"),
            np.zeros((2, 3), "float32"))
    with pytest.raises(IndexOutOfRangeError, match=f"R.gather_nd failed .* index {bad} is out of bounds"):
        rx.interpret(mod, "main", *args)
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    with pytest.raises(IndexOutOfRangeError, match=f"kernel '.*': index {bad} is out of range for an axis "
                                                   "of size 2"):
        vm["main"](*args)
    cols = np.zeros((2, 3), "int64")
    cols[1, 2] = 2 * bad   # scatter_elements' index, checked by the kernel that scatters it
    with pytest.raises(IndexOutOfRangeError, match=f"index {2 * bad} is out of range"):
        vm["main"](x, np.array([[-2]]), args[2], cols, args[4])
    picked, put, *_ = vm["main"](x, np.array([[-1]]), args[2], *args[3:])   # NumPy's negative index
    np.testing.assert_array_equal(picked, x[-1:])
    np.testing.assert_array_equal(put, np.array([[1, 1, 1], [5, 5, 5]], "float32"))


@pytest.mark.parametrize("call, error, message", [
    ("R.gather_nd(x, R.astype(x, 'int64'))", OpDeductionError, "index 4 dims after 0 batch dims"),
    ("R.gather_nd(x, R.astype(x, 'float32'))", OpDeductionError, "indices must be an integer tensor"),
    ("R.scatter_elements(x, R.astype(x, 'int64'), x, reduction='mean')", OpAttributeError,
     "reduction must be one of"),
    ("R.scatter_nd(x, R.zeros((2, 1), 'int64'), R.zeros((2, 5), 'float32'))", OpDeductionError,
     "dim 1 of updates"),
    ("R.flip(x, axis=2)", OpDeductionError, "axis 2 is out of range"),
    ("R.one_hot(R.zeros((3,), 'int64'), R.prim_value(T.float32(1)), R.prim_value(T.int32(0)), 4)",
     OpDeductionError, "have different dtypes"),
    ("R.cumsum(x, exclusive=1)", OpAttributeError, "exclusive must be a bool"),
])
def test_bad_index_op_arguments_are_clear(call, error, message):
    text = f'''
@R.function
def main(x: R.Tensor((4, 4), dtype="float32")):
    y = {call}
    return y
'''
    with pytest.raises((error, ParseError), match=message):
        module_of(text)
