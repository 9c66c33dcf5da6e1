"""Property tests: the interpreter agrees with NumPy on random generated PrimFuncs."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tensorir import interpret
from tests.tensorir.generators import (CONTROL_KINDS, DTYPES, INT_DTYPES, KINDS, make_inputs, prim_funcs,
                                      sym_sizes, tolerance)


def _run_and_compare(gen, sizes, seed, vectorize=True):
    arrays = make_inputs(gen, np.random.default_rng(seed), sizes)
    expected = gen.numpy_fn(*arrays[:gen.num_inputs])
    interpret(gen.func, *arrays, vectorize=vectorize)
    tol = tolerance(gen.dtype)
    if tol["atol"]:
        # a float sum of N terms in another order differs by rounding growing ~ sqrt(N); a sum
        # that cancels to near 0 leaves only that absolute part (N: every size multiplied, the
        # most terms any reduction of the function can have)
        tol["atol"] *= max(1.0, float(np.sqrt(np.prod([max(1, v) for v in sizes.values()]))) / 8)
    for got, want in zip(arrays[gen.num_inputs:], expected):
        np.testing.assert_allclose(got, want, equal_nan=True, **tol)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_generated_funcs_match_numpy_for_several_sizes(data, seed):
    gen = data.draw(prim_funcs(), label="gen")
    for _ in range(3):  # one function, several values of each symbolic var
        _run_and_compare(gen, data.draw(sym_sizes(gen, max_value=9), label="sizes"), seed)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_scalar_path_matches_numpy(data, seed):
    gen = data.draw(prim_funcs(), label="gen")
    _run_and_compare(gen, data.draw(sym_sizes(gen, max_value=4), label="sizes"), seed, vectorize=False)


BRANCHING = prim_funcs(kinds=CONTROL_KINDS, dtypes=DTYPES + INT_DTYPES)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_branching_funcs_match_numpy(data, seed):
    gen = data.draw(BRANCHING, label="gen")
    for vectorize in (True, False):
        _run_and_compare(gen, data.draw(sym_sizes(gen, max_value=7), label="sizes"), seed, vectorize)


@pytest.mark.fuzz
@settings(max_examples=600, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**16))
def test_branching_funcs_match_numpy_fuzz(data, seed):
    gen = data.draw(BRANCHING, label="gen")
    for vectorize in (True, False):
        _run_and_compare(gen, data.draw(sym_sizes(gen, max_value=9), label="sizes"), seed, vectorize)


@pytest.mark.parametrize("kind", KINDS + CONTROL_KINDS)
def test_every_kind_is_generated(kind):
    seen = set()

    @settings(max_examples=5, deadline=None)
    @given(prim_funcs(kinds=(kind,)))
    def collect(gen):
        seen.add(gen.kind)
        assert gen.func.root_block is not None
        assert [b.name for b in gen.func.buffer_params][-gen.num_outputs:]
    collect()
    assert seen == {kind}


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_larger_sizes_exercise_the_vectorised_path(data):
    gen = data.draw(prim_funcs(kinds=("matmul", "reduction", "transpose")), label="gen")
    sizes = {v.name: data.draw(st.integers(20, 40), label=v.name) for v in gen.sym_vars}
    _run_and_compare(gen, sizes, seed=0)
