"""Deduction vs NumPy for shape manipulation: reshape, flatten, permute_dims,
expand_dims, squeeze, broadcast_to, repeat, tile, concat, split, take, strided_slice."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from relaxscript import op
from relaxscript.op import OpAttributeError, OpDeductionError
from relaxscript.struct_info import TupleStructInfo

from .op_helpers import (SYMBOLS, check_call, concrete, environments, infer, symbolic_shapes,
                         tensor_var)

n, m, k = SYMBOLS
SETTINGS = settings(max_examples=30, deadline=None)
seeds = st.integers(0, 2**16)


@st.composite
def regrouped(draw, shape):
    """A reshape target: consecutive dims multiplied together, maybe one -1, maybe extra 1s."""
    target, i = [], 0
    while i < len(shape):
        j = draw(st.integers(i + 1, len(shape)))
        target.append(tir.expr.IntImm(1))
        for d in shape[i:j]:
            target[-1] = target[-1] * d
        i = j
    for _ in range(draw(st.integers(0, 1))):
        target.insert(draw(st.integers(0, len(target))), 1)
    if target and draw(st.booleans()):
        target[draw(st.integers(0, len(target) - 1))] = -1
    return target


@SETTINGS
@given(data=st.data(), shape=symbolic_shapes(), env=environments(), seed=seeds)
def test_reshape_and_flatten(data, shape, env, seed):
    rng = np.random.default_rng(seed)
    x = tensor_var("x", shape)
    target = data.draw(regrouped(shape))
    sinfo = check_call(op.reshape(x, target), env, rng)
    assert all(not tir.expr.is_const_int(d, -1) for d in sinfo.shape)
    check_call(op.flatten(x), env, rng)


@SETTINGS
@given(data=st.data(), shape=symbolic_shapes(), env=environments(), seed=seeds)
def test_permute_expand_squeeze(data, shape, env, seed):
    rng = np.random.default_rng(seed)
    x = tensor_var("x", shape)
    ndim = len(shape)
    perm = data.draw(st.none() | st.permutations(range(ndim)).map(
        lambda p: tuple(a - ndim if a % 2 else a for a in p)))
    check_call(op.permute_dims(x, perm), env, rng)
    out_ndim = ndim + data.draw(st.integers(1, 2))
    inserted = data.draw(st.lists(st.integers(-out_ndim, out_ndim - 1), min_size=out_ndim - ndim,
                                  max_size=out_ndim - ndim, unique_by=lambda a: a % out_ndim))
    check_call(op.expand_dims(x, inserted), env, rng)
    unit = [i for i, d in enumerate(shape) if tir.expr.is_const_int(d, 1)]
    check_call(op.squeeze(x, data.draw(st.lists(st.sampled_from(unit), unique=True)) if unit else ()),
               env, rng)
    # without axes: the literal 1s only (TVM's meaning), a symbolic dim kept even where it is 1
    sinfo = check_call(op.squeeze(x), env, rng)
    assert sinfo.ndim == len(shape) - len(unit)


@SETTINGS
@given(data=st.data(), shape=symbolic_shapes(), env=environments(), seed=seeds)
def test_broadcast_to_repeat_tile(data, shape, env, seed):
    rng = np.random.default_rng(seed)
    x = tensor_var("x", shape)
    lead = data.draw(symbolic_shapes(max_ndim=2))
    target = list(lead) + [data.draw(st.sampled_from(SYMBOLS)) if tir.expr.is_const_int(d, 1)
                           and data.draw(st.booleans()) else d for d in shape]
    check_call(op.broadcast_to(x, target), env, rng)
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1)) if shape else None
    check_call(op.repeat(x, data.draw(st.integers(0, 3)), axis), env, rng)
    check_call(op.tile(x, data.draw(st.lists(st.integers(0, 3), max_size=4))), env, rng)


@SETTINGS
@given(data=st.data(), shape=symbolic_shapes(min_ndim=1), env=environments(), seed=seeds)
def test_concat(data, shape, env, seed):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    parts = []
    for i in range(data.draw(st.integers(1, 3))):
        dims = list(shape)
        dims[axis] = data.draw(st.sampled_from([*SYMBOLS, tir.const(2), n + 1]))
        parts.append(tensor_var(f"x{i}", dims))
    sinfo = check_call(op.concat(parts, axis), env, np.random.default_rng(seed))
    assert sinfo.shape is not None


@SETTINGS
@given(data=st.data(), shape=symbolic_shapes(min_ndim=1), env=environments(), seed=seeds)
def test_split(data, shape, env, seed):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    sections = data.draw(st.integers(1, 4))
    dims = list(shape)
    dims[axis] = dims[axis] * sections
    sinfo = check_call(op.split(tensor_var("x", dims), sections, axis), env, rng)
    assert isinstance(sinfo, TupleStructInfo) and len(sinfo.fields) == sections
    indices = data.draw(st.lists(st.integers(-8, 8), max_size=3))
    check_call(op.split(tensor_var("x", shape), indices, axis), env, rng)


@SETTINGS
@given(data=st.data(), shape=symbolic_shapes(min_ndim=1), index_shape=symbolic_shapes(max_ndim=2),
       env=environments(), seed=seeds)
def test_take(data, shape, index_shape, env, seed):
    rng = np.random.default_rng(seed)
    axis = data.draw(st.none() | st.integers(-len(shape), len(shape) - 1))
    extent = int(np.prod(concrete(shape, env))) if axis is None else concrete(shape, env)[axis]
    index_values = rng.integers(-extent, extent, size=concrete(index_shape, env))
    call = op.take(tensor_var("x", shape), tensor_var("i", index_shape, "int64"), axis)
    check_call(call, env, rng, arrays={"i": index_values})


bounds = st.one_of(st.integers(-8, 8), st.sampled_from([n, n - 2, m + 1, 2 - n]))


@settings(max_examples=60, deadline=None)
@given(data=st.data(), shape=symbolic_shapes(min_ndim=1), env=environments(), seed=seeds)
def test_strided_slice(data, shape, env, seed):
    ndim = len(shape)
    axes = data.draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                              unique_by=lambda a: a % ndim))
    begin = data.draw(st.lists(bounds, min_size=len(axes), max_size=len(axes)))
    end = data.draw(st.lists(bounds, min_size=len(axes), max_size=len(axes)))
    strides = data.draw(st.lists(st.integers(-3, 3).filter(bool), min_size=len(axes),
                                 max_size=len(axes)))
    call = op.strided_slice(tensor_var("x", shape), axes, begin, end, strides)
    check_call(call, env, np.random.default_rng(seed))


# ---------------------------------------------------------------- specific cases and errors
def test_reshape_minus_one_is_inferred_symbolically():
    sinfo = infer(op.reshape(tensor_var("x", (n, 2, 2)), (-1, 4)))
    assert tir.structural_equal(sinfo.shape[0], n) and sinfo.shape[1].value == 4
    flat = infer(op.reshape(tensor_var("x", (n, 4)), [-1]))
    assert tir.structural_equal(flat.shape[0], n * 4)


def test_reshape_errors():
    with pytest.raises(OpDeductionError, match="element counts differ"):
        infer(op.reshape(tensor_var("x", (n, 4)), (n + 1, 4)))
    # (n, 4) -> (n, 5) agrees at n = 0, so it is not provably wrong
    with pytest.raises(OpDeductionError, match="divisible"):
        infer(op.reshape(tensor_var("x", (3, 5)), (-1, 4)))
    with pytest.raises(OpDeductionError, match="at most one -1"):
        infer(op.reshape(tensor_var("x", (n, 4)), (-1, -1)))
    # undecidable element count: accepted (checked at run time)
    assert infer(op.reshape(tensor_var("x", (n, 4)), (m, 4))).shape is not None


def test_split_sections_symbolic_and_errors():
    halves = infer(op.split(tensor_var("x", (n * 4,)), 2))
    assert [tir.structural_equal(f.shape[0], n * 2) for f in halves.fields] == [True, True]
    with pytest.raises(OpDeductionError, match="not divisible"):
        infer(op.split(tensor_var("x", (n, 7)), 2, axis=1))
    with pytest.raises(OpAttributeError):
        op.split(tensor_var("x", (4,)), 0)


def test_axis_and_shape_errors():
    x = tensor_var("x", (n, 4))
    for call in (op.permute_dims(x, (0, 2)), op.permute_dims(x, (0, 0)), op.expand_dims(x, 3),
                 op.squeeze(x, 1), op.concat([x, tensor_var("y", (n, 5))], 0),
                 op.concat([x, tensor_var("y", (n,))], 0), op.broadcast_to(x, (n, 5)),
                 op.take(x, tensor_var("i", (2,), "float32"), 0), op.repeat(x, 2, 2),
                 op.strided_slice(x, [0], [0], [2], [0])):
        with pytest.raises(OpDeductionError):
            infer(call)
    with pytest.raises(OpAttributeError):
        op.tile(x, (-1,))
    with pytest.raises(OpAttributeError):
        op.permute_dims(x, "ab")


def test_squeeze_without_axes_drops_the_literal_ones_only():
    """s13: a symbolic dim (n) was 'maybe 1', so the rank was unknown and every level ran NumPy's
    squeeze: (n, 1, m) at n = 1 gave (m,) where TVM's build (topi drops the dims statically 1)
    gives (1, m). Now the deduction and every level keep a symbolic dim."""
    x = tensor_var("x", (n, 1, m))
    sinfo = infer(op.squeeze(x))
    assert sinfo.ndim == 2 and [str(d) for d in sinfo.shape] == ["n", "m"]
    for env in ({n: 1, m: 1}, {n: 1, m: 3}, {n: 2, m: 1}):
        check_call(op.squeeze(x), env, np.random.default_rng(0))


def test_coarse_inputs():
    two_d = tensor_var("x", None, "float32", ndim=2)
    anything = tensor_var("y", None, None)
    assert infer(op.reshape(two_d, (n, -1))).ndim == 2
    assert infer(op.flatten(anything)).ndim == 1
    assert infer(op.permute_dims(two_d)).ndim == 2
    assert infer(op.expand_dims(two_d, 0)).ndim == 3
    assert infer(op.squeeze(anything)).ndim == -1
    assert infer(op.broadcast_to(anything, (n, 3))).shape is not None
    assert len(infer(op.split(anything, 3)).fields) == 3
    assert infer(op.concat([two_d, tensor_var("z", (n, 2))], 1)).ndim == 2
    assert infer(op.take(two_d, tensor_var("i", (n,), "int64"), 1)).ndim == 2
    assert infer(op.strided_slice(two_d, [0], [1], [n])).ndim == 2
    assert infer(op.tile(two_d, (1, 1, 2))).ndim == 3
    # n vs m in a non-concat dim is undecidable: rank only
    assert infer(op.concat([tensor_var("a", (n, 2)), tensor_var("b", (m, 2))], 1)).shape is None


def test_strided_slice_provable_bounds_are_plain():
    sinfo = infer(op.strided_slice(tensor_var("x", (n + 4, 3)), [0], [2], [n + 4]))
    assert tir.structural_equal(sinfo.shape[0], n + 2)
