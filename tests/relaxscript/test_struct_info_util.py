"""Struct-info utilities: is_base_of, matching, LCA, erasure, values."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tensorir as tir
from tensorir.structural import structural_equal
from relaxscript.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                                     TensorStructInfo, TupleStructInfo)
from relaxscript.struct_info_util import (erase_to_well_defined, is_base_of, match_symbolic_vars,
                                          struct_info_from_value, struct_info_lca, symbolic_vars_of)

n, m = tir.size_var("n"), tir.size_var("m")


def T(shape=None, dtype="float32", ndim=-1):
    return TensorStructInfo(shape, dtype, ndim)


def same(a, b):
    return structural_equal(a, b, map_free_vars=False)


@pytest.mark.parametrize("base, derived, expected", [
    (T((n, n)), T((16, 32)), "no"),
    (T((n, n)), T((3, 4)), "no"),
    (T((n, n)), T((3, 3)), "yes"),
    (T(ndim=2), T((n, 4)), "yes"),
    (T((4, 4)), T(ndim=2), "runtime"),
    (T((4, 4)), T(ndim=3), "no"),
    (T((n, 4)), T((m, 4), "float16"), "no"),
    (T((n, 4), None), T((m, 4), "float16"), "yes"),
    (T((n, 4)), T((m, 4), None), "runtime"),
    (T(None, None), T((3,), "int8"), "yes"),
    (T((n * 4, n)), T((12, 3)), "yes"),
    (T((n * 4, n)), T((13, 3)), "no"),
    (T((n * m,)), T((12,)), "runtime"),
    (ObjectStructInfo(), T((3,)), "yes"),
    (T((3,)), ObjectStructInfo(), "runtime"),
    (T((3,)), ShapeStructInfo([3]), "no"),
    (ShapeStructInfo([n, m]), ShapeStructInfo([3, 4]), "yes"),
    (ShapeStructInfo([n, m]), ShapeStructInfo(ndim=2), "runtime"),
    (ShapeStructInfo([n, m]), ShapeStructInfo(ndim=3), "no"),
    (ShapeStructInfo(ndim=-1), ShapeStructInfo([1, 2, 3]), "yes"),
    (PrimStructInfo("int64"), PrimStructInfo("int64", 5), "yes"),
    (PrimStructInfo("int64", n), PrimStructInfo("int64"), "runtime"),
    (PrimStructInfo("int64"), PrimStructInfo("int32"), "no"),
    (TupleStructInfo([T((n,)), ShapeStructInfo([n])]), TupleStructInfo([T((5,)), ShapeStructInfo([5])]), "yes"),
    (TupleStructInfo([T((n,)), ShapeStructInfo([n])]), TupleStructInfo([T((5,)), ShapeStructInfo([6])]), "no"),
    (TupleStructInfo([T((n,))]), TupleStructInfo([T((5,)), T((5,))]), "no"),
    (FuncStructInfo(None, ObjectStructInfo()), FuncStructInfo([T((n,))], T((n,))), "yes"),
    (FuncStructInfo([T((n,))], T((n,))), FuncStructInfo(None, ObjectStructInfo()), "runtime"),
    (FuncStructInfo([T((n,))], T((n,))), FuncStructInfo([T((n,))], T((n,)), purity=False), "no"),
    (FuncStructInfo([T(ndim=1)], T(ndim=1)), FuncStructInfo([T(ndim=1)], T((4,))), "yes"),
    (FuncStructInfo([T((4,))], T(ndim=1)), FuncStructInfo([T(ndim=1)], T((4,))), "yes"),
    (FuncStructInfo([T(ndim=1)], T(ndim=1)), FuncStructInfo([T((4,))], T((4,))), "runtime"),
    (FuncStructInfo([T(ndim=1)], T(ndim=1)), FuncStructInfo([T((4,)), T((4,))], T((4,))), "no"),
])
def test_is_base_of(base, derived, expected):
    assert is_base_of(base, derived) == expected


def test_fixed_vars_are_compared_not_bound():
    assert is_base_of(T((n,)), T((m,)), fixed_vars=[n]) == "runtime"
    assert is_base_of(T((n,)), T((n + 1,)), fixed_vars=[n]) == "no"
    assert is_base_of(T((n * 2,)), T((2 * n,)), fixed_vars=[n]) == "yes"
    assert is_base_of(T((n,)), T((n + 1,))) == "yes"  # as a pattern, n binds to n + 1


def test_pattern_var_facts_constrain_the_match():
    small = tir.size_var("k", upper=8, multiple_of=4)
    assert is_base_of(T((small,)), T((8,))) == "yes"
    assert is_base_of(T((small,)), T((16,))) == "no"
    assert is_base_of(T((small,)), T((6,))) == "no"
    assert is_base_of(T((small,)), T((m,))) == "runtime"


def test_match_symbolic_vars_binds_the_pattern():
    bindings = match_symbolic_vars(ShapeStructInfo([n, m]), ShapeStructInfo([m + 1, 4]))
    assert set(bindings) == {n, m}
    assert same(bindings[n], m + 1) and bindings[m].value == 4
    assert match_symbolic_vars(ShapeStructInfo([n, m]), ShapeStructInfo(ndim=2)) == {}
    with pytest.raises(ValueError, match=r"R.Shape\(\[3, 4\]\).*R.Shape\(\[n, n\]\)"):
        match_symbolic_vars(ShapeStructInfo([n, n]), ShapeStructInfo([3, 4]))


def test_lca_for_if_branches():
    assert same(struct_info_lca(T((n, 4)), T((n, 4))), T((n, 4)))
    assert same(struct_info_lca(T((n, 4)), T((m, 4))), T(ndim=2))
    assert same(struct_info_lca(T((n, 4)), T((n,))), T(None))
    assert same(struct_info_lca(T((n,)), T((n,), "int32")), T((n,), None))
    assert same(struct_info_lca(T((n,)), ShapeStructInfo([n])), ObjectStructInfo())
    assert same(struct_info_lca(PrimStructInfo("int64", 1), PrimStructInfo("int64", 2)), PrimStructInfo("int64"))
    assert same(struct_info_lca(TupleStructInfo([T((3,)), T((n,))]), TupleStructInfo([T((3,)), T((4,))])),
                TupleStructInfo([T((3,)), T(ndim=1)]))
    f = FuncStructInfo([T((n,))], T((n,)))
    g = FuncStructInfo([T((n,), "int32")], T((n,)), purity=False)
    assert same(struct_info_lca(f, f), f)
    assert same(struct_info_lca(f, g), FuncStructInfo(None, T((n,)), purity=False))


def test_erase_to_well_defined():
    sinfo = TupleStructInfo([T((n, 4)), T((m, 4)), ShapeStructInfo([m]), PrimStructInfo("int64", m)])
    erased = erase_to_well_defined(sinfo, {n})
    assert same(erased, TupleStructInfo([T((n, 4)), T(ndim=2), ShapeStructInfo(ndim=1), PrimStructInfo("int64")]))
    assert erase_to_well_defined(T((n,)), {n}) is not None
    assert same(erase_to_well_defined(T((n * 2,)), [], var_map={n: 3}), T((6,)))
    # a Callable's own parameters define the vars of its return annotation
    sig = FuncStructInfo([ShapeStructInfo([n])], T((n,)))
    assert erase_to_well_defined(sig, []) is sig


def test_struct_info_from_value():
    assert same(struct_info_from_value(np.zeros((2, 3), "float16")), T((2, 3), "float16"))
    assert same(struct_info_from_value(7), PrimStructInfo("int64", 7))
    assert same(struct_info_from_value(True), PrimStructInfo("bool", tir.IntImm(True, "bool")))
    assert struct_info_from_value(2.5).dtype == "float64"
    assert same(struct_info_from_value((np.zeros(3, "int32"), 1)),
                TupleStructInfo([T((3,), "int32"), PrimStructInfo("int64", 1)]))
    assert isinstance(struct_info_from_value("text"), ObjectStructInfo)


def test_symbolic_vars_of_in_order():
    assert symbolic_vars_of(TupleStructInfo([T((m, n * m)), ShapeStructInfo([n])])) == [m, n]


# ---------------------------------------------------------------- property: soundness of is_base_of
P, Q = tir.size_var("p"), tir.size_var("q")   # pattern vars (base)
A, B = tir.size_var("a"), tir.size_var("b")   # vars of the derived annotation

_base_dim = st.sampled_from([0, 1, 2, 3, P, Q, P * 2, P + 1, Q * 3])
_derived_dim = st.sampled_from([0, 1, 2, 3, 4, 6, A, B, A * 2, A + 1, B * 3])


def _eval(e, env):
    if isinstance(e, tir.IntImm):
        return e.value
    if isinstance(e, tir.Var):
        return env[e]
    ops = {tir.Add: lambda x, y: x + y, tir.Mul: lambda x, y: x * y}
    return ops[type(e)](_eval(e.a, env), _eval(e.b, env))


def _some_pattern_matches(base_dims, actual):
    for p in range(0, 25):
        for q in range(0, 25):
            if [_eval(tir.convert(d), {P: p, Q: q}) for d in base_dims] == actual:
                return True
    return False


@settings(max_examples=60, deadline=None)
@given(st.lists(_base_dim, min_size=1, max_size=3), st.lists(_derived_dim, min_size=1, max_size=3),
       st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=3, max_size=6))
def test_is_base_of_is_sound_against_concrete_values(base_dims, derived_dims, samples):
    verdict = is_base_of(ShapeStructInfo(base_dims), ShapeStructInfo(derived_dims))
    for a, b in samples:
        actual = [_eval(tir.convert(d), {A: a, B: b}) for d in derived_dims]
        matches = len(base_dims) == len(actual) and _some_pattern_matches(base_dims, actual)
        if verdict == "yes":
            assert matches, (base_dims, derived_dims, a, b)
        if verdict == "no":
            assert not matches, (base_dims, derived_dims, a, b)
