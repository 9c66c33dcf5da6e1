"""Utilities over annotations (struct info): compatibility, matching, LCA, erasure.

Compatibility (``is_base_of``) answers three ways: "yes" (every value of the
derived annotation satisfies the base), "no" (none can), "runtime" (only a
runtime check can tell). Symbolic variables of the base that are not fixed
are pattern variables: they match anything, consistently, and the match
records what they bind to (``match_symbolic_vars``), which is how a call is
deduced from the callee's signature alone.
"""
from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as tir
from tensorir.arith import Analyzer
from tensorir.dispatch import ClassDispatch, handles
from tensorir.functor import Mutator, iter_children
from tensorir.script.printer import format_expr
from tensorir.structural import structural_equal

from .struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                          StructInfo, TensorStructInfo, TupleStructInfo)

YES, RUNTIME, NO = "yes", "runtime", "no"
_RANK = {NO: 0, RUNTIME: 1, YES: 2}


def worst(a: str, b: str) -> str:
    return a if _RANK[a] <= _RANK[b] else b


# ------------------------------------------------------------------ analyzer
def default_analyzer() -> Analyzer:
    return Analyzer()


def prove_equal(a: tir.PrimExpr, b: tir.PrimExpr, analyzer) -> str:
    """YES if ``a == b`` provably, NO if ``a != b`` provably, else RUNTIME."""
    if a is b or structural_equal(a, b, map_free_vars=False):
        return YES
    if isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm):
        return YES if a.value == b.value else NO
    if analyzer.can_prove_equal(a, b):
        return YES
    if analyzer.can_prove(tir.NE(a, b)):
        return NO
    return RUNTIME


# ------------------------------------------------------------------ substitution with folding
_FOLDING_BUILDERS = {tir.Add: tir.add, tir.Sub: tir.sub, tir.Mul: tir.mul, tir.Div: tir.div,
                     tir.FloorDiv: tir.floordiv, tir.FloorMod: tir.floormod, tir.Min: tir.min_,
                     tir.Max: tir.max_}


def rebuild_binary(node: tir.BinaryOp, a: tir.PrimExpr, b: tir.PrimExpr) -> tir.PrimExpr:
    """``node`` with new operands, folding literal arithmetic (``3 * 4`` -> ``12``)."""
    if a is node.a and b is node.b:
        return node
    build = _FOLDING_BUILDERS.get(type(node))
    return build(a, b) if build is not None else type(node)(a, b)


class _FoldingSubstituter(Mutator):
    """Replaces symbolic vars and re-folds literal arithmetic."""

    def __init__(self, vmap):
        super().__init__()
        self._memo.update({k: tir.convert(v) for k, v in vmap.items()})

    @handles(tir.BinaryOp)
    def visit_BinaryOp(self, node):
        return rebuild_binary(node, self.visit(node.a), self.visit(node.b))


def substitute_sinfo(node, vmap: dict):
    """Substitute symbolic vars in an annotation or PrimExpr, folding literal arithmetic."""
    if not vmap:
        return node
    return _FoldingSubstituter(vmap).visit_value(node)


def symbolic_vars_of(node) -> list[tir.Var]:
    """Symbolic variables in an annotation (or PrimExpr), in order of first appearance."""
    seen: dict[int, tir.Var] = {}
    stack = [node]
    while stack:
        cur = stack.pop()
        if isinstance(cur, (tuple, list)):
            stack.extend(reversed(cur))
            continue
        if isinstance(cur, tir.Var):
            seen.setdefault(id(cur), cur)
        if cur is not None and hasattr(cur, "_fields"):
            stack.extend(reversed(list(iter_children(cur))))
    return list(seen.values())


