"""An independent checker of memory plans, and tests that it catches bad plans.

``check_no_overlap(mod, bindings)`` evaluates, for given values of the
symbolic variables, the byte range of every ``R.memory.alloc_tensor`` in its
storage and the binding interval over which the tensor is live (from its
allocation to the last binding that mentions it or any value derived from
it; tuple fields are followed one by one). Two tensors in the same storage whose intervals intersect must have
disjoint byte ranges. It shares no code with the planner's liveness.
"""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from relaxscript.expr import Call, If, Op, Tuple, TupleGetItem, Var, VarBinding
from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.arith import evaluate
from tensorir.functor import collect


def _mentions(node) -> set:
    return {v for v in collect(node, lambda n: isinstance(n, Var))}


def _scope_overlaps(bindings, body, values) -> list[str]:
    """Problems in one scope (a function body or an If branch), recursing into branches."""
    problems = []
    derived: dict = {}   # var -> alloc_tensor vars it may reach
    placed = {}          # alloc_tensor var -> (storage var, start byte, end byte, def index)
    last = {}
    fields = {}          # var bound to a tuple -> what each field may reach
    for index, binding in enumerate(bindings):
        value = binding.value
        if isinstance(value, If):
            for branch in (value.true_branch, value.false_branch):
                inner = [b for block in branch.blocks for b in block.bindings]
                problems += _scope_overlaps(inner, branch.body, values)
        reached = set()
        for var in _mentions(value):
            reached |= derived.get(var, set())
        for tensor in reached:
            last[tensor] = index
        name = value.op.name if isinstance(value, Call) and isinstance(value.op, Op) else None
        if name == "relax.memory.alloc_tensor":
            storage, offset, shape = value.args
            itemsize = np.dtype(dt.to_numpy(value.attrs["dtype"])).itemsize
            start = int(evaluate(offset.value, values))
            nbytes = int(np.prod([int(evaluate(d, values)) for d in shape.values])) * itemsize
            placed[binding.var] = (storage, start, start + nbytes, index)
            derived[binding.var] = {binding.var}
            last[binding.var] = index
        elif isinstance(value, Tuple):
            fields[binding.var] = [set().union(*(derived.get(v, set()) for v in _mentions(f)))
                                   for f in value.fields]
            derived[binding.var] = reached
        elif isinstance(value, TupleGetItem) and value.tuple_value in fields:
            derived[binding.var] = fields[value.tuple_value][value.index]
        elif name not in ("relax.call_tir_dps", "relax.call_dps_library_dps", "relax.memory.kill_storage"):
            derived[binding.var] = reached
    for var in _mentions(body):
        for tensor in derived.get(var, set()):
            last[tensor] = len(bindings)
    items = list(placed.items())
    for i, (a, (sa, a0, a1, da)) in enumerate(items):
        for b, (sb, b0, b1, db) in items[i + 1:]:
            live_together = da <= last[b] and db <= last[a]
            if sa is sb and live_together and a0 < b1 and b0 < a1 and a1 > a0 and b1 > b0:
                problems.append(f"'{a.name_hint}' [{a0}, {a1}) and '{b.name_hint}' [{b0}, {b1}) "
                                f"share bytes of '{sa.name_hint}' while both live")
    return problems


def check_no_overlap(mod, bindings: dict) -> None:
    """Raise AssertionError when two simultaneously live tensors share bytes.
    ``bindings`` maps symbolic variable names to ints."""
    for name, func in mod.relax_functions.items():
        values = {v: bindings[v.name] for v in collect(func, lambda n: isinstance(n, E.Var))
                  if v.name in bindings}
        flat = [b for block in func.body.blocks for b in block.bindings if isinstance(b, VarBinding)]
        problems = _scope_overlaps(flat, func.body.body, values)
        assert not problems, f"function '{name}': " + "; ".join(problems)


BAD_PLAN = '''
@R.ir_module
class Module:
    @T.prim_func
    def double(x: T.Buffer(("n",), "float32"), y: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in range(n):
            with T.block("d"):
                vi = T.axis.spatial(n, i)
                y[vi] = x[vi] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        s: R.Object = R.memory.alloc_storage(R.shape([n * 4]), dtype="uint8")
        a: R.Tensor((n,), "float32") = R.memory.alloc_tensor(s, R.prim_value(0), R.shape([n]), dtype="float32")
        _: R.Tuple() = R.call_tir_dps(cls.double, (x, a))
        b: R.Tensor((n,), "float32") = R.memory.alloc_tensor(s, R.prim_value(OFFSET), R.shape([n]), dtype="float32")
        _1: R.Tuple() = R.call_tir_dps(cls.double, (a, b))
        c: R.Tensor((n,), "float32") = R.builtin.alloc_tensor(R.shape([n]), dtype="float32")
        _2: R.Tuple() = R.call_tir_dps(cls.double, (b, c))
        return c
'''


def test_checker_rejects_overlapping_live_tensors_and_interpreter_shows_clobbering():
    mod = rx.from_source(BAD_PLAN.replace("OFFSET", "0"))
    with pytest.raises(AssertionError, match="share bytes"):
        check_no_overlap(mod, {"n": 3})
    x = np.arange(3, dtype="float32")
    # b overwrites a's bytes while a is read: real aliasing gives a wrong answer (NaN-filled view).
    assert not np.allclose(rx.interpret(mod, "main", x), 8 * x)


def test_checker_accepts_disjoint_ranges_in_one_storage():
    mod = rx.from_source(BAD_PLAN.replace("n * 4", "n * 8").replace("OFFSET", "n * 4"))
    check_no_overlap(mod, {"n": 3})
    x = np.arange(3, dtype="float32")
    np.testing.assert_allclose(rx.interpret(mod, "main", x), 8 * x)


def test_storage_too_small_for_a_view_is_a_clear_error():
    mod = rx.from_source(BAD_PLAN.replace("OFFSET", "n * 4"))
    with pytest.raises(ValueError, match="does not fit in a storage"):
        rx.interpret(mod, "main", np.ones(3, "float32"))
