"""The VM on memory-planned modules: rx.build runs LiftWorkspace -> CallTIRRewrite ->
StaticPlanBlockMemory, the VM runs the lowered memory operations (storages, views,
kills, DPS calls) with the interpreter's results, allocates static-plan storages
once per VM, and rejects a symbolic value above its bound before any kernel runs."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import relaxscript as rx
from tests.targets import AVAILABLE_VM_TARGETS, VM_TARGETS
from relaxscript.vm import instructions as I
from tensorir.errors import ShapeMismatchError

from . import test_memory_plan as plans
from .test_lift_workspace import SPLIT_K

TARGETS = VM_TARGETS


def _main_of(test) -> str:
    """The ``main`` a test of test_memory_plan writes inline (kept in one place there)."""
    return inspect.getsource(test).split("module('''")[1].split("''')")[0]


def _bounded(kind: str) -> str:
    if kind == "fact":
        return plans.BOUNDED.replace("UPPER", "upper=64").replace("ATTR", "")
    return plans.BOUNDED.replace("UPPER", "").replace(
        "ATTR", 'R.func_attr({"relax.memory_upper_bound": {"n": 64}})')


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


# name -> (module, inputs for size n and a flag)
CASES = {
    "figure10": (lambda: plans.module(plans.FIGURE10), lambda rng, n, flag: (_f32(rng, 2, n),)),
    "if_branches": (lambda: plans.module(_main_of(plans.test_if_branches_plan_separately_and_outer_tensors_stay_live)),
                    lambda rng, n, flag: (_f32(rng, n, 4), flag)),
    "library": (lambda: plans.module(_main_of(plans.test_library_calls_are_planned_too)),
                lambda rng, n, flag: (_f32(rng, n, 4),)),
    "split_k_workspace": (lambda: rx.from_source(SPLIT_K), lambda rng, n, flag: (_f32(rng, n, 16), _f32(rng, 16, 8))),
    "bounded_fact": (lambda: plans.module(_bounded("fact")), lambda rng, n, flag: (_f32(rng, n, 4),)),
    "bounded_attr": (lambda: plans.module(_bounded("attr")), lambda rng, n, flag: (_f32(rng, n, 4),)),
}


def _instructions(exe) -> set[str]:
    return {type(ins).__name__ for func in exe.functions.values() for ins in func.code}


def _assert_same(got, expected):
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


def test_default_pipeline_lifts_workspaces_then_rewrites_then_plans():
    for target in AVAILABLE_VM_TARGETS:
        pipeline = rx.get_pipeline(target)
        names = [type(p).__name__ for p in pipeline]
        assert names.index("LiftWorkspace") < names.index("DeadCodeElimination") \
            < names.index("CallTIRRewrite") < names.index("StaticPlanBlockMemory"), names


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("prelowered", [False, True], ids=["full_pipeline", "planned_by_hand"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_planned_modules_run_like_the_interpreter(name, prelowered, target):
    make_module, make_inputs = CASES[name]
    mod = make_module()
    if prelowered:   # the lowered memory ops themselves as VM input
        lowered = rx.transform.StaticPlanBlockMemory()(
            rx.transform.CallTIRRewrite()(rx.transform.LiftWorkspace()(mod)))
        exe = rx.build(lowered, target=target, pipeline=[])
        assert {"AllocStorage", "AllocTensor", "CallKernel"} <= _instructions(exe)
    else:   # fusion may leave nothing to plan (Figure 10 becomes one kernel)
        exe = rx.build(mod, target=target)
        assert {"AllocTensor", "CallKernel"} <= _instructions(exe)
    vm = rx.VirtualMachine(exe)
    rng = np.random.default_rng(7)
    sizes = (1, 17, 64) if name.startswith("bounded") else (1, 5)
    for n in sizes:
        for flag in ((True, False) if name == "if_branches" else (True,)):
            args = make_inputs(rng, n, flag)
            _assert_same(vm["main"](*args), rx.interpret(mod, "main", *args))


def _record_pointers(vm, *args) -> dict:
    """Data address of every tensor the VM reports, by name (the last one of each name)."""
    seen = {}

    def hook(func, pc, name, value):
        if isinstance(value, np.ndarray) and name:
            seen[name] = value.__array_interface__["data"][0]
        elif hasattr(value, "address") and name:   # a device array: where its device memory starts
            seen[name] = value.address
    vm.set_instrument(hook)
    try:
        vm["main"](*args)
    finally:
        vm.set_instrument(None)
    return seen


@pytest.mark.parametrize("target", TARGETS)
def test_static_plan_storages_are_allocated_once_and_reused_for_every_size(target):
    lowered = plans.module(_bounded("fact"))
    for p in rx.get_pipeline(target):   # what rx.build runs, kept to read the plan
        lowered = p(lowered)
    planned = {t.name for s in rx.analysis.memory_plan_info(lowered)["main"].storages for t in s.tensors}
    assert planned
    exe = rx.build(lowered, target=target, pipeline=[])
    static = [ins for f in exe.functions.values() for ins in f.code
              if isinstance(ins, I.AllocStorage)]
    assert static and all(ins.static_size is not None for ins in static)
    vm = rx.VirtualMachine(exe)
    rng = np.random.default_rng(0)
    first = _record_pointers(vm, _f32(rng, 64, 4))
    assert planned <= set(first)
    for n in (64, 1, 30):   # other calls, other sizes: the same bytes
        again = _record_pointers(vm, _f32(rng, n, 4))
        assert {k: again[k] for k in planned} == {k: first[k] for k in planned}


@pytest.mark.parametrize("target", TARGETS)
def test_symbolic_storages_are_kept_across_calls_of_the_same_size(target):
    mod = plans.module(plans.FIGURE10)
    _, planned_mod = plans.lower(mod)     # unfused: four tensors in two symbolic storages
    vm = rx.VirtualMachine(rx.build(planned_mod, target=target, pipeline=[]))
    x = np.random.default_rng(0).standard_normal((2, 6)).astype("float32")
    first = _record_pointers(vm, x)
    second = _record_pointers(vm, x)
    planned = ["lv0", "lv1", "lv2", "lv3"]
    assert [second[k] for k in planned] == [first[k] for k in planned]
    assert first["lv0"] == first["lv2"] and first["lv1"] == first["lv3"]   # Figure 10's reuse
    _assert_same(vm["main"](x), rx.interpret(mod, "main", x))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["fact", "attr"])
def test_size_above_the_bound_is_rejected_before_any_kernel(kind, target):
    mod = plans.module(_bounded(kind))
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    seen = []
    vm.set_instrument(lambda *a: seen.append(a))
    with pytest.raises(ShapeMismatchError) as info:
        vm["main"](np.zeros((65, 4), "float32"))
    vm.set_instrument(None)
    message = str(info.value)
    for part in ("function 'main'", "parameter 'x'", "symbolic var n", "64", "upper bound", "got 65"):
        assert part in message, message
    assert seen == []
    x = np.random.default_rng(1).standard_normal((64, 4)).astype("float32")
    _assert_same(vm["main"](x), rx.interpret(mod, "main", x))   # the VM is still usable


def test_bad_bound_attribute_is_a_build_error():
    text = _bounded("attr").replace('{"n": 64}', '{"n": "many"}')
    with pytest.raises(ValueError, match="relax.memory_upper_bound"):
        rx.build(plans.module(text), target="interp", pipeline=[])
