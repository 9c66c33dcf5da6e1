"""FuseOps: exact before/after modules (paper Figure 8, match_cast ordering,
convexity) and the pattern-kind rules, checked by kernel counts."""
import numpy as np
import pytest

import relaxscript as rx
from tests.targets import COMPILED_TARGETS
from relaxscript.struct_info import ShapeStructInfo

from .fuse_helpers import (assert_same, build_program, check_kernel_kinds, count_call_tir,
                           count_kernel_calls, make_kernels, random_inputs)

ADD_RELU_KERNELS = '''
    @T.prim_func
    def add(x: T.Buffer(("n * 2",), "float32"), y: T.Buffer(("n * 2",), "float32"), z: T.Buffer(("n * 2",), "float32")):
        n = T.int64()
        for i in range(n * 2):
            with T.block("add"):
                vi = T.axis.spatial(n * 2, i)
                z[vi] = x[vi] + y[vi]

    @T.prim_func
    def relu(x: T.Buffer(("m",), "float32"), z: T.Buffer(("m",), "float32")):
        m = T.int64()
        for i in range(m):
            with T.block("relu"):
                vi = T.axis.spatial(m, i)
                z[vi] = T.max(x[vi], T.float32(0))
'''

FIGURE8_BEFORE = '''
@I.ir_module
class Module:
''' + ADD_RELU_KERNELS + '''
    @R.function
    def main(x: R.Tensor(("n", 2), "float32"), y: R.Tensor(("n", 2), "float32")) -> R.Tensor(("n * 2",), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.reshape(x, R.shape([n * 2]))
            lv1 = R.reshape(y, R.shape([n * 2]))
            lv2 = R.call_tir(cls.add, (lv0, lv1), R.Tensor((n * 2,), "float32"))
            lv3 = R.call_tir(cls.relu, (lv2,), R.Tensor((n * 2,), "float32"))
            R.output(lv3)
        return lv3
'''

FIGURE8_AFTER = '''
@I.ir_module
class Module:
''' + ADD_RELU_KERNELS + '''
    @R.function
    def fused_add_relu(x: R.Tensor(("n * 2",), "float32"), y: R.Tensor(("n * 2",), "float32"), s: R.Shape(["n"])) -> R.Tensor(("n * 2",), "float32"):
        R.func_attr({"primitive": True, "fused_from": ("add", "relu")})
        n = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(cls.add, (x, y), R.Tensor((n * 2,), "float32"))
            lv1 = R.call_tir(cls.relu, (lv0,), R.Tensor((n * 2,), "float32"))
            R.output(lv1)
        return lv1

    @R.function
    def main(x: R.Tensor(("n", 2), "float32"), y: R.Tensor(("n", 2), "float32")) -> R.Tensor(("n * 2",), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.reshape(x, R.shape([n * 2]))
            lv1 = R.reshape(y, R.shape([n * 2]))
            lv3 = cls.fused_add_relu(lv0, lv1, R.shape([n]))
            R.output(lv3)
        return lv3
'''


def _roundtrip_and_well_formed(mod):
    rx.assert_structural_equal(rx.from_source(mod.script()), mod)
    assert rx.analysis.well_formed(mod)


def test_figure8_fused_signature_carries_a_shape_parameter():
    before = rx.from_source(FIGURE8_BEFORE)
    after = rx.transform.FuseOps()(before)
    rx.assert_structural_equal(after, rx.from_source(FIGURE8_AFTER))
    fused = after["fused_add_relu"]
    assert [p.name_hint for p in fused.params][-1] == "s"
    assert isinstance(fused.params[2].struct_info, ShapeStructInfo)
    _roundtrip_and_well_formed(after)
    for n in (1, 4):
        x, y = (np.random.default_rng(n + k).standard_normal((n, 2)).astype("float32") for k in (0, 9))
        np.testing.assert_array_equal(rx.interpret(after, "main", x, y), rx.interpret(before, "main", x, y))
    rx.assert_structural_equal(rx.transform.FuseOps()(before), after)  # deterministic
    rx.assert_structural_equal(before, rx.from_source(FIGURE8_BEFORE))  # input untouched


