"""Calls with some arguments fixed once: ``vm.bind(name, {index: value})``.

An LLM step passes hundreds of weight arrays that never change, and the
entry check (kind, rank, dtype, contiguity and every dim of each) cost more
per decode step than most kernels. ``bind`` checks the fixed arguments once
and each call checks only the rest. That is sound only if a checked value
cannot change what was checked, so a fixed argument is held as a value
nobody else can reach: an exact ``ndarray`` as a private view (the caller
can still write its elements, which no check reads, but cannot reassign the
view's ``shape`` or ``dtype``), a shape or a scalar as the immutable value
itself. Any other value (a device array, a tuple of arrays) is still fixed
but keeps its checks on every call.

The entry ``MatchValues`` is split by its check data (``sym_code``): a
check moves to bind time when every temporary it reads comes from fixed
registers and it reads no symbol slot (a dim compared with a var that another
argument defines stays per call, as does every ``store`` of a var's value and
the loads that feed it). Both halves are rendered by ``render_checks``, so the
messages and the order of the checks that remain are unchanged.
"""
from __future__ import annotations

import copy
import ctypes

import numpy as np

from ..interpreter.values import ShapeTuple
from . import instructions as I
from .sym_code import render_checks
from .sym_table import RUNTIME_NAMES
from .values import make_match_namespace

_FROZEN_SCALARS = (ShapeTuple, int, float, bool)


def _refs(tree, kind: str, out: set) -> set:
    """Indices of ``(kind, k)`` leaves (``"v"`` temporaries or ``"t"`` slots) in an expression."""
    if isinstance(tree, tuple) and tree and isinstance(tree[0], str):
        if tree[0] == kind and len(tree) == 2 and type(tree[1]) is int:
            out.add(tree[1])
        else:
            for part in tree[1:]:
                _refs(part, kind, out)
    return out


def _uses(op: tuple) -> tuple[set, set]:
    """(temporaries read, symbol slots read) by one check operation."""
    kind = op[0]
    exprs = {"let": op[2:3], "store": op[2:3], "fail_if": (op[1],) + tuple(op[3:])}.get(kind, ())
    temps, slots = set(), set()
    for e in exprs:
        _refs(e, "v", temps)
        _refs(e, "t", slots)
    if kind not in ("load", "let", "store", "fail_if"):
        temps.add(op[1])   # the structural checks read (and may convert) their value
    return temps, slots


def split_checks(checks, fixed_regs: frozenset) -> tuple[list, list]:
    """``(once, per_call)``: the checks of values from ``fixed_regs`` that need nothing else,
    and the rest with the loads and lets they read."""
    fixed_temps: set = set()
    movable = []
    for op in checks:
        kind = op[0]
        temps, slots = _uses(op)
        if kind == "load":
            ok = op[2] in fixed_regs
        elif kind == "store":
            ok = False
        else:
            ok = not slots and temps <= fixed_temps
        if ok and kind in ("load", "let"):
            fixed_temps.add(op[1])
        movable.append(ok)
    # a moved load or let that a per-call check reads runs per call too (it only reads registers)
    needed: set = set()
    keep = [not ok for ok in movable]
    for i in range(len(checks) - 1, -1, -1):
        op = checks[i]
        if not keep[i] and op[0] in ("load", "let") and op[1] in needed:
            keep[i] = True
        if keep[i]:
            needed |= _uses(op)[0]
    once = [op for op, ok in zip(checks, movable) if ok]
    per_call = [op for op, k in zip(checks, keep) if k]
    return once, per_call


def _compile(ins: I.MatchValues, checks, derived, name: str, device_array_type):
    namespace = {**RUNTIME_NAMES, **make_match_namespace(ins.messages, ins.dtypes, device_array_type)}
    copy = (ins.dst, ins.src) if ins.dst is not None else None
    exec(compile(render_checks(checks, derived, copy), name, "exec"), namespace)  # noqa: S102
    return namespace["_match"]


def _private(value):
    """A value equal to ``value`` that no one else can change the checked properties of, or None."""
    if type(value) is np.ndarray:
        return value.view()
    if type(value) in _FROZEN_SCALARS:
        return value
    return None


class BoundFunction:
    """``f(*rest)``: the function called with the fixed arguments in their places."""

    def __init__(self, runtime, fixed: dict):
        func = runtime.func
        n = runtime.num_params
        for index in fixed:
            if type(index) is not int or not 0 <= index < n:
                raise IndexError(f"function '{func.name}' takes {n} argument(s); cannot fix argument "
                                 f"{index!r}")
        self.runtime = runtime
        self.free = [i for i in range(n) if i not in fixed]
        entry = func.code[0] if func.code and isinstance(func.code[0], I.MatchValues) else None
        values = {i: _private(v) for i, v in fixed.items()}
        frozen = frozenset(i for i, v in values.items() if v is not None)
        self.args = [None] * n
        for i, v in fixed.items():
            self.args[i] = v if values[i] is None else values[i]
        code = copy.copy(runtime.code)     # shares the compiled expressions; own matcher table
        code.matchers = dict(code.matchers)
        if entry is not None and frozen:
            once, per_call = split_checks(entry.checks, frozen)
            label = f"<vm {func.name} bound check>"
            check = _compile(entry, once, (), label, runtime.code.device_array_type)
            regs = list(self.args)
            check(regs, (ctypes.c_int64 * max(1, func.table_size))())   # raises on a bad fixed value
            for i in frozen:
                self.args[i] = regs[i]    # lists were converted by the check
            code.matchers[0] = _compile(entry, per_call, entry.derived, f"<vm {func.name} check 0>",
                                        runtime.code.device_array_type)
        # the same objects on every call: kernel runs resolve their pointers once (linker)
        code.fixed_args = {i: self.args[i] for i in frozen}
        self.code = code
        self.pool: list = []
        self.__name__ = func.name

    def __call__(self, *rest):
        free = self.free
        if len(rest) != len(free):
            func = self.runtime.func
            names = ", ".join(func.params[i] for i in free)
            raise TypeError(f"function '{func.name}' with fixed arguments takes {len(free)} "
                            f"argument(s) ({names}), got {len(rest)}")
        args = self.args[:]
        for i, v in zip(free, rest):
            args[i] = v
        return self.runtime.run(args, self.code, self.pool)
