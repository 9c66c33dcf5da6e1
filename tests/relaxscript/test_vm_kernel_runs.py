"""Runs of kernel calls joined into one native call (vm/linker.link_kernel_runs, C target)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tensorir.errors import IndexOutOfRangeError, ShapeMismatchError
from tests.relaxscript import vm_modules as M
from tests.relaxscript.test_interpreter import countdown_module
from tests.relaxscript.test_tvm_index_ops import SCATTERS, module_of

F32 = "float32"


def _unfused(mod):
    skip = {"FuseOps", "FuseTIR"}   # every op its own kernel: long runs of calls
    return rx.build(mod, target="c", pipeline=[p for p in rx.get_pipeline("c") if type(p).__name__ not in skip])


def _run_steps(vm, name="main") -> int:
    """Kernel calls the linked frame of ``name`` runs inside joined steps."""
    frame = vm.function(name).pool[-1]
    return sum(len(step.kept[0]) for step in frame.steps if hasattr(step, "kept"))


def _both(exe):
    return rx.VirtualMachine(exe), rx.VirtualMachine(exe, kernel_runs=False)


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", sorted(M.MODULES))
@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 7), m=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_joined_runs_give_the_per_call_results(name, n, m, seed):
    runs, steps = _vms(name)
    args = M.inputs_for(name, np.random.default_rng(seed), n, m)
    _same(runs["main"](*args), steps["main"](*args))


_BUILT: dict = {}


def _vms(name):
    if name not in _BUILT:
        _BUILT[name] = _both(_unfused(M.parse(M.MODULES[name])))
    return _BUILT[name]


def test_a_chain_of_calls_becomes_one_step_and_sizes_change_between_calls():
    runs, steps = _both(_unfused(M.chain_module(8, "n")))
    rng = np.random.default_rng(0)
    for n in (4, 9, 1, 9, 33):   # call sites' symbol work runs each call (hoisted to the run's start)
        x = rng.standard_normal(n).astype(F32)
        _same(runs["main"](x), steps["main"](x))
    assert _run_steps(runs) >= 8 and _run_steps(steps) == 0


def test_instruments_see_every_instruction_of_a_joined_run():
    runs, steps = _both(_unfused(M.chain_module(6, 5)))
    x = np.full(5, 0.75, F32)
    seen = {}
    for key, vm in (("runs", runs), ("steps", steps)):
        vm["main"](x)   # links the frame
        names = []
        vm.set_instrument(lambda f, i, name, value, names=names: names.append((i, name)))
        vm["main"](x)
        vm.set_instrument(None)
        seen[key] = names
    assert _run_steps(runs) >= 6
    assert seen["runs"] == seen["steps"] and len(seen["runs"]) >= 6


def test_a_failing_kernel_in_a_run_raises_its_own_error():
    exe = rx.build(module_of(SCATTERS), target="c")
    runs, steps = _both(exe)
    x = np.ones((2, 3), F32)
    args = (x, np.array([[1]]), np.full((1, 3), 5.0, F32), np.zeros((2, 3), "int64"), np.zeros((2, 3), F32))
    _same(runs["main"](*args), steps["main"](*args))
    assert _run_steps(runs) >= 2
    bad = list(args)
    bad[1] = np.array([[7]])
    messages = []
    for vm in (runs, steps):
        with pytest.raises(IndexOutOfRangeError, match="index 7 is out of range for an axis of size 2") as err:
            vm["main"](*bad)
        messages.append(str(err.value))
    assert messages[0] == messages[1]
    _same(runs["main"](*args), steps["main"](*args))   # the next call is unaffected


def test_runs_do_not_cross_branches_or_recursion():
    exe = rx.build(countdown_module(), target="c")
    runs, steps = _both(exe)
    x = np.arange(5, dtype=F32)
    for times in (0, 3, 1):
        _same(runs["main"](x, times), x * 2 ** times)
        _same(steps["main"](x, times), x * 2 ** times)


def test_bound_arguments_and_free_ones_that_change_between_calls():
    exe = _unfused(M.chain_module(8, "n"))
    vm = rx.VirtualMachine(exe)
    mod = M.parse(M.MODULES["MLP"])
    mlp = rx.VirtualMachine(_unfused(mod))
    rng = np.random.default_rng(3)
    w1, b1, w2 = (rng.standard_normal(s).astype(F32) for s in ((8, 16), (16,), (16, 4)))
    bound = mlp.bind("main", {1: w1, 2: b1})
    for n in (3, 5):
        x = rng.standard_normal((n, 8)).astype(F32)
        w2 = rng.standard_normal((16, 4)).astype(F32)      # a new array each call
        _same(bound(x, w2), mlp["main"](x, w1, b1, w2))
    w1[...] = 0.0                                           # a fixed array's elements may change
    x = rng.standard_normal((2, 8)).astype(F32)
    _same(bound(x, w2), mlp["main"](x, w1, b1, w2))
    with pytest.raises(ShapeMismatchError):
        bound(rng.standard_normal((2, 7)).astype(F32), w2)
    first = vm["main"](np.ones(4, F32))
    assert first.shape == (4,)


def test_kernel_runs_flag_is_checked():
    with pytest.raises(TypeError, match="kernel_runs must be True or False"):
        rx.VirtualMachine(rx.build(M.chain_module(2, 3), target="c"), kernel_runs=1)


def test_timed_runs_name_and_time_each_kernel():
    """CKernelModule.time_runs (benchmarks/profile_decode.py --mode native): the same results, each
    joined call's time added up under its kernel's name."""
    exe = _unfused(M.chain_module(6, 300))
    vm, plain = _both(exe)
    vm.kernels.time_runs = True   # read when a frame is linked (the first call)
    x = np.linspace(-1.0, 1.0, 300, dtype=F32)
    try:
        _same(vm["main"](x), plain["main"](x))
    finally:
        vm.kernels.time_runs = False
    frame = vm.function("main").pool[-1]
    joined = [step for step in frame.steps if hasattr(step, "kept")]
    assert joined
    kernels = [ins.kernel for ins in vm.exe.functions["main"].code if type(ins).__name__ == "CallKernel"]
    names = [name for step in joined for name in step.kernels]
    assert names == [k for k in kernels if k in names] and len(names) >= 6
    assert all(t > 0 for step in joined for t in step.times)


def test_a_runner_that_could_not_be_built_is_retried(monkeypatch):
    # A VM made while compiling is refused (a loaded executable's test) must not leave every
    # later VM of the process without joined runs.
    from backends.c import kernel_runs
    monkeypatch.setattr(kernel_runs, "_RUNNERS", {})

    def no_gcc(*args, **kwargs):
        raise AssertionError("no compiler at this moment")
    with monkeypatch.context() as patch:
        patch.setattr("backends.c.compiler.compile_shared", no_gcc)
        assert kernel_runs.runner() is None
    assert kernel_runs.runner() is not None
    runs, _ = _both(_unfused(M.chain_module(4, "n")))
    x = np.ones(3, F32)
    runs["main"](x)
    assert _run_steps(runs) >= 4
