"""Error types shared by both IR levels."""
from __future__ import annotations


class ParseError(SyntaxError):
    """A problem in a script, located in the user's own source.

    ``str(err)`` reads like a compiler diagnostic::

        model.py:12:8: in function 'main', parameter 'x': unknown dtype 'f33'
            x: R.Tensor((n, 4), "f33")
                                ^
    """

    def __init__(self, message: str, filename: str | None = None, lineno: int | None = None,
                 col: int | None = None, source_line: str | None = None, context: str | None = None):
        self.message = message
        self.context = context
        super().__init__(message, (filename or "<string>", lineno or 0, (col or 0) + 1, source_line or ""))
        self.col = col

    def __str__(self) -> str:
        where = f"{self.filename}:{self.lineno}:{(self.col or 0) + 1}"
        head = f"{where}: {self.context + ': ' if self.context else ''}{self.message}"
        if self.text:
            line = self.text.rstrip("\n")
            stripped = line.lstrip()
            caret = " " * max(0, (self.col or 0) - (len(line) - len(stripped)))
            return f"{head}\n    {stripped}\n    {caret}^"
        return head


class IRError(ValueError):
    """An ill-formed IR construct found while building or checking IR."""


class ScheduleError(ValueError):
    """A schedule primitive's precondition does not hold; the function is unchanged."""


class KernelDivisionByZeroError(ZeroDivisionError):
    """A compiled kernel divided an integer by zero (C would trap with SIGFPE; the kernel
    stops the division, finishes with 0 in its place and reports it instead)."""


class NegativeIntegerPowerError(ValueError):
    """An integer raised to a negative integer power (``T.int_pow``, R.power on integers): NumPy
    refuses it with a ValueError; the interpreter raises this, compiled kernels report it (the
    element finishes as 0)."""


class KernelAssertionError(AssertionError):
    """A TIR ``assert condition, "message"`` (``AssertStmt``) failed at run time; every target
    raises it with the assert's message (the compiled kernels through their status word)."""


class ShapeMismatchError(ValueError):
    """A runtime argument or check does not match its declared annotation."""


class ShapeDivisionByZeroError(ShapeMismatchError, ZeroDivisionError):
    """A run-time shape or symbolic value divides by zero (``n * 4 // k`` with ``k = 0``, e.g. the
    inferred ``-1`` of ``R.reshape(x, (k, -1))``). Also a ``ZeroDivisionError``, as Python raises."""


class IndexOutOfRangeError(ShapeMismatchError, IndexError):
    """An index read from data (take's, a gather's or a scatter's index tensor) lies outside the
    axis it indexes. Every target raises it: the interpreters, and the compiled kernels through
    their status word (``T.checked_index``). Also an ``IndexError``, as NumPy raises."""


class AllocationError(ShapeMismatchError, MemoryError):
    """A tensor whose run-time shape cannot be allocated: a negative dimension, or more bytes
    than the machine can give. Also a ``MemoryError``, so code catching that still does."""