MATCH_CAST_KERNELS = '''
    @T.prim_func
    def exp(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in range(n):
            with T.block("exp"):
                vi = T.axis.spatial(n, i)
                y[vi] = T.exp(x[vi])

    @T.prim_func
    def outer_add(a: T.Buffer(("n",), "float32"), b: T.Buffer(("m",), "float32"), c: T.Buffer(("n", "m"), "float32")):
        n = T.int64()
        m = T.int64()
        for i, j in T.grid(n, m):
            with T.block("outer"):
                vi, vj = T.axis.remap("SS", [i, j])
                c[vi, vj] = a[vi] + b[vj]
'''

MATCH_CAST_BEFORE = '''
@I.ir_module
class Module:
''' + MATCH_CAST_KERNELS + '''
    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(ndim=1, dtype="float32")) -> R.Tensor(ndim=2, dtype="float32"):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(cls.exp, (x,), R.Tensor((n,), "float32"))
            y1 = R.match_cast(y, R.Tensor((m,), "float32"))
            lv1 = R.call_tir(cls.outer_add, (lv0, y1), R.Tensor((n, m), "float32"))
            R.output(lv1)
        return lv1
'''

MATCH_CAST_AFTER = '''
@I.ir_module
class Module:
''' + MATCH_CAST_KERNELS + '''
    @R.function
    def fused_exp_outer_add(x: R.Tensor(("n",), "float32"), y1: R.Tensor(("m",), "float32")) -> R.Tensor(("n", "m"), "float32"):
        R.func_attr({"primitive": True, "fused_from": ("exp", "outer_add")})
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(cls.exp, (x,), R.Tensor((n,), "float32"))
            lv1 = R.call_tir(cls.outer_add, (lv0, y1), R.Tensor((n, m), "float32"))
            R.output(lv1)
        return lv1

    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(ndim=1, dtype="float32")) -> R.Tensor(ndim=2, dtype="float32"):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            y1 = R.match_cast(y, R.Tensor((m,), "float32"))
            lv1 = cls.fused_exp_outer_add(x, y1)
            R.output(lv1)
        return lv1
'''


def test_fused_call_is_placed_after_the_match_cast_defining_its_vars():
    before = rx.from_source(MATCH_CAST_BEFORE)
    after = rx.transform.FuseOps()(rx.transform.AnnotateTIROpPattern()(before))
    expected = rx.transform.AnnotateTIROpPattern()(rx.from_source(MATCH_CAST_AFTER))
    rx.assert_structural_equal(after, expected)
    _roundtrip_and_well_formed(after)
    x, y = np.arange(3, dtype="float32"), np.arange(5, dtype="float32")
    np.testing.assert_allclose(rx.interpret(after, "main", x, y), rx.interpret(before, "main", x, y))
    fused = rx.transform.FuseTIR()(after)
    np.testing.assert_allclose(rx.interpret(fused, "main", x, y), np.exp(x)[:, None] + y[None, :], rtol=1e-6)


NON_CONVEX = '''
@I.ir_module
class Module:
    @T.prim_func
    def exp(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in range(n):
            with T.block("exp"):
                vi = T.axis.spatial(n, i)
                y[vi] = T.exp(x[vi])

    @T.prim_func
    def add(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32"), z: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in range(n):
            with T.block("add"):
                vi = T.axis.spatial(n, i)
                z[vi] = x[vi] + y[vi]

    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(cls.exp, (x,), R.Tensor((n,), "float32"))
            lv1 = R.nn.relu(lv0)
            lv2 = R.call_tir(cls.add, (lv0, lv1), R.Tensor((n,), "float32"))
            R.output(lv2)
        return lv2
'''


def test_group_whose_path_leaves_and_reenters_is_not_fused():
    before = rx.from_source(NON_CONVEX)
    after = rx.transform.FuseOps()(before)
    rx.assert_structural_equal(after, before)
    assert not any(f.attrs.get("primitive") for f in after.relax_functions.values())


