"""Which arguments a cross-level call writes, and so which parameters must be writeable arrays.

A kernel writes into whatever buffer it is given: a read-only NumPy array (the immutable
``bytes`` under ``np.frombuffer``, a read-only memory map) passed as a parameter a call updates
was written (or crashed the process). The VM and the reference interpreter refuse such an
argument before any kernel runs; these functions say which parameters that applies to:

- ``call_tir_inplace``: the arguments at ``inplace_indices``;
- ``call_tir_dps``: the arguments whose buffer the prim_func may write (``prim_func_writes``);
- ``call_dps_library_dps``: its outputs tuple.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.buffer import Buffer
from tensorir.function import PrimFunc
from tensorir.functor import collect
from tensorir.stmt import Block, BufferStore

from .. import expr as rx


def _storage(buffer: Buffer):
    return getattr(buffer, "storage", buffer)


def prim_func_writes(func: PrimFunc) -> list[int]:
    """Positions (among the buffer parameters) of the buffers ``func`` may write: stored into,
    named in a block's writes, the source of a ``match_buffer``, or handed to an extern call
    (its address or the buffer itself), where what happens is not known. Views count as the
    buffer they view."""
    written: set[int] = set()

    def mark(buffer) -> None:
        written.add(id(_storage(buffer)))

    for node in collect(func.body, lambda n: isinstance(n, (BufferStore, Block, E.Call))):
        if isinstance(node, BufferStore):
            mark(node.buffer)
        elif isinstance(node, Block):
            for region in node.writes:
                mark(region.buffer)
            for match in node.match_buffers:
                mark(match.source.buffer)
        elif node.op not in E.INTRINSICS and node.op != E.CHECKED_INDEX:
            # an extern call or an address: may write anything it sees
            for seen in collect(node, lambda n: isinstance(n, (E.BufferLoad, Buffer))):
                mark(seen.buffer if isinstance(seen, E.BufferLoad) else seen)
    buffers = [p for p in func.params if isinstance(p, Buffer)]
    return [i for i, b in enumerate(buffers) if id(_storage(b)) in written or id(b) in written]


def written_arguments(call: rx.Call, mod) -> list:
    """The argument expressions ``call`` (a cross-level call) writes; [] for any other call."""
    name = getattr(call.op, "name", None)
    if name == "relax.call_tir_inplace":
        fields = _fields(call.args[1])
        return [fields[i] for i in call.attrs["inplace_indices"]]
    if name == "relax.call_tir_dps":
        fields = _fields(call.args[1])
        callee = call.args[0]
        func = mod[callee.name_hint] if isinstance(callee, rx.GlobalVar) and callee.name_hint in mod else None
        if not isinstance(func, PrimFunc):
            return list(fields)     # not known: every argument may be written
        return [fields[i] for i in prim_func_writes(func) if i < len(fields)]
    if name == "relax.call_dps_library_dps":
        return list(_fields(call.args[2]))
    return []


def written_parameters(func: rx.Function, mod) -> list[int]:
    """Indices of ``func``'s parameters that a cross-level call in its body writes (directly or
    through vars bound to them)."""
    return sorted(written_parameter_vars(func, mod))


def written_parameter_vars(func: rx.Function, mod) -> dict[int, list]:
    """Parameter index -> the vars the calls write it through (the parameter itself, or a var
    bound to it: ``o = out``, ``o = R.match_cast(out, ...)``)."""
    params = {id(p): i for i, p in enumerate(func.params)}
    source = {id(b.var): b.value for b in collect(func.body, lambda n: isinstance(n, (rx.VarBinding, rx.MatchCast)))
              if isinstance(b.value, rx.Var)}
    found: dict[int, list] = {}
    for call in collect(func.body, lambda n: isinstance(n, rx.Call)):
        for written in written_arguments(call, mod):
            arg, seen = written, set()
            while id(arg) in source and id(arg) not in seen:
                seen.add(id(arg))
                arg = source[id(arg)]
            if id(arg) in params and isinstance(written, rx.Var):
                vars_ = found.setdefault(params[id(arg)], [])
                if all(v is not written for v in vars_):
                    vars_.append(written)
    return found


_ALLOCATIONS = ("relax.builtin.alloc_tensor", "relax.memory.alloc_tensor")


def packed_call_outputs(func: rx.Function) -> dict[int, frozenset]:
    """``id(call)`` of each ``R.call_packed`` (a call of an ``ExternFunc``) in ``func`` -> the
    positions among its arguments that are fresh allocations (a var bound to
    ``R.builtin.alloc_tensor`` / ``R.memory.alloc_tensor``): TVM's lowered DPS form writes them,
    and they are the same fresh buffer on every level. Its other tensor arguments, and every
    argument of a pure packed call, are handed read-only (``backends.library.read_only``)."""
    allocated = {id(b.var) for b in collect(func.body, lambda n: isinstance(n, rx.VarBinding))
                 if isinstance(b.value, rx.Call) and getattr(b.value.op, "name", None) in _ALLOCATIONS}
    return {id(call): frozenset(i for i, a in enumerate(call.args) if id(a) in allocated)
            for call in collect(func.body, lambda n: isinstance(n, rx.Call) and isinstance(n.op, rx.ExternFunc))}


def _fields(expr) -> tuple:
    return tuple(expr.fields) if isinstance(expr, rx.Tuple) else (expr,)


__all__ = ["packed_call_outputs", "prim_func_writes", "written_arguments", "written_parameter_vars",
           "written_parameters"]