# ------------------------------------------------------------------ matching
class StructInfoMatcher(ClassDispatch):
    """Matches a pattern (base) annotation against an actual (derived) one.

    Plain pattern variables are bound in a first pass; dimensions that are
    expressions (``n * 4``) or repeated variables are checked after all
    bindings are known, so ``(n * 4, n)`` matches ``(12, 3)``.
    """

    def __init__(self, analyzer=None, is_pattern_var: Callable[[tir.Var], bool] | None = None):
        self.analyzer = analyzer if analyzer is not None else default_analyzer()
        self.is_pattern_var = is_pattern_var or (lambda v: True)
        self.bindings: dict[tir.Var, tir.PrimExpr] = {}
        self.verdict = YES
        self.failed_tag = None  # the ``tag`` of the first match found to be NO
        self._tag = None
        self._pending: list[tuple[tir.PrimExpr, tir.PrimExpr, object]] = []

    def match(self, base: StructInfo, derived: StructInfo, tag=None) -> str:
        """Match one pair; ``tag`` identifies it in ``failed_tag`` (e.g. a parameter index)."""
        self._tag = tag
        self._note(self._match(base, derived))
        return self.verdict

    def finish(self) -> str:
        """Check the deferred dimension comparisons; returns the overall verdict."""
        pending, self._pending = self._pending, []
        for pattern, actual, self._tag in pending:
            if self.verdict == NO:
                break
            pattern = substitute_sinfo(pattern, self.bindings)
            if any(self._unbound(v) for v in symbolic_vars_of(pattern)):
                self._note(RUNTIME)  # cannot solve for a var used only inside expressions
            else:
                self._note(prove_equal(pattern, actual, self.analyzer))
        return self.verdict

    def _note(self, verdict: str) -> None:
        if verdict == NO and self.verdict != NO:
            self.failed_tag = self._tag
        self.verdict = worst(self.verdict, verdict)

    def _unbound(self, var: tir.Var) -> bool:
        return self.is_pattern_var(var) and var not in self.bindings

    def _match(self, base, derived) -> str:
        if isinstance(base, ObjectStructInfo):
            return YES
        if isinstance(derived, ObjectStructInfo):
            return RUNTIME
        if type(base) is not type(derived):
            return NO
        return self.handler_for(type(base))(self, base, derived)

    @handles(PrimStructInfo)
    def _match_PrimStructInfo(self, base, derived) -> str:
        if base.dtype != derived.dtype:
            return NO
        if base.value is None:
            return YES
        if derived.value is None:
            return RUNTIME
        return self._match_dims((base.value,), (derived.value,))

    @handles(ShapeStructInfo)
    def _match_ShapeStructInfo(self, base, derived) -> str:
        return self._match_shape(base.ndim, base.values, derived.ndim, derived.values)

    @handles(TensorStructInfo)
    def _match_TensorStructInfo(self, base, derived) -> str:
        verdict = YES
        if base.dtype is not None:
            if derived.dtype is None:
                verdict = RUNTIME
            elif derived.dtype != base.dtype:
                return NO
        return worst(verdict, self._match_shape(base.ndim, base.shape, derived.ndim, derived.shape))

    def _match_shape(self, base_ndim, base_dims, derived_ndim, derived_dims) -> str:
        if base_ndim == -1:
            return YES
        if derived_ndim == -1:
            return RUNTIME
        if base_ndim != derived_ndim:
            return NO
        if base_dims is None:
            return YES
        if derived_dims is None:
            return RUNTIME
        return self._match_dims(base_dims, derived_dims)

    def _match_dims(self, base_dims, derived_dims) -> str:
        verdict = YES
        for pattern, actual in zip(base_dims, derived_dims):
            if isinstance(pattern, tir.Var) and self._unbound(pattern):
                self.bindings[pattern] = actual
                verdict = worst(verdict, self._check_facts(pattern, actual))
            else:
                self._pending.append((pattern, actual, self._tag))
        return verdict

    def _check_facts(self, var: tir.Var, actual: tir.PrimExpr) -> str:
        """A pattern var's facts (lower/upper/multiple_of) constrain what it may bind to."""
        conditions = []
        if var.lower is not None:
            conditions.append(tir.GE(actual, var.lower))
        if var.upper is not None:
            conditions.append(tir.LE(actual, var.upper))
        if var.multiple_of:
            conditions.append(tir.EQ(tir.floormod(actual, var.multiple_of), 0))
        verdict = YES
        for cond in conditions:
            if isinstance(actual, tir.IntImm):
                holds = _eval_const_condition(cond)
                verdict = worst(verdict, YES if holds else NO)
            elif not self.analyzer.can_prove(cond):
                verdict = worst(verdict, RUNTIME)
        return verdict

    @handles(TupleStructInfo)
    def _match_TupleStructInfo(self, base, derived) -> str:
        if len(base.fields) != len(derived.fields):
            return NO
        verdict = YES
        for b, d in zip(base.fields, derived.fields):
            verdict = worst(verdict, self._match(b, d))
            if verdict == NO:
                break
        return verdict

    @handles(FuncStructInfo)
    def _match_FuncStructInfo(self, base, derived) -> str:
        # Signatures have their own symbolic scope: compare them as closed terms.
        if base.purity and not derived.purity:
            return NO
        if structural_equal(base, derived):
            return YES
        if base.params is None:
            return is_base_of(base.ret, derived.ret, self.analyzer)
        if derived.params is None:
            return RUNTIME
        if len(base.params) != len(derived.params):
            return NO
        verdict = YES
        for b, d in zip(base.params, derived.params):
            verdict = worst(verdict, is_base_of(d, b, self.analyzer))  # contravariant
        return worst(verdict, is_base_of(base.ret, derived.ret, self.analyzer))