@pytest.mark.parametrize("target", COMPILED_TARGETS)
def test_two_groups_that_would_need_each_other_are_not_both_formed(target):
    # regression (found by the slow random-program test): {lv_1, lv_3} needs lv and
    # {lv, lv_2, lv_4} needs lv_1; each group alone is convex, together they form a cycle
    from .test_memory_random import build as call_tir_program
    mod = call_tir_program([("rowsum", 0, 0), ("rowsum", 0, 0), ("add", 1, 0), ("add", 1, 1), ("add", 2, 2)],
                           0, None)
    fused = rx.transform.FuseOps()(rx.transform.AnnotateTIROpPattern()(rx.transform.LegalizeOps()(mod)))
    x = np.random.default_rng(2).standard_normal((5, 3)).astype("float32")
    assert_same(rx.interpret(fused, "main", x), rx.interpret(mod, "main", x))
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    assert_same(vm["main"](x), rx.interpret(mod, "main", x))


def _kernels_after_fusion(steps, max_depth=256, **kw):
    mod, oracle = build_program(steps, kw.get("flatten", False), kw.get("cast_at"), kw.get("outputs", [-1]))
    fused_ops = rx.transform.FuseOps(max_depth=max_depth)(rx.transform.AnnotateTIROpPattern()(mod))
    fused = rx.transform.FuseTIR()(fused_ops)
    args = random_inputs(np.random.default_rng(0), 3, kw.get("flatten", False))
    assert_same(rx.interpret(fused, "main", *args), oracle(*args))
    assert count_kernel_calls(fused_ops) == count_call_tir(fused)
    return count_call_tir(fused)


def test_kernel_kinds_follow_algorithm_1():
    check_kernel_kinds(make_kernels())


@pytest.mark.parametrize("steps, kernels", [
    ([("mm", [0, 0]), ("bias", [1, 0]), ("relu", [2])], 1),            # matmul + bias + activation
    ([("flip", [0]), ("mm", [1, 0]), ("relu", [2])], 1),               # injective prologue (Figure 9)
    ([("mm", [0, 0]), ("mm", [1, 0])], 2),                             # never two OutputWiseFusibles
    ([("mm", [0, 0]), ("rownorm", [1])], 2),                           # no reduction after a matmul
    ([("mm", [0, 0]), ("flip", [1])], 2),                              # epilogue is elementwise only
    ([("scale", [0]), ("rownorm", [1]), ("relu", [2])], 1),            # reduction with both sides
    ([("rownorm", [0]), ("scale", [1]), ("rownorm", [2])], 1),         # row reductions stitch
    ([("rownorm", [0]), ("rownorm", [0]), ("add", [1, 2])], 2),        # siblings: not a chain
    ([("relu", [0]), ("flip_opaque", [1]), ("scale", [2])], 3),        # Opaque never fuses
    ([("relu", [0]), ("flip", [1]), ("add", [2, 1]), ("bias", [3, 0])], 1),  # injective chains
])
def test_pattern_kind_rules(steps, kernels):
    assert _kernels_after_fusion(steps) == kernels


def test_max_depth_bounds_group_size():
    steps = [("relu", [0]), ("scale", [1]), ("relu", [2]), ("scale", [3]), ("relu", [4])]
    assert _kernels_after_fusion(steps) == 1
    assert _kernels_after_fusion(steps, max_depth=2) == 3
    with pytest.raises(ValueError, match="max_depth"):
        rx.transform.FuseOps(max_depth=0)


def test_value_used_outside_group_becomes_a_tuple_output():
    mod, oracle = build_program([("mm", [0, 0]), ("bias", [1, 0]), ("relu", [2])], True, None, [2, 3])
    after = rx.transform.FuseOps()(mod)
    (fused,) = [f for f in after.relax_functions.values() if f.attrs.get("primitive")]
    assert len(fused.ret_struct_info.fields if fused.ret_struct_info is not None
               else fused.body.struct_info.fields) == 2
    assert isinstance(fused.params[-1].struct_info, ShapeStructInfo)  # rows are n * 2
    _roundtrip_and_well_formed(after)
    args = random_inputs(np.random.default_rng(1), 2, True)
    assert_same(rx.interpret(after, "main", *args), oracle(*args))
