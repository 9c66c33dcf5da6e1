"""Checks shared by the TVMScript-compatibility tests: a module written as TVM's docs and
printer write it parses, round-trips, and runs alike in the interpreter and both VMs."""
from __future__ import annotations

import numpy as np

import relaxscript as rx
from tests.targets import AVAILABLE_VM_TARGETS

TARGETS = AVAILABLE_VM_TARGETS


def module_of(source: str) -> rx.IRModule:
    parsed = rx.from_source(source)
    return parsed if isinstance(parsed, rx.IRModule) else rx.IRModule({"main": parsed})


def assert_round_trip(mod: rx.IRModule) -> str:
    """print -> parse is structurally equal, and printing is a fixpoint."""
    text = mod.script()
    again = module_of(text)
    rx.assert_structural_equal(again, mod)
    assert again.script() == text
    return text


def _same(got, expected, tol=1e-6):
    if isinstance(expected, tuple):
        assert isinstance(got, tuple) and len(got) == len(expected)
        for g, e in zip(got, expected):
            _same(g, e, tol)
    elif isinstance(expected, np.ndarray):
        got = np.asarray(got)
        assert got.shape == expected.shape and got.dtype == expected.dtype, (got, expected)
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol)
    else:
        assert type(got) is type(expected) and got == expected, (got, expected)


def assert_runs_alike(mod: rx.IRModule, *args, expected=None, targets=TARGETS, tol=1e-6):
    """The interpreter's result equals ``expected`` (when given) and every target's build.

    ``tol`` (relative and absolute) allows for another summation order in long float
    reductions (convolutions, attention)."""
    result = rx.interpret(mod, "main", *args)
    if expected is not None:
        _same(result, expected, tol)
    for target in targets:
        vm = rx.VirtualMachine(rx.build(mod, target=target))
        _same(vm["main"](*args), result, tol)
    return result