def _eval_const_condition(cond) -> bool:
    """Evaluate a fact condition whose operands folded to literals."""
    a, b = cond.a, cond.b
    if not (isinstance(a, tir.IntImm) and isinstance(b, tir.IntImm)):
        return True
    ops = {tir.GE: lambda x, y: x >= y, tir.LE: lambda x, y: x <= y, tir.EQ: lambda x, y: x == y}
    return ops[type(cond)](a.value, b.value)


def is_base_of(base: StructInfo, derived: StructInfo, analyzer=None,
               fixed_vars: Iterable[tir.Var] | None = None) -> str:
    """Whether a value annotated ``derived`` can be used where ``base`` is expected.

    Returns "yes", "no" or "runtime". Symbolic vars of ``base`` not listed in
    ``fixed_vars`` are pattern vars (matched consistently: ``(n, n)`` vs
    ``(3, 4)`` is "no"); fixed vars are compared with the analyzer.
    """
    fixed = set(fixed_vars or ())
    matcher = StructInfoMatcher(analyzer, lambda v: v not in fixed)
    if matcher.match(base, derived) == NO:
        return NO
    return matcher.finish()


def match_symbolic_vars(pattern: StructInfo, actual: StructInfo, analyzer=None,
                        fixed_vars: Iterable[tir.Var] | None = None) -> dict[tir.Var, tir.PrimExpr]:
    """Bindings of the pattern's symbolic vars that make it match ``actual``.

    Vars the actual annotation cannot determine (it is coarser) are left out.
    Raises ``ValueError`` when the two provably cannot match.
    """
    fixed = set(fixed_vars or ())
    matcher = StructInfoMatcher(analyzer, lambda v: v not in fixed)
    matcher.match(pattern, actual)
    if matcher.finish() == NO:
        raise ValueError(f"annotation {format_sinfo(actual)} cannot match {format_sinfo(pattern)}")
    return dict(matcher.bindings)


# ------------------------------------------------------------------ LCA and erasure
def struct_info_lca(a: StructInfo, b: StructInfo, analyzer=None) -> StructInfo:
    """The most precise annotation that both ``a`` and ``b`` satisfy (for If results)."""
    analyzer = analyzer if analyzer is not None else default_analyzer()
    if a is b:
        return a
    if isinstance(a, ObjectStructInfo) or type(a) is not type(b):
        return ObjectStructInfo()
    if isinstance(a, PrimStructInfo):
        if a.dtype != b.dtype:
            return ObjectStructInfo()
        same = a.value is not None and b.value is not None and prove_equal(a.value, b.value, analyzer) == YES
        return PrimStructInfo(a.dtype, a.value if same else None)
    if isinstance(a, ShapeStructInfo):
        ndim, values = _lca_dims(a.ndim, a.values, b.ndim, b.values, analyzer)
        return ShapeStructInfo(values, ndim)
    if isinstance(a, TensorStructInfo):
        dtype = a.dtype if a.dtype == b.dtype else None
        ndim, shape = _lca_dims(a.ndim, a.shape, b.ndim, b.shape, analyzer)
        return TensorStructInfo(shape, dtype, ndim)
    if isinstance(a, TupleStructInfo):
        if len(a.fields) != len(b.fields):
            return ObjectStructInfo()
        return TupleStructInfo([struct_info_lca(x, y, analyzer) for x, y in zip(a.fields, b.fields)])
    if isinstance(a, FuncStructInfo):
        if structural_equal(a, b):
            return a
        return FuncStructInfo(None, struct_info_lca(a.ret, b.ret, analyzer), a.purity and b.purity)
    return ObjectStructInfo()


