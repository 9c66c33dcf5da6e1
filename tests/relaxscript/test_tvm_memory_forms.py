"""Issue 15 item 7: modules as TVM prints them after its memory passes
(``R.vm.alloc_storage``, ``R.vm.alloc_tensor``, ``R.builtin.alloc_tensor`` with a device
index, ``R.memory.kill_*``, ``_: R.Tuple() = cls.f(...)`` calls of prim_funcs) parse,
print, re-parse equal, interpret and build; StaticPlanBlockMemory reads and validates TVM's
``tir_var_upper_bound`` / ``tir_var_lower_bound`` function attributes."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from relaxscript.transform.var_bounds import MemoryPlanError
from tensorir.errors import ParseError

from .tvm_compat import assert_round_trip, assert_runs_alike, module_of

PRIM_FUNCS = '''
    @T.prim_func
    def add_one(A: T.Buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        T.func_attr({"global_symbol": "add_one"})
        for i in range(T.int64(4)):
            with T.block("B"):
                vi = T.axis.spatial(T.int64(4), i)
                B[vi] = A[vi] + T.float32(1.0)

    @T.prim_func
    def double(A: T.Buffer((T.int64(4),), "float32"), B: T.Buffer((T.int64(4),), "float32")):
        T.func_attr({"global_symbol": "double"})
        for i in range(T.int64(4)):
            with T.block("B"):
                vi = T.axis.spatial(T.int64(4), i)
                B[vi] = A[vi] * T.float32(2.0)
'''

# main as TVM's printer writes it after StaticPlanBlockMemory and VMBuiltinLower
AFTER_MEMORY_PASSES = '''
@R.ir_module
class Module:
''' + PRIM_FUNCS + '''
    @R.function
    def main(x: R.Tensor((4,), dtype="float32")) -> R.Tensor((4,), dtype="float32"):
        R.func_attr({"relax.force_pure": True})
        storage: R.Object = R.vm.alloc_storage(R.shape([16]), R.prim_value(0), R.dtype("uint8"), R.str("global"))
        alloc: R.Tensor((4,), dtype="float32") = R.vm.alloc_tensor(storage, R.prim_value(0), R.shape([4]), R.dtype("float32"))
        _: R.Tuple = cls.add_one(x, alloc)
        alloc1: R.Tensor((4,), dtype="float32") = R.builtin.alloc_tensor(R.shape([4]), R.dtype("float32"), R.prim_value(0), R.str("global"))
        _1: R.Tuple = cls.double(alloc, alloc1)
        _2: R.Tuple = R.memory.kill_tensor(alloc)
        _3: R.Tuple = R.memory.kill_storage(storage)
        return alloc1
'''


def test_tvm_memory_forms_parse_round_trip_and_run():
    mod = module_of(AFTER_MEMORY_PASSES)
    text = assert_round_trip(mod)
    # TVM's spellings are the same IR as ours and print in ours
    assert "R.memory.alloc_storage(R.shape([16])" in text and "R.memory.alloc_tensor(storage" in text
    x = np.arange(4, dtype="float32")
    assert_runs_alike(mod, x, expected=(x + 1) * 2)


def test_tvm_spelling_equals_ours():
    ours = AFTER_MEMORY_PASSES.replace(
        'R.vm.alloc_storage(R.shape([16]), R.prim_value(0), R.dtype("uint8"), R.str("global"))',
        'R.memory.alloc_storage(R.shape([16]), virtual_device_index=0, storage_scope="global", dtype="uint8")'
    ).replace('R.vm.alloc_tensor(storage, R.prim_value(0), R.shape([4]), R.dtype("float32"))',
              'R.memory.alloc_tensor(storage, 0, R.shape([4]), "float32")')
    assert ours != AFTER_MEMORY_PASSES
    rx.assert_structural_equal(module_of(ours), module_of(AFTER_MEMORY_PASSES))


def test_tvm_memory_level_spelling_of_our_ops():
    """After StaticPlanBlockMemory TVM prints R.memory.* with R.prim_value / R.str / R.dtype."""
    tvm_printed = AFTER_MEMORY_PASSES.replace(
        'R.vm.alloc_storage(R.shape([16]), R.prim_value(0), R.dtype("uint8"), R.str("global"))',
        'R.memory.alloc_storage(R.shape([16]), R.prim_value(0), R.str("global"), R.dtype("uint8"))'
    ).replace('R.vm.alloc_tensor(storage, R.prim_value(0), R.shape([4]), R.dtype("float32"))',
              'R.memory.alloc_tensor(storage, R.prim_value(0), R.shape([4]), R.dtype("float32"))')
    assert tvm_printed != AFTER_MEMORY_PASSES
    rx.assert_structural_equal(module_of(tvm_printed), module_of(AFTER_MEMORY_PASSES))


@pytest.mark.parametrize("bad,message", [
    ('R.prim_value(0), R.dtype("uint8"), R.str("shared"))', "storage_scope 'shared'"),
    ('R.prim_value(1), R.dtype("uint8"), R.str("global"))', "runtime_device_index 1"),
])
def test_other_devices_are_parse_errors(bad, message):
    text = AFTER_MEMORY_PASSES.replace('R.prim_value(0), R.dtype("uint8"), R.str("global"))', bad)
    with pytest.raises(ParseError, match=message):
        rx.from_source(text)


BOUNDED = '''
@R.function
def main(x: R.Tensor(("n", 4), dtype="float32")) -> R.Tensor(("n", 4), dtype="float32"):
    n = T.int64()
    R.func_attr(ATTRS)
    with R.dataflow():
        a = R.exp(x)
        b = R.nn.relu(a)
        c = R.exp(b)
        R.output(c)
    return c
'''


def _bounded(attrs: str) -> rx.IRModule:
    return module_of(BOUNDED.replace("ATTRS", attrs))


def test_tir_var_upper_bound_gives_a_static_plan_and_a_checked_entry():
    mod = _bounded('{"tir_var_upper_bound": {"n": 16}, "tir_var_lower_bound": {"n": 2}}')
    assert_round_trip(mod)
    planned = rx.transform.StaticPlanBlockMemory()(rx.transform.CallTIRRewrite()(
        rx.transform.LegalizeOps()(mod)))
    text = planned.script()
    assert "R.memory.alloc_storage(R.shape([256])" in text   # 16 * 4 float32 at the bound
    x = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
    assert_runs_alike(mod, x, expected=np.exp(np.maximum(np.exp(x), 0)))
    for target in ("interp", "c"):
        vm = rx.VirtualMachine(rx.build(mod, target=target))
        with pytest.raises(rx.ShapeMismatchError, match="expected <= 16"):
            vm["main"](np.ones((17, 4), "float32"))
        with pytest.raises(rx.ShapeMismatchError, match="expected >= 2"):
            vm["main"](np.ones((1, 4), "float32"))


@pytest.mark.parametrize("attrs,message", [
    ('{"tir_var_upper_bound": {"n": 0}}', "must be a positive int, got 0"),
    ('{"tir_var_upper_bound": {"n": -4}}', "must be a positive int, got -4"),
    ('{"tir_var_upper_bound": {"n": "big"}}', "must be a positive int"),
    ('{"tir_var_upper_bound": [16]}', "must be a dict"),
    ('{"tir_var_lower_bound": {"n": -1}}', "must be a non-negative int, got -1"),
    ('{"tir_var_upper_bound": {"n": 4}, "tir_var_lower_bound": {"n": 8}}', "upper bound of 'n' must be an int >= 8"),
    ('{"tir_var_upper_bound": {"m": 4}}', "names 'm'"),
])
def test_bad_bound_attributes_are_errors(attrs, message):
    lowered = rx.transform.CallTIRRewrite()(rx.transform.LegalizeOps()(_bounded(attrs)))
    with pytest.raises(MemoryPlanError, match=message):
        rx.transform.StaticPlanBlockMemory()(lowered)
    with pytest.raises(ValueError, match=message):
        rx.build(_bounded(attrs), target="interp")
