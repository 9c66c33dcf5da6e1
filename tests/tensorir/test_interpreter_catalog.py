"""Every catalog prim_func (another helper's scripts) runs, and both interpreter paths agree."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from tensorir import interpret
from tensorir.interpreter import InterpretError
from tests.tensorir.catalog import CATALOG, make_arrays


def sizes_and_scalars(entry, func, default=3):
    """The entry's sizes and scalars, completed with ``default`` for vars it leaves out."""
    sizes = dict(entry.sizes)
    for buf in func.buffer_params:
        for var in tir.collect(buf, lambda n: isinstance(n, tir.Var)):
            sizes.setdefault(var.name, default)
    scalars = dict(entry.scalars)
    for var in func.scalar_params:
        scalars.setdefault(var.name, sizes.get(var.name, default))
    return sizes, scalars


@pytest.mark.parametrize("name", sorted(CATALOG))
def test_catalog_func_vectorised_equals_scalar(name):
    entry = CATALOG[name]
    func = entry.func
    sizes, scalars = sizes_and_scalars(entry, func)
    arrays = make_arrays(func, sizes, np.random.default_rng(0))
    scalar_run = [a.copy() for a in arrays]
    if "call_extern" in entry.source:  # extern functions have no NumPy meaning
        with pytest.raises(InterpretError, match="no implementation of call"):
            interpret(func, *arrays, **scalars)
        return
    interpret(func, *arrays, **scalars)
    interpret(func, *scalar_run, vectorize=False, **scalars)
    for got, want in zip(arrays, scalar_run):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, equal_nan=True)
    if entry.reference is not None:
        expected = make_arrays(func, sizes, np.random.default_rng(0))
        entry.reference(*expected, **scalars)
        for got, want in zip(arrays, expected):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
