"""Preconditions of the loop primitives that TVM also enforces:

- split and fuse refuse a loop that is already bound to a thread axis or carries
  annotations (split it before binding; the new loops would silently lose the binding);
- parallel, vectorize and bind need every block under the loop to bind its iter vars
  quasi-affinely in the loops (sums of loop vars times loop-invariant factors, and ``//`` /
  ``%`` by loop-invariant divisors, as split and fuse of symbolic extents make), which is
  what proves distinct iterations write distinct elements (``i * j`` or ``i // j`` is not);
- vectorize refuses an opaque block (no iter vars, so no binding says what each lane writes);
- reorder refuses a block predicate that relates the loops other than as a bound of an
  affine index by a loop-invariant value (``i_0 * 4 + i_1 < n`` after split is fine,
  ``i < j`` is not): TVM requires the bindings under reordered loops to be affine under
  the predicate.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..expr import GE, GT, LE, LT, Add, And, Cast, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, Var
from ..stmt import BlockRealize, For, is_true
from .checks import var_ids


def require_unbound_unannotated(loop: For, where: str) -> None:
    if loop.kind == "thread_binding":
        raise ScheduleError(f"{where}: loop {loop.loop_var.name!r} is bound to {loop.thread_tag}; "
                            "split or fuse loops before binding them")
    if loop.annotations:
        raise ScheduleError(f"{where}: loop {loop.loop_var.name!r} has annotations "
                            f"{sorted(loop.annotations)}; remove them (unannotate) first")


def is_quasi_affine(expr: PrimExpr, loop_ids: set[int]) -> bool:
    """``expr`` is a sum of loop vars times loop-invariant factors, with ``//``/``%`` by
    loop-invariant divisors; parts without loop vars may be anything."""
    if not var_ids(expr) & loop_ids:
        return True
    if isinstance(expr, Var):
        return True
    if isinstance(expr, (Add, Sub)):
        return is_quasi_affine(expr.a, loop_ids) and is_quasi_affine(expr.b, loop_ids)
    if isinstance(expr, Mul):
        a_free, b_free = not var_ids(expr.a) & loop_ids, not var_ids(expr.b) & loop_ids
        return (a_free and is_quasi_affine(expr.b, loop_ids)) or \
            (b_free and is_quasi_affine(expr.a, loop_ids))
    if isinstance(expr, (FloorDiv, FloorMod)):
        divisor_ok = not var_ids(expr.b) & loop_ids and \
            not (isinstance(expr.b, IntImm) and expr.b.value <= 0)
        return divisor_ok and is_quasi_affine(expr.a, loop_ids)
    if isinstance(expr, Cast):
        return is_quasi_affine(expr.value, loop_ids)
    return False


def require_quasi_affine(realizes: list[BlockRealize], loop_ids: set[int], where: str) -> None:
    for realize in realizes:
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if not is_quasi_affine(value, loop_ids):
                raise ScheduleError(f"{where}: block {realize.block.name!r} binds iter var "
                                    f"{iv.var.name!r} to a value that is not quasi-affine in the "
                                    "loops, so distinct iterations are not proven to write "
                                    "distinct elements")


def require_not_opaque(realizes: list[BlockRealize], loop: For, where: str) -> None:
    for realize in realizes:
        if not realize.block.iter_vars:
            raise ScheduleError(f"{where}: block {realize.block.name!r} is opaque (it has no iter "
                                "vars), so nothing says which element each lane writes")


def _conjuncts(cond: PrimExpr):
    if isinstance(cond, And):
        yield from _conjuncts(cond.a)
        yield from _conjuncts(cond.b)
    else:
        yield cond


def _is_affine_guard(cond: PrimExpr, loop_ids: set[int]) -> bool:
    """``affine(loops) < bound`` (or ``<=``, or mirrored) with a loop-invariant bound."""
    if isinstance(cond, (LT, LE)):
        inside, bound = cond.a, cond.b
    elif isinstance(cond, (GT, GE)):
        inside, bound = cond.b, cond.a
    else:
        return False
    return not var_ids(bound) & loop_ids and is_quasi_affine(inside, loop_ids)


def require_affine_predicates(realizes: list[BlockRealize], moved_ids: set[int], where: str) -> None:
    for realize in realizes:
        if is_true(realize.predicate):
            continue
        for cond in _conjuncts(realize.predicate):
            if var_ids(cond) & moved_ids and not _is_affine_guard(cond, moved_ids):
                raise ScheduleError(f"{where}: block {realize.block.name!r} has predicate "
                                    f"{_text(cond)} relating the loops being reordered, which is no "
                                    "affine bound of its iteration space")


def _text(expr) -> str:
    from ..script.expr_printer import format_expr
    return format_expr(expr)


__all__ = ["require_unbound_unannotated", "is_quasi_affine", "require_quasi_affine",
           "require_not_opaque", "require_affine_predicates"]
