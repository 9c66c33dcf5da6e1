"""LegalizeOps on matmul, reductions, softmax/normalisation, shape manipulation,
indexing and creation ops, over symbolic shapes with several bindings."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript import op
from relaxscript.struct_info import TensorStructInfo

from .test_legalize_util import (bindings, check_one_op, concrete, legalize_and_check,
                                 one_op_module, random_array, shape_templates, symbolic, symbols)

FAST = settings(max_examples=8, deadline=None)


# ---------------------------------------------------------------- matmul
@st.composite
def matmul_templates(draw):
    a_rank, b_rank = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k = draw(st.sampled_from([2, "m"]))
    batch = draw(shape_templates(0, 1))
    a = ([1 if draw(st.booleans()) else d for d in batch] if a_rank == 3 else []) + \
        ([draw(st.sampled_from([3, "n"]))] if a_rank > 1 else []) + [k]
    b = ([1 if draw(st.booleans()) else d for d in batch] if b_rank == 3 else []) + [k] + \
        ([draw(st.sampled_from([2, "n"]))] if b_rank > 1 else [])
    return a, b


@FAST
@given(templates=matmul_templates(), envs=bindings(), dtype=st.sampled_from(["float32", "int32"]))
def test_matmul(templates, envs, dtype):
    check_one_op(op.matmul, list(templates), [dtype] * 2, envs)


@settings(max_examples=2, deadline=None)
@given(envs=bindings())
def test_matmul_out_dtype(envs):
    check_one_op(lambda a, b: op.matmul(a, b, out_dtype="float32"), [["n", 3], [3, 2]],
                 ["float16", "float16"], envs)


# ---------------------------------------------------------------- reductions
@st.composite
def reduce_case(draw, single_axis=False):
    template = draw(shape_templates(1, 3))
    ndim = len(template)
    if single_axis:
        axis = draw(st.one_of(st.none(), st.integers(-ndim, ndim - 1)))
    else:
        axis = draw(st.one_of(st.none(), st.lists(st.integers(0, ndim - 1), min_size=1,
                                                  max_size=ndim, unique=True)))
    return template, axis, draw(st.booleans())


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "variance"])
@FAST
@given(case=reduce_case(), envs=bindings(), dtype=st.sampled_from(["float32", "int32"]))
def test_reduce(name, case, envs, dtype):
    template, axis, keepdims = case
    check_one_op(lambda x: getattr(op, name)(x, axis, keepdims), [template], [dtype], envs,
                 low=-3, high=3)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@FAST
@given(case=reduce_case(single_axis=True), envs=bindings(), dtype=st.sampled_from(["float32", "int32"]))
def test_arg_reduce(name, case, envs, dtype):
    template, axis, keepdims = case
    # small integer ranges make ties, which must resolve to the first index as in NumPy
    check_one_op(lambda x: getattr(op, name)(x, axis, keepdims), [template], [dtype], envs,
                 low=-2, high=2)


# ---------------------------------------------------------------- nn
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@FAST
@given(template=shape_templates(1, 3), data=st.data(), envs=bindings())
def test_softmax(name, template, data, envs):
    axis = data.draw(st.integers(-len(template), len(template) - 1))
    check_one_op(lambda x: getattr(op.nn, name)(x, axis), [template], ["float32"], envs,
                 low=-5, high=5)


@st.composite
def norm_case(draw):
    template = draw(shape_templates(1, 3))
    axes = draw(st.lists(st.integers(0, len(template) - 1), min_size=1, max_size=len(template),
                         unique=True))
    return template, axes, [template[a] for a in axes]


@FAST
@given(case=norm_case(), envs=bindings())
def test_layer_norm(case, envs):
    template, axes, param = case
    check_one_op(lambda x, g, b: op.nn.layer_norm(x, g, b, axes, 1e-5),
                 [template, param, param], ["float32"] * 3, envs)


@FAST
@given(case=norm_case(), envs=bindings())
def test_rms_norm(case, envs):
    template, axes, param = case
    check_one_op(lambda x, w: op.nn.rms_norm(x, w, axes, 1e-5), [template, param],
                 ["float32"] * 2, envs)


@settings(max_examples=2, deadline=None)
@given(envs=bindings())
def test_norms_float16(envs):
    check_one_op(lambda x, g, b: op.nn.layer_norm(x, g, b), [["n", 8], [8], [8]],
                 ["float16"] * 3, envs)
    check_one_op(lambda x, w: op.nn.rms_norm(x, w), [["n", 8], [8]], ["float16"] * 2, envs)


# ---------------------------------------------------------------- manipulation
@FAST
@given(template=shape_templates(1, 3), envs=bindings())
def test_reshape_and_flatten(template, envs):
    check_one_op(op.flatten, [template], ["float32"], envs)
    # merge the leading dims, keep the last one (-1 is inferred)
    check_one_op(lambda x: op.reshape(x, (-1, x.struct_info.shape[-1])), [template], ["float32"],
                 envs)


@FAST
@given(envs=bindings())
def test_reshape_split_dims(envs):
    syms = symbols()
    n = syms["n"]
    sinfo = TensorStructInfo((n * 6,), "float32")
    mod = one_op_module(lambda x: op.reshape(x, (n, 2, 3)), [sinfo])
    rng = np.random.default_rng(0)
    legalize_and_check(mod, [[random_array(rng, (env["n"] * 6,), "float32")] for env in envs])


@FAST
@given(template=shape_templates(1, 3), data=st.data(), envs=bindings())
def test_permute_expand_squeeze(template, data, envs):
    ndim = len(template)
    axes = data.draw(st.permutations(range(ndim)))
    check_one_op(lambda x: op.permute_dims(x, axes), [template], ["float32"], envs)
    check_one_op(op.permute_dims, [template], ["float32"], envs)
    where = data.draw(st.integers(-ndim - 1, ndim))
    check_one_op(lambda x: op.expand_dims(x, where), [template], ["float32"], envs)
    with_units = template[:1] + [1] + template[1:] + [1]
    check_one_op(lambda x: op.squeeze(x, (1,)), [with_units], ["float32"], envs)
    if not any(isinstance(d, str) for d in with_units):
        check_one_op(op.squeeze, [with_units], ["float32"], envs)


@FAST
@given(template=shape_templates(1, 2), envs=bindings())
def test_broadcast_to(template, envs):
    syms = symbols()
    target = (syms["m"], *symbolic(template, syms))
    sinfo = TensorStructInfo(symbolic([1 if i == 0 else d for i, d in enumerate(template)], syms),
                             "float32")
    defines_target_vars = TensorStructInfo(target, "float32")
    mod = one_op_module(lambda x, y: op.broadcast_to(x, target), [sinfo, defines_target_vars])
    rng = np.random.default_rng(1)
    inputs = [[random_array(rng, concrete([1] + template[1:], env), "float32"),
               np.zeros(concrete(["m", *template], env), "float32")] for env in envs]
    legalize_and_check(mod, inputs)


@FAST
@given(template=shape_templates(1, 3), data=st.data(), envs=bindings())
def test_repeat_and_tile(template, data, envs):
    repeats = data.draw(st.integers(1, 3))
    axis = data.draw(st.one_of(st.none(), st.integers(-len(template), len(template) - 1)))
    check_one_op(lambda x: op.repeat(x, repeats, axis), [template], ["float32"], envs)
    reps = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=4))
    check_one_op(lambda x: op.tile(x, reps), [template], ["float32"], envs)


# ---------------------------------------------------------------- indexing
@FAST
@given(template=shape_templates(1, 3), data=st.data(), envs=bindings())
def test_concat(template, data, envs):
    axis = data.draw(st.integers(0, len(template) - 1))
    other = list(template)
    other[axis] = data.draw(st.sampled_from([1, 2, "m", "n"]))
    check_one_op(lambda a, b, c: op.concat([a, b, c], axis), [template, other, template],
                 ["float32"] * 3, envs)


@FAST
@given(template=shape_templates(1, 3), data=st.data(), envs=bindings())
def test_split(template, data, envs):
    axis = data.draw(st.integers(0, len(template) - 1))
    doubled = list(template)
    doubled[axis] = 2 if template[axis] == 1 else template[axis]
    syms = symbols()
    dims = symbolic(doubled, syms)
    dims = tuple(d * 2 if i == axis else d for i, d in enumerate(dims))
    mod = one_op_module(lambda x: op.split(x, 2, axis), [TensorStructInfo(dims, "float32")])
    rng = np.random.default_rng(2)
    inputs = [[random_array(rng, tuple(d * 2 if i == axis else d for i, d in
                                       enumerate(concrete(doubled, env))), "float32")]
              for env in envs]
    legalize_and_check(mod, inputs)
    points = data.draw(st.lists(st.integers(-4, 5), min_size=1, max_size=3))
    check_one_op(lambda x: op.split(x, points, axis), [template], ["float32"], envs)


@FAST
@given(template=shape_templates(1, 3), data=st.data(), envs=bindings())
def test_take(template, data, envs):
    axis = data.draw(st.one_of(st.none(), st.integers(-len(template), len(template) - 1)))
    syms = symbols()
    x_dims = symbolic(template, syms)
    index_shape = (syms["m"], 2)
    mod = one_op_module(lambda x, i: op.take(x, i, axis),
                        [TensorStructInfo(x_dims, "float32"), TensorStructInfo(index_shape, "int64")])
    rng = np.random.default_rng(3)
    inputs = []
    for env in envs:
        shape = concrete(template, env)
        size = int(np.prod(shape)) if axis is None else shape[axis]
        indices = rng.integers(-size, size, size=(env["m"], 2))
        inputs.append([random_array(rng, shape, "float32"), indices])
    legalize_and_check(mod, inputs)


@FAST
@given(envs=bindings(), begin=st.integers(-5, 5), end=st.integers(-5, 5),
       stride=st.sampled_from([1, 2, -1, -2]))
def test_strided_slice(envs, begin, end, stride):
    check_one_op(lambda x: op.strided_slice(x, [0, 1], [begin, 0], [end, 2], [stride, 1]),
                 [["n", 3]], ["float32"], envs, full=True)


@FAST
@given(envs=bindings(1, 2, 6))
def test_strided_slice_symbolic_bounds(envs):
    syms = symbols()
    n, m = syms["n"], syms["m"]
    mod = one_op_module(lambda x, y: op.strided_slice(x, [0], [m - 1], [n]),
                        [TensorStructInfo((n, 2), "float32"), TensorStructInfo((m,), "float32")])
    rng = np.random.default_rng(4)
    legalize_and_check(mod, [[random_array(rng, (env["n"], 2), "float32"),
                              random_array(rng, (env["m"],), "float32")] for env in envs])


# ---------------------------------------------------------------- creation
@FAST
@given(template=shape_templates(0, 3), envs=bindings(),
       dtype=st.sampled_from(["float32", "int32"]))
def test_full_zeros_ones(template, envs, dtype):
    syms = symbols()
    shape = symbolic(template, syms)
    for make in (lambda x: op.zeros(shape, dtype), lambda x: op.ones(shape, dtype),
                 lambda x: op.zeros_like(x), lambda x: op.ones_like(x, "float32"),
                 lambda x: op.full_like(x, 3.5, "float32"), lambda x: op.full(shape, 2, dtype)):
        mod = one_op_module(make, [TensorStructInfo(shape, dtype)])
        rng = np.random.default_rng(5)
        legalize_and_check(mod, [[random_array(rng, concrete(template, env), dtype)] for env in envs])


@FAST
@given(envs=bindings(), dtype=st.sampled_from([None, "float32", "int32"]),
       start=st.integers(-3, 3), step=st.sampled_from([1, 2, 3]))
def test_arange(envs, dtype, start, step):
    syms = symbols()
    n = syms["n"]
    mod = one_op_module(lambda x: op.arange(start, n * 2, step, dtype),
                        [TensorStructInfo((n,), "float32")])
    legalize_and_check(mod, [[np.zeros(env["n"], "float32")] for env in envs])


@pytest.mark.parametrize("name", ["triu", "tril"])
@FAST
@given(template=shape_templates(2, 3), k=st.integers(-2, 2), envs=bindings())
def test_triangle(name, template, k, envs):
    check_one_op(lambda x: getattr(op, name)(x, k), [template], ["float32"], envs)


def test_zero_sized_outputs():
    # n = 0 empties the outputs; the reduced axis (3) stays non-empty
    syms = symbols()
    sinfo = TensorStructInfo((syms["n"], 3), "float32")
    for make in (op.exp, lambda x: op.sum(x, 1), lambda x: op.nn.softmax(x, 1),
                 lambda x: op.matmul(x, op.permute_dims(x))):
        mod = one_op_module(make, [sinfo])
        legalize_and_check(mod, [[np.zeros((0, 3), "float32")], [np.ones((2, 3), "float32")]])