def _lca_dims(ndim_a, dims_a, ndim_b, dims_b, analyzer):
    if ndim_a != ndim_b:
        return -1, None
    if dims_a is None or dims_b is None:
        return ndim_a, None
    if all(prove_equal(x, y, analyzer) == YES for x, y in zip(dims_a, dims_b)):
        return ndim_a, dims_a
    return ndim_a, None


def erase_to_well_defined(sinfo: StructInfo, defined_vars, var_map: dict | None = None) -> StructInfo:
    """Coarsen the parts of ``sinfo`` that mention symbolic vars out of scope.

    ``defined_vars`` is a collection of vars or a predicate ``var -> bool``.
    ``var_map`` is substituted first. A shape naming an undefined var keeps
    only its ndim; a Prim value naming one is dropped.
    """
    if var_map:
        sinfo = substitute_sinfo(sinfo, var_map)
    if callable(defined_vars):
        is_defined = defined_vars
    else:
        defined = set(defined_vars)
        is_defined = defined.__contains__
    return _erase(sinfo, is_defined)


def _erase(sinfo, is_defined):
    def ok(exprs) -> bool:
        return all(is_defined(v) for v in symbolic_vars_of(exprs))

    if isinstance(sinfo, PrimStructInfo):
        return sinfo if sinfo.value is None or ok(sinfo.value) else PrimStructInfo(sinfo.dtype)
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo if sinfo.values is None or ok(sinfo.values) else ShapeStructInfo(None, sinfo.ndim)
    if isinstance(sinfo, TensorStructInfo):
        if sinfo.shape is None or ok(sinfo.shape):
            return sinfo
        return TensorStructInfo(None, sinfo.dtype, sinfo.ndim)
    if isinstance(sinfo, TupleStructInfo):
        fields = [_erase(f, is_defined) for f in sinfo.fields]
        return sinfo if all(a is b for a, b in zip(fields, sinfo.fields)) else TupleStructInfo(fields)
    if isinstance(sinfo, FuncStructInfo):
        # A signature's own params define the vars its return annotation may use.
        local = set(symbolic_vars_of(sinfo.params or ()))
        ret = _erase(sinfo.ret, lambda v: v in local or is_defined(v))
        return sinfo if ret is sinfo.ret else FuncStructInfo(sinfo.params, ret, sinfo.purity)
    return sinfo


# ------------------------------------------------------------------ values and printing
def struct_info_from_value(value) -> StructInfo:
    """The annotation of a runtime value: NumPy array -> Tensor, int/float/bool -> Prim,
    tuple/list -> Tuple, anything else -> Object."""
    if isinstance(value, np.ndarray):
        return TensorStructInfo([int(d) for d in value.shape], value.dtype.name)
    if isinstance(value, (bool, np.bool_)):
        return PrimStructInfo("bool", tir.IntImm(bool(value), "bool"))
    if isinstance(value, (int, np.integer)):
        dtype = value.dtype.name if isinstance(value, np.integer) else "int64"
        return PrimStructInfo(dtype, tir.IntImm(int(value), dtype))
    if isinstance(value, (float, np.floating)):
        dtype = value.dtype.name if isinstance(value, np.floating) else "float64"
        return PrimStructInfo(dtype, tir.FloatImm(float(value), dtype))
    if isinstance(value, (tuple, list)):
        return TupleStructInfo([struct_info_from_value(v) for v in value])
    return ObjectStructInfo()


def format_sinfo(sinfo) -> str:
    """Script form of an annotation, for messages."""
    if sinfo is None:
        return "<no annotation>"
    from .script.printer import format_struct_info  # late: the printer imports this module
    try:
        return format_struct_info(sinfo)
    except ValueError:  # holds a node no annotation can (a message must still be made)
        return repr(sinfo)


def format_prim(e) -> str:
    """Script form of a symbolic expression, for messages."""
    return format_expr(e)


def is_dtype_int_scalar(sinfo) -> bool:
    return isinstance(sinfo, PrimStructInfo) and (dt.is_int(sinfo.dtype) or dt.is_bool(sinfo.dtype))
