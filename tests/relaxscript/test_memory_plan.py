"""StaticPlanBlockMemory (paper Algorithm 3) on hand-written call_tir programs."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
import relaxscript.interpreter as interp
from relaxscript.expr import Call, Op
from tensorir.expr import IntImm
from tensorir.functor import collect

from .test_memory_checker import check_no_overlap

KERNELS = '''
    @T.prim_func
    def exp(x: T.Buffer(("p", "q"), "float32"), y: T.Buffer(("p", "q"), "float32")):
        p = T.int64()
        q = T.int64()
        for i, j in T.grid(p, q):
            with T.block("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = T.exp(x[vi, vj])

    @T.prim_func
    def relu(x: T.Buffer(("p", "q"), "float32"), y: T.Buffer(("p", "q"), "float32")):
        p = T.int64()
        q = T.int64()
        for i, j in T.grid(p, q):
            with T.block("relu"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = T.max(x[vi, vj], T.float32(0))

    @T.prim_func
    def transpose(x: T.Buffer(("a", "b"), "float32"), y: T.Buffer(("b", "a"), "float32")):
        a = T.int64()
        b = T.int64()
        for i, j in T.grid(b, a):
            with T.block("t"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = x[vj, vi]

    @T.prim_func
    def to_int(x: T.Buffer(("p", "q"), "float32"), y: T.Buffer(("p", "q"), "int32")):
        p = T.int64()
        q = T.int64()
        for i, j in T.grid(p, q):
            with T.block("c"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = T.Cast("int32", x[vi, vj] * T.float32(10))

    @T.prim_func
    def half_cols(x: T.Buffer(("p", "q"), "float32"), y: T.Buffer(("p", "q // 2"), "float32")):
        p = T.int64()
        q = T.int64()
        for i, j in T.grid(p, q // 2):
            with T.block("h"):
                vi, vj = T.axis.remap("SS", [i, j])
                y[vi, vj] = x[vi, vj * 2] + x[vi, vj * 2 + 1]
'''


def module(main: str) -> rx.IRModule:
    return rx.from_source("@R.ir_module\nclass Module:\n" + KERNELS + "\n" + main)


FIGURE10 = '''
    @R.function
    def main(x: R.Tensor((2, "n"), "float32")) -> R.Tensor((2, "n"), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.call_tir(Module.exp, [x], R.Tensor((2, n), "float32"))
            lv1 = R.call_tir(Module.transpose, [lv0], R.Tensor((n, 2), "float32"))
            lv2 = R.call_tir(Module.relu, [lv1], R.Tensor((n, 2), "float32"))
            lv3 = R.call_tir(Module.transpose, [lv2], R.Tensor((2, n), "float32"))
            lv4 = R.call_tir(Module.exp, [lv3], R.Tensor((2, n), "float32"))
            R.output(lv4)
        return lv4
'''


def lower(mod):
    unplanned = rx.transform.CallTIRRewrite()(mod)
    return unplanned, rx.transform.StaticPlanBlockMemory()(unplanned)


def ops_of(func, name):
    return [c for c in collect(func, lambda n: isinstance(n, Call) and isinstance(n.op, Op)
                               and n.op.name == name)]


def run_all(mods, *args):
    results, stats = [], []
    for m in mods:
        results.append(rx.interpret(m, "main", *args))
        stats.append(interp.last_run_stats())
    return results, stats


def check_roundtrip(mod):
    assert rx.analysis.well_formed(mod)
    rx.assert_structural_equal(rx.from_source(mod.script()), mod)


def test_figure10_four_intermediates_reuse_exactly_two_storages():
    mod = module(FIGURE10)
    unplanned, planned = lower(mod)
    main = planned["main"]
    assert len(ops_of(unplanned["main"], "relax.builtin.alloc_tensor")) == 5
    assert len(ops_of(main, "relax.memory.alloc_storage")) == 2
    assert len(ops_of(main, "relax.memory.alloc_tensor")) == 4
    assert len(ops_of(main, "relax.builtin.alloc_tensor")) == 1  # the returned lv4
    info = rx.analysis.memory_plan_info(planned)["main"]
    assert [sorted(t.name for t in s.tensors) for s in info.storages] == [["lv0", "lv2"], ["lv1", "lv3"]]
    assert rx.analysis.memory_plan_info(planned)["main"].planned_bytes_at_bounds is None
    for n in (1, 3, 8):
        x = np.random.default_rng(n).standard_normal((2, n)).astype("float32")
        (ref, before, after), (_, s_before, s_after) = run_all([mod, unplanned, planned], x)
        np.testing.assert_allclose(before, ref, rtol=1e-6)
        np.testing.assert_allclose(after, ref, rtol=1e-6)
        assert s_after.allocated_bytes == 3 * 2 * n * 4 < s_before.allocated_bytes == 5 * 2 * n * 4
        check_no_overlap(planned, {"n": n})
    check_roundtrip(unplanned)
    check_roundtrip(planned)


def test_reuse_across_dtypes_and_smaller_symbolic_sizes():
    mod = module('''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            a = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "float32"))
            b = R.call_tir(Module.to_int, [a], R.Tensor((n, 4), "int32"))
            c = R.call_tir(Module.relu, [x], R.Tensor((n, 4), "float32"))
            d = R.call_tir(Module.half_cols, [c], R.Tensor((n, 2), "float32"))
            e = R.call_tir(Module.relu, [d], R.Tensor((n, 2), "float32"))
            R.output(b, e)
        return (b, e)
    ''')
    unplanned, planned = lower(mod)
    info = rx.analysis.memory_plan_info(planned)["main"]
    # a (float32) then d (n * 8 bytes <= n * 16) reuse one storage; c another; b and e escape.
    assert len(info.storages) == 2
    assert sorted(t.name for s in info.storages for t in s.tensors) == ["a", "c", "d"]
    assert {t.name for t in info.unplanned} == {"b", "e"}
    for n in (2, 5):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        (ref, got), _ = run_all([mod, planned], x)
        for r, g in zip(ref, got):
            np.testing.assert_allclose(g, r, rtol=1e-6)
        check_no_overlap(planned, {"n": n})
    check_roundtrip(planned)


def test_if_branches_plan_separately_and_outer_tensors_stay_live():
    mod = module('''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), flag: R.Prim("bool")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        a = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "float32"))
        if flag:
            t1 = R.call_tir(Module.relu, [a], R.Tensor((n, 4), "float32"))
            t2 = R.call_tir(Module.exp, [t1], R.Tensor((n, 4), "float32"))
            t3 = R.call_tir(Module.relu, [t2], R.Tensor((n, 4), "float32"))
            r = R.call_tir(Module.exp, [t3], R.Tensor((n, 4), "float32"))
        else:
            f1 = R.call_tir(Module.relu, [x], R.Tensor((n, 4), "float32"))
            r = R.call_tir(Module.exp, [f1], R.Tensor((n, 4), "float32"))
        b = R.call_tir(Module.relu, [a], R.Tensor((n, 4), "float32"))
        c = R.call_tir(Module.exp, [b], R.Tensor((n, 4), "float32"))
        return R.add(r, c)
    ''')
    unplanned, planned = lower(mod)
    info = rx.analysis.memory_plan_info(planned)["main"]
    owner = {t.name: s.name for s in info.storages for t in s.tensors}
    true_storages = {owner["t1"], owner["t2"], owner["t3"]}
    assert len(true_storages) == 2 and owner["t1"] == owner["t3"]
    assert owner["f1"] not in true_storages          # never reused across branches
    assert owner["a"] not in true_storages | {owner["f1"], owner["b"]}   # a is read after the If
    assert "r" not in owner                          # the branch result escapes the branch
    for n in (1, 4):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        for flag in (True, False):
            (ref, got), _ = run_all([mod, planned], x, flag)
            np.testing.assert_allclose(got, ref, rtol=1e-6)
        check_no_overlap(planned, {"n": n})
    check_roundtrip(planned)


BOUNDED = '''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64(UPPER)
        ATTR
        with R.dataflow():
            a = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "float32"))
            b = R.call_tir(Module.half_cols, [a], R.Tensor((n, 2), "float32"))
            c = R.call_tir(Module.transpose, [x], R.Tensor((4, n), "float32"))
            d = R.call_tir(Module.transpose, [c], R.Tensor((n, 4), "float32"))
            e = R.call_tir(Module.relu, [b], R.Tensor((n, 2), "float32"))
            f = R.call_tir(Module.transpose, [e], R.Tensor((2, n), "float32"))
            g = R.call_tir(Module.transpose, [f], R.Tensor((n, 2), "float32"))
            h = R.call_tir(Module.half_cols, [d], R.Tensor((n, 2), "float32"))
            out = R.call_tir(Module.exp, [d], R.Tensor((n, 4), "float32"))
            R.output(out, g, h)
        return out
'''


@pytest.mark.parametrize("bound_kind", ["fact", "attr"])
def test_upper_bound_gives_a_static_plan_of_constant_storages(bound_kind):
    text = BOUNDED.replace("UPPER", "upper=64" if bound_kind == "fact" else "")
    text = text.replace("ATTR", 'R.func_attr({"relax.memory_upper_bound": {"n": 64}})'
                        if bound_kind == "attr" else "")
    mod = module(text)
    unplanned, planned = lower(mod)
    info = rx.analysis.memory_plan_info(planned)["main"]
    assert all(isinstance(s.size, IntImm) for s in info.storages)
    assert all(s.size_at_bounds is not None for s in info.storages)
    # every storage is a constant sized at n = 64
    assert {s.size_at_bounds for s in info.storages} <= {64 * 4 * 4, 64 * 2 * 4}
    assert info.planned_bytes_at_bounds == sum(s.size_at_bounds for s in info.storages)
    assert info.planned_bytes_at_bounds < 7 * 64 * 4 * 4
    table = rx.analysis.memory_plan(planned)
    assert "function 'main'" in table and "planned total" in table
    assert str(info.planned_bytes_at_bounds) in table
    for n in (1, 17, 64):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        (ref, got), _ = run_all([mod, planned], x)
        np.testing.assert_allclose(got, ref, rtol=1e-6)
        check_no_overlap(planned, {"n": n})
    check_roundtrip(planned)
    if bound_kind == "attr":  # beyond the promised bound the views no longer fit: a clear error
        with pytest.raises(ValueError, match="upper bound"):
            rx.interpret(planned, "main", np.ones((65, 4), "float32"))


def test_bad_upper_bound_attribute_is_a_clear_error():
    text = BOUNDED.replace("UPPER", "").replace("ATTR", 'R.func_attr({"relax.memory_upper_bound": {"k": 8}})')
    unplanned = rx.transform.CallTIRRewrite()(module(text))
    with pytest.raises(ValueError, match="names 'k'"):
        rx.transform.StaticPlanBlockMemory()(unplanned)


def test_tensors_in_returned_tuples_and_aliases_are_never_planned():
    mod = module('''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            a = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "float32"))
            b = R.call_tir(Module.relu, [a], R.Tensor((n, 4), "float32"))
            c = R.reshape(b, R.shape([n * 4]))
            d = R.call_tir(Module.exp, [a], R.Tensor((n, 4), "float32"))
            e = R.call_tir(Module.relu, [d], R.Tensor((n, 4), "float32"))
            t = (c, e)
            R.output(t)
        return t
    ''')
    unplanned, planned = lower(mod)
    info = rx.analysis.memory_plan_info(planned)["main"]
    assert {t.name for t in info.unplanned} == {"b", "e"}   # b escapes through the reshape view
    assert sorted(t.name for s in info.storages for t in s.tensors) == ["a", "d"]
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    (ref, got), _ = run_all([mod, planned], x)
    for r, g in zip(ref, got):
        np.testing.assert_allclose(g, r, rtol=1e-6)
    check_no_overlap(planned, {"n": 3})


def test_library_calls_are_planned_too():
    mod = module('''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        with R.dataflow():
            a = R.call_dps_library("numpy.negative", [x], R.Tensor((n, 4), "float32"))
            b = R.call_tir(Module.exp, [a], R.Tensor((n, 4), "float32"))
            c = R.call_dps_library("numpy.negative", [b], R.Tensor((n, 4), "float32"))
            d = R.call_tir(Module.relu, [c], R.Tensor((n, 4), "float32"))
            R.output(d)
        return d
    ''')
    unplanned, planned = lower(mod)
    assert ops_of(planned["main"], "relax.call_dps_library_dps")
    assert len(ops_of(planned["main"], "relax.memory.alloc_storage")) == 2
    x = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
    (ref, got), _ = run_all([mod, planned], x)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    check_roundtrip(planned)


def test_pooled_allocator_reuses_killed_blocks_of_exact_size():
    mod = module(FIGURE10)
    unplanned = rx.transform.CallTIRRewrite()(mod)
    killed = rx.transform.KillAfterLastUse()(unplanned)
    assert len(ops_of(killed["main"], "relax.memory.kill_tensor")) == 4
    check_roundtrip(killed)
    x = np.ones((2, 6), "float32")
    pool = interp.PooledAllocator()
    with interp.use_allocator(pool):
        rx.interpret(killed, "main", x)
        first = interp.last_run_stats()
        rx.interpret(killed, "main", x)
        second = interp.last_run_stats()
    assert first.requested_bytes == 5 * 48 and first.allocated_bytes == 2 * 48
    assert second.allocated_bytes == 48       # only the returned tensor is not recycled
    # without a pool every request is fresh
    rx.interpret(killed, "main", x)
    assert interp.last_run_stats().allocated_bytes == 5 * 48


def test_if_result_aliasing_branch_allocations_is_left_to_the_branches():
    # After CallTIRRewrite each branch ends in its own allocation, which the If's result
    # aliases outside the branch; the outer scope neither plans nor kills it.
    mod = module('''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), flag: R.Prim("bool")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        if flag:
            t1 = R.call_tir(Module.relu, [x], R.Tensor((n, 4), "float32"))
            t2 = R.call_tir(Module.exp, [t1], R.Tensor((n, 4), "float32"))
            r = t2
        else:
            r = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "float32"))
        c = R.call_tir(Module.relu, [r], R.Tensor((n, 4), "float32"))
        d = R.call_tir(Module.exp, [c], R.Tensor((n, 4), "float32"))
        return d
    ''')
    unplanned, planned = lower(mod)
    killed = rx.transform.KillAfterLastUse()(unplanned)
    owner = {t.name: s.name for s in rx.analysis.memory_plan_info(planned)["main"].storages
             for t in s.tensors}
    assert set(owner) == {"t1", "c"}
    for n in (1, 3):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        for flag in (True, False):
            (ref, got, got_killed), _ = run_all([mod, planned, killed], x, flag)
            np.testing.assert_allclose(got, ref, rtol=1e-6)
            np.testing.assert_allclose(got_killed, ref, rtol=1e-6)
        check_no_overlap(planned, {"n": n})
    check_roundtrip(planned)
    check_roundtrip(killed)


def test_kills_deferred_past_a_dataflow_block_join_the_next_plain_block():
    # A kill inside a dataflow block moves after it; beside the plain block that follows it
    # must be one block, as the printed text reads back (found by the round-trip property).
    mod = module('''
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = T.int64()
        t1 = R.call_tir(Module.relu, [x], R.Tensor((n, 4), "float32"))
        t2 = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "float32"))
        with R.dataflow():
            pair = (t1, t2)
            first = pair[0]
            R.output(first)
        c = R.call_tir(Module.relu, [first], R.Tensor((n, 4), "float32"))
        return c
    ''')
    unplanned, planned = lower(mod)
    assert "DataflowBlock" in [type(block).__name__ for block in unplanned["main"].body.blocks]
    for result in (rx.transform.KillAfterLastUse()(unplanned), planned):
        kinds = [type(block).__name__ for block in result["main"].body.blocks]
        assert all(not (a == b == "BindingBlock") for a, b in zip(kinds, kinds[1:])), kinds
        check_roundtrip(result)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    (ref, got), _ = run_all([mod, planned], x)
    np.testing.assert_allclose(got, ref, rtol=1e-6)
