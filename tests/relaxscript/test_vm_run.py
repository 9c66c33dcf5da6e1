"""VM results equal the reference interpreter's, for both targets and many symbolic sizes."""
import functools
import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.vm.instrument import CheckAgainstInterpreter, PrintValues
from tests.relaxscript import vm_modules as M
from tests.relaxscript.test_interpreter import countdown_module
from tests.targets import VM_TARGETS

TARGETS = VM_TARGETS


@functools.lru_cache(maxsize=None)
def built(name: str, target: str):
    mod = M.parse(M.MODULES[name])
    return mod, rx.VirtualMachine(rx.build(mod, target=target))


def assert_same(actual, expected):
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            assert_same(a, e)
        return
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray)
        assert actual.shape == expected.shape and actual.dtype == expected.dtype
        np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5)
        return
    assert actual == expected


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name", sorted(M.MODULES))
@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 7), m=st.integers(1, 6), seed=st.integers(0, 2**16))
def test_vm_matches_interpreter(name, target, n, m, seed):
    mod, vm = built(name, target)
    args = M.inputs_for(name, np.random.default_rng(seed), n, m)
    assert_same(vm["main"](*args), rx.interpret(mod, "main", *args))


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("times", [0, 1, 3])
def test_recursive_subgraph_call_through_if(target, times):
    mod = countdown_module()
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    x = np.arange(5, dtype="float32")
    np.testing.assert_array_equal(vm["main"](x, times), x * 2 ** times)


@pytest.mark.parametrize("target", TARGETS)
def test_call_tir_only_module_without_passes(target):
    mod = M.parse(M.SUBGRAPH)
    hand = rx.IRModule({"exp": mod["exp"], "main": M.parse(M.SUBGRAPH)["main"]}).with_function(
        "flat", mod["flat"])
    vm = rx.VirtualMachine(rx.build(hand, target=target, pipeline=[]))
    x = np.random.default_rng(1).standard_normal((3, 4)).astype("float32")
    assert_same(vm["main"](x), rx.interpret(hand, "main", x))


def test_results_never_alias_reused_storage():
    mod, vm = built("SUBGRAPH", "c")
    first_in = np.ones((2, 4), "float32")
    first = vm["main"](first_in)
    kept = first.copy()
    vm["main"](np.full((2, 4), -3.0, "float32"))   # same sizes: storages are reused
    np.testing.assert_array_equal(first, kept)


def test_one_build_serves_every_size():
    mod, vm = built("ELEMENTWISE", "c")
    rng = np.random.default_rng(2)
    for n, m in [(1, 1), (9, 3), (2, 17), (0, 4)]:
        args = M.inputs_for("ELEMENTWISE", rng, n, m)
        assert_same(vm["main"](*args), rx.interpret(mod, "main", *args))


def test_print_values_instrument_reports_each_value():
    mod, vm = built("MLP", "c")
    out = io.StringIO()
    vm.set_instrument(PrintValues(out))
    try:
        vm["main"](*M.inputs_for("MLP", np.random.default_rng(0), 2, 0))
    finally:
        vm.set_instrument(None)
    lines = out.getvalue().splitlines()
    assert lines and all(line.startswith("[main:") for line in lines)
    assert any("tensor(2, 4) float32" in line for line in lines)


@pytest.mark.parametrize("target", TARGETS)
def test_check_against_interpreter_compares_intermediates(target):
    mod = M.parse(M.SUBGRAPH)
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    check = CheckAgainstInterpreter(mod)
    check.run(vm, "main", np.random.default_rng(3).standard_normal((3, 4)).astype("float32"))
    assert check.compared > 0


def test_check_against_interpreter_detects_a_wrong_value():
    mod = M.parse(M.SUBGRAPH)
    vm = rx.VirtualMachine(rx.build(mod, target="c", pipeline=[]))
    check = CheckAgainstInterpreter(mod)
    check.expected[("main", "lv0")] = [np.zeros((3, 4), "float32")]
    vm.set_instrument(check)
    with pytest.raises(AssertionError, match="lv0"):
        vm["main"](np.ones((3, 4), "float32"))
