"""Instruments for ``vm.set_instrument``: print or check every intermediate value.

An instrument is called as ``fn(func_name, instr_index, name, value)`` after
each instruction that produces a value. On a device target (OpenCL, CUDA) a
tensor value is the device array the VM holds; these instruments copy it
out (``host_value``) to print or compare it.
"""
from __future__ import annotations

import sys

import numpy as np


def host_value(value):
    """``value`` with device arrays (anything with ``.numpy()``) copied to NumPy."""
    if type(value) is tuple:
        return tuple(host_value(v) for v in value)
    if not isinstance(value, np.ndarray) and callable(getattr(value, "numpy", None)):
        return value.numpy()
    return value


def _summary(value) -> str:
    value = host_value(value)
    if isinstance(value, np.ndarray):
        if value.size and value.dtype.kind in "biuf":
            return (f"tensor{tuple(value.shape)} {value.dtype.name} "
                    f"min={value.min()!r} max={value.max()!r}")
        return f"tensor{tuple(value.shape)} {value.dtype.name}"
    if isinstance(value, tuple):
        return "(" + ", ".join(_summary(v) for v in value) + ")"
    return repr(value)


class PrintValues:
    """Print one line per produced value (``file`` defaults to stdout)."""

    def __init__(self, file=None):
        self.file = file

    def __call__(self, func_name: str, index: int, name: str, value) -> None:
        print(f"[{func_name}:{index}] {name or '_'} = {_summary(value)}", file=self.file or sys.stdout)


class CheckAgainstInterpreter:
    """Compare the VM's intermediate values with the reference interpreter's.

    ``check.run(vm, "main", *args)`` first runs ``rx.interpret(mod, ...)``
    recording every binding's value by (function, variable name), then runs
    the VM with this instrument: a VM value whose (function, name) the
    interpreter also produced, with the same shape and dtype, must match
    (``rtol``/``atol``); a mismatch raises ``AssertionError`` naming the
    instruction. Passes rename and rewrite variables, so values without a
    counterpart are skipped; ``compared`` counts the ones checked. The final
    results are always compared.
    """

    def __init__(self, mod, rtol: float = 1e-4, atol: float = 1e-5):
        self.mod = mod
        self.rtol, self.atol = rtol, atol
        self.expected: dict = {}
        self.compared = 0

    def _record(self, func_name, var, value) -> None:
        self.expected.setdefault((func_name, var.name_hint), []).append(value)

    def __call__(self, func_name: str, index: int, name: str, value) -> None:
        candidates = self.expected.get((func_name, name))
        if not candidates:
            return
        value = host_value(value)
        if not isinstance(value, np.ndarray):
            return
        for ref in candidates:
            if isinstance(ref, np.ndarray) and ref.shape == value.shape and ref.dtype == value.dtype:
                if not np.allclose(value, ref, rtol=self.rtol, atol=self.atol, equal_nan=True):
                    raise AssertionError(f"VM value '{name}' of function '{func_name}' (instruction "
                                         f"{index}) differs from the interpreter: max abs error "
                                         f"{np.max(np.abs(value.astype(float) - ref.astype(float)))}")
                self.compared += 1
                return

    def run(self, vm, func_name: str, *args):
        from ..interpreter import interpret
        self.expected.clear()
        reference = interpret(self.mod, func_name, *args, instrument=self._record)
        previous = vm.instrument
        vm.set_instrument(self)
        try:
            result = vm[func_name](*args)
        finally:
            vm.set_instrument(previous)
        _assert_same(result, reference, self.rtol, self.atol)
        return result


def _assert_same(actual, expected, rtol, atol, path="result") -> None:
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected), \
            f"{path}: expected a tuple of {len(expected)}, got {type(actual).__name__}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            _assert_same(a, e, rtol, atol, f"{path}[{i}]")
        return
    if isinstance(expected, np.ndarray):
        assert isinstance(actual, np.ndarray) and actual.shape == expected.shape and \
            actual.dtype == expected.dtype, f"{path}: expected {expected.shape} {expected.dtype}, got {actual!r}"
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=path)
        return
    assert actual == expected, f"{path}: expected {expected!r}, got {actual!r}"
