"""Errors raised while interpreting a PrimFunc (all ValueError subclasses)."""
from __future__ import annotations


class InterpretError(ValueError):
    """The program did something with no defined meaning at run time
    (integer division by zero, an unbound variable, an iter var bound outside
    its domain, an unsupported construct)."""


class InterpretDivisionByZeroError(InterpretError, ZeroDivisionError):
    """An integer division or modulo by zero (also a ZeroDivisionError, as the compiled
    kernels' ``KernelDivisionByZeroError``)."""


class OutOfBoundsError(InterpretError):
    """A buffer access outside the buffer's shape (never wrapped like NumPy's negative indices)."""
