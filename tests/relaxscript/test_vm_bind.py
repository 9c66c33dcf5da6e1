"""``vm.bind``: fixed arguments are checked once, the others on every call, with the same results
and the same messages as a plain call."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.vm.bound_call import split_checks
from tensorir.errors import ShapeMismatchError
from tests.relaxscript import vm_modules as M

SHARED_DIM = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("n",), "float32"),
             w: R.Tensor((4, 3), "float32")) -> R.Tensor(("n",), "float32"):
        with R.dataflow():
            s = R.sum(w)
            a = R.add(x, y)
            b = R.multiply(a, s)
            R.output(b)
        return b
'''

_BUILT = {}


def built(text: str, target: str):
    key = (text, target)
    if key not in _BUILT:
        _BUILT[key] = rx.VirtualMachine(rx.build(M.parse(text), target=target))
    return _BUILT[key]


def mlp_weights(rng):
    return [rng.standard_normal(s).astype("float32") for s in ((8, 16), (16,), (16, 4))]


@pytest.mark.parametrize("target", ["c", "interp"])
@settings(max_examples=5, deadline=None)
@given(n=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_bound_call_equals_plain_call(target, n, seed):
    vm = built(M.MLP, target)
    rng = np.random.default_rng(seed)
    w1, b1, w2 = mlp_weights(rng)
    x = rng.standard_normal((n, 8)).astype("float32")
    bound = vm.bind("main", {1: w1, 2: b1, 3: w2})
    np.testing.assert_array_equal(bound(x), vm["main"](x, w1, b1, w2))


def test_fixed_arrays_are_private_views_whose_elements_follow_the_caller():
    vm = built(M.MLP, "c")
    w1, b1, w2 = mlp_weights(np.random.default_rng(0))
    x = np.ones((2, 8), "float32")
    bound = vm.bind("main", {1: w1, 2: b1, 3: w2})
    b1[:] = 0.5                         # element writes reach the fixed argument
    np.testing.assert_array_equal(bound(x), vm["main"](x, w1, b1, w2))
    before = bound(x)
    w2.shape = (4, 16)                  # reshaping the caller's array does not reach the checked view
    np.testing.assert_array_equal(bound(x), before)


def test_free_arguments_are_checked_on_every_call_with_the_plain_message():
    vm = built(M.MLP, "c")
    w1, b1, w2 = mlp_weights(np.random.default_rng(1))
    bound = vm.bind("main", {1: w1, 2: b1, 3: w2})
    bad = np.ones((2, 7), "float32")
    with pytest.raises(ShapeMismatchError) as plain:
        vm["main"](bad, w1, b1, w2)
    with pytest.raises(ShapeMismatchError) as fixed:
        bound(bad)
    assert str(fixed.value) == str(plain.value)
    with pytest.raises(ShapeMismatchError, match="dtype float32"):
        bound(np.ones((2, 8), "float64"))


def test_a_bad_fixed_argument_fails_at_bind_time_with_the_plain_message():
    vm = built(M.MLP, "c")
    w1, b1, w2 = mlp_weights(np.random.default_rng(2))
    bad = np.ones((16, 5), "float32")
    with pytest.raises(ShapeMismatchError) as plain:
        vm["main"](np.ones((2, 8), "float32"), w1, b1, bad)
    with pytest.raises(ShapeMismatchError) as fixed:
        vm.bind("main", {1: w1, 2: b1, 3: bad})
    assert str(fixed.value) == str(plain.value)
    with pytest.raises(ShapeMismatchError, match="C-contiguous"):
        vm.bind("main", {1: np.ones((16, 8), "float32").T})


@pytest.mark.parametrize("target", ["c", "interp"])
def test_a_fixed_dim_tied_to_a_free_argument_is_checked_per_call(target):
    vm = built(SHARED_DIM, target)
    w = np.arange(12, dtype="float32").reshape(4, 3)
    y = np.arange(3, dtype="float32")
    bound = vm.bind("main", {1: y, 2: w})       # y's dim is n, which x defines on each call
    x = np.ones(3, "float32")
    np.testing.assert_array_equal(bound(x), vm["main"](x, y, w))
    with pytest.raises(ShapeMismatchError) as plain:
        vm["main"](np.ones(4, "float32"), y, w)
    with pytest.raises(ShapeMismatchError) as fixed:
        bound(np.ones(4, "float32"))
    assert str(fixed.value) == str(plain.value)
    first = vm.bind("main", {0: x, 2: w})         # x defines n: its value is stored on every call
    np.testing.assert_array_equal(first(y), vm["main"](x, y, w))
    with pytest.raises(ShapeMismatchError):
        first(np.ones(5, "float32"))


def test_wrong_argument_count_and_index():
    vm = built(M.MLP, "c")
    w1, b1, w2 = mlp_weights(np.random.default_rng(3))
    bound = vm.bind("main", {1: w1, 2: b1, 3: w2})
    with pytest.raises(TypeError, match=r"takes 1 argument\(s\) \(x\), got 2"):
        bound(np.ones((1, 8), "float32"), w1)
    with pytest.raises(IndexError, match="cannot fix argument 4"):
        vm.bind("main", {4: w1})


def test_unfrozen_values_keep_their_checks():
    """A list is fixed but not frozen (the caller may change it): its checks stay per call."""
    vm = built(SHARED_DIM, "c")
    w = [[1.0, 2.0, 3.0] for _ in range(4)]
    bound = vm.bind("main", {2: w})
    x = np.ones(2, "float32")
    np.testing.assert_allclose(bound(x, x), vm["main"](x, x, np.asarray(w, "float32")))
    w.append([4.0, 5.0, 6.0])
    with pytest.raises(ShapeMismatchError, match="shape"):
        bound(x, x)


# ---------------------------------------------------------------- the split of the check data
def test_split_checks_moves_the_structure_of_fixed_registers():
    checks = [
        ("load", 1, 0), ("tensor", 1, 0, 0, 0), ("rank", 1, 1, 1), ("let", 2, ("shape_of", ("v", 1))),
        ("let", 3, ("item", ("v", 2), 0)), ("store", 0, ("v", 3)),                   # x defines n
        ("load", 4, 1), ("tensor", 4, 2, 1, 0), ("rank", 4, 2, 3), ("let", 5, ("shape_of", ("v", 4))),
        ("fail_if", ("!=", ("item", ("v", 5), 0), ("int", 4)), 4, ("item", ("v", 5), 0)),   # static dim
        ("fail_if", ("!=", ("item", ("v", 5), 1), ("t", 0)), 5, ("item", ("v", 5), 1), ("t", 0)),  # n
    ]
    once, per_call = split_checks(checks, frozenset({1}))
    assert once == [checks[i] for i in (6, 7, 8, 9, 10)]
    assert per_call == [checks[i] for i in (0, 1, 2, 3, 4, 5, 6, 9, 11)]
    once, per_call = split_checks(checks, frozenset({0}))
    # the defining register's load and lets feed a store: they run per call; its checks run once
    assert once == [checks[i] for i in (0, 1, 2, 3, 4)]
    assert per_call == [checks[i] for i in (0, 3, 4, 5, 6, 7, 8, 9, 10, 11)]
    assert split_checks(checks, frozenset()) == ([], checks)
