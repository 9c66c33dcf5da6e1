"""Reuse of legalizations within one LegalizeOps run: a model's 30 layers make the same calls.

A legalization is a function of what it can see of the call: the op, its attributes, the
annotations of its arguments and result (with the facts of their symbolic variables), the
kinds of the argument expressions and which of them are the same value. Two calls equal in
all of that up to a renaming of the caller's symbolic variables get structurally equal
prim_funcs, which ``LegalizeContext.add_prim_func`` already shares; the cache skips building
them again. ``CallSignature`` is that key; a call it cannot describe (a tuple, a constant or
anything else as an argument, an attribute value of an unknown kind) is never cached.

Only a legalization whose whole effect was one ``TECall.emit`` returning a ``call_tir`` of
the call's own arguments is replayed: on a hit the same prim_func is called with the new
call's arguments, and the caller's symbolic vars passed through ``tir_vars`` are mapped
position by position. Anything else (helper bindings, several prim_funcs, a result that is
not the emitted call) is recorded as not replayable and runs every time.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir import expr as E
from tensorir.node import Node

from ...expr import Call, DataflowVar, PrimValue, ShapeExpr, Var
from ...struct_info import StructInfo


class _Uncacheable(Exception):
    """The call holds something the signature does not describe."""


class CallSignature:
    """The cache key of a call and its symbolic vars in order of first appearance."""

    def __init__(self, legalize, call: Call):
        self.vars: list[E.Var] = []
        self._index: dict[E.Var, int] = {}
        first_position: dict[int, int] = {}
        args = []
        for position, arg in enumerate(call.args):
            same_as = first_position.setdefault(id(arg), position)
            args.append((self._arg(arg), same_as))
        self.key = (legalize, call.op.name, self._value(call.attrs), tuple(args),
                    self._value(call.struct_info), self._value(call.sinfo_args))

    def _arg(self, arg) -> tuple:
        if type(arg) in (Var, DataflowVar):
            return (type(arg).__name__, self._value(arg.struct_info))
        if type(arg) is ShapeExpr:
            return ("ShapeExpr", self._value(arg.values), self._value(arg.struct_info))
        if type(arg) is PrimValue:
            return ("PrimValue", self._value(arg.value), self._value(arg.struct_info))
        raise _Uncacheable(type(arg).__name__)

    def _value(self, value):
        if value is None or type(value) in (bool, int, str):
            return (type(value).__name__, value)
        if type(value) is float:   # repr tells 0.0 from -0.0 (equal as floats) and keeps NaN equal
            return ("float", repr(value))
        if isinstance(value, E.Var):
            index = self._index.get(value)
            if index is None:
                index = self._index[value] = len(self.vars)
                self.vars.append(value)
            return ("symbolic", index, value.dtype, value.lower, value.upper, value.multiple_of)
        if isinstance(value, (tuple, list)):
            return (type(value).__name__, tuple(self._value(v) for v in value))
        if isinstance(value, dict):
            if not all(type(k) is str for k in value):
                raise _Uncacheable("attribute keys")
            return ("dict", tuple((k, self._value(value[k])) for k in sorted(value)))
        if isinstance(value, (StructInfo, E.PrimExpr)) and not isinstance(value, E.BufferLoad):
            return self._node(value)
        raise _Uncacheable(type(value).__name__)

    def _node(self, node: Node) -> tuple:
        attrs = tuple(self._value(getattr(node, a)) for a in node._attrs)
        fields = tuple(self._value(getattr(node, f)) for f in node._fields)
        extra = (node.dtype,) if isinstance(node, E.PrimExpr) else ()
        return (type(node).__name__, extra, attrs, fields)


def call_signature(legalize, call: Call) -> CallSignature | None:
    """The signature of ``call`` under ``legalize``, or None when it cannot be cached."""
    try:
        return CallSignature(legalize, call)
    except _Uncacheable:
        return None


@dataclass
class _Replay:
    """What to rebuild on a hit: the emitted call's callee, argument positions, tir_vars."""
    gvar: object
    arg_positions: tuple[int, ...]
    tir_var_indices: tuple[int, ...] | None
    make_call: object   # the op constructor TECall.emit used (call_tir)


@dataclass
class CacheStats:
    hits: int = 0
    misses: int = 0
    uncacheable: int = 0


class LegalizationCache:
    """Signature -> replay recipe (or None: that legalization is run every time)."""

    def __init__(self):
        self._entries: dict = {}
        self.stats = CacheStats()

    def lookup(self, signature: CallSignature | None, call: Call):
        """The legalized call for ``call`` from an earlier equal one, or None."""
        if signature is None:
            self.stats.uncacheable += 1
            return None
        replay = self._entries.get(signature.key)
        if replay is None:
            self.stats.misses += 1
            return None
        self.stats.hits += 1
        args = [call.args[p] for p in replay.arg_positions]
        tir_vars = None if replay.tir_var_indices is None else \
            [signature.vars[i] for i in replay.tir_var_indices]
        return replay.make_call(replay.gvar, args, call.struct_info, tir_vars=tir_vars)

    def remember(self, signature: CallSignature, call: Call, result, emits: list,
                 module_before, module_after, bindings_unchanged: bool) -> None:
        """Record how ``call`` was legalized when it can be replayed (see the module doc)."""
        replay = _replay_of(signature, call, result, emits, module_before, module_after) \
            if bindings_unchanged else None
        if replay is not None:
            self._entries[signature.key] = replay

    def __len__(self) -> int:
        return len(self._entries)


def _replay_of(signature, call, result, emits, module_before, module_after) -> _Replay | None:
    if len(emits) != 1:
        return None
    emit = emits[0]
    if result is not emit.result or not _only_added(module_before, module_after, emit.gvar.name_hint):
        return None
    positions = {id(arg): p for p, arg in reversed(list(enumerate(call.args)))}
    if not all(id(arg) in positions for arg in emit.args):
        return None
    tir_var_indices = None
    if emit.tir_vars is not None:
        index = {id(v): i for i, v in enumerate(signature.vars)}
        if not all(id(v) in index for v in emit.tir_vars):
            return None
        tir_var_indices = tuple(index[id(v)] for v in emit.tir_vars)
    return _Replay(emit.gvar, tuple(positions[id(arg)] for arg in emit.args), tir_var_indices,
                   emit.make_call)


def _only_added(before, after, name: str) -> bool:
    """``after`` is ``before`` plus at most the function ``name`` (no binding emitted elsewhere)."""
    if after is before:
        return True
    added = set(after.functions) - set(before.functions)
    return added <= {name} and all(after.functions.get(n) is f for n, f in before.functions.items())
