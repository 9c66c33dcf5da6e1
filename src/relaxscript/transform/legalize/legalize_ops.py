"""LegalizeOps: replace every operator call by ``call_tir`` of a generated prim_func.

Calls whose arguments or result have coarse annotations (unknown shape or
dtype) are kept: they still run in the interpreter, and a later
``match_cast`` may make them legalizable. Ops without a legalization
(``unique``, ``nonzero``, ``shape_of``, the cross-level calls) are kept too.
Functions are rebuilt through the BlockBuilder, so annotations are deduced
again; each ``call_tir`` is annotated like the call it replaces. The run-time
checks an op's kernel does not make (a reshape's element counts, a squeezed dim,
...: ``guards.py``) go before it unless the facts at that place prove them.
"""
from __future__ import annotations

from typing import Callable, Mapping

from tensorir.dispatch import handles

from ...expr import Call, Op
from ...expr_functor import PassMutator
from ...struct_info import (PrimStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo,
                            TupleStructInfo)
from ..pass_infra import Pass
from .call_cache import CacheStats, call_signature
from .context import LegalizeContext
from .guards import emit_guards
from .registry import get_legalize


class LegalizeOps(Pass):
    """``LegalizeOps(customize={"relax.add": fn})``: ``fn(ctx, call)`` overrides the
    registered legalization of an op (return None to keep the call)."""
    name = "LegalizeOps"

    def __init__(self, customize: Mapping[str, Callable] | None = None):
        customize = dict(customize or {})
        for op_name, fn in customize.items():
            if not isinstance(op_name, str) or not callable(fn):
                raise TypeError("LegalizeOps(customize=...) maps op names such as 'relax.add' to "
                                f"functions fn(ctx, call); got {op_name!r}: {fn!r}")
        self.customize = customize
        self.cache_stats = CacheStats()   # of the last run: calls served by an earlier equal call

    def transform_module(self, mod, ctx):
        legalizer = _Legalizer(self.customize)
        result = legalizer.transform_module(mod)
        self.cache_stats = legalizer.context().cache.stats
        return result


class _Legalizer(PassMutator):
    def __init__(self, customize: Mapping[str, Callable]):
        super().__init__()
        self.customize = customize
        self._context: LegalizeContext | None = None
        self._binding_name = "lv"     # the var of the binding being rebuilt: names its checks

    def context(self) -> LegalizeContext:
        if self._context is None or self._context.bb is not self.builder:
            self._context = LegalizeContext(self.builder)
        return self._context

    @handles(Call)
    def visit_Call(self, call: Call):
        new = self.generic_visit(call)
        if not isinstance(new.op, Op):
            return new
        custom = self.customize.get(new.op.name)
        legalize = custom or get_legalize(new.op.name)
        if legalize is None:
            return new
        new = self.builder.normalize(new)
        if custom is None and not _fully_known(new):
            return new
        # the op's run-time checks (guards.py) before its kernel, outside the legalization cache
        # (a check depends on the facts at this place, the kernel does not)
        emit_guards(self.builder, new, self._binding_name)
        result = self._legalize(legalize, new)
        return new if result is None else result

    def visit_binding(self, binding):
        self._binding_name = binding.var.name_hint
        return super().visit_binding(binding)

    def _legalize(self, legalize, call: Call):
        """``legalize(ctx, call)``, or its earlier result for an equal call (``call_cache``)."""
        ctx = self.context()
        signature = call_signature(legalize, call)
        hit = ctx.cache.lookup(signature, call)
        if hit is not None:
            return hit
        module, bindings = self.builder.get(), self._binding_count()
        first_emit = len(ctx.emitted)
        result = legalize(ctx, call)
        if signature is not None:
            ctx.cache.remember(signature, call, result, ctx.emitted[first_emit:], module,
                               self.builder.get(), self._binding_count() == bindings)
        del ctx.emitted[first_emit:]
        return result

    def _binding_count(self) -> tuple[int, int]:
        frames = self.builder._frames
        return len(frames), len(frames[-1].bindings) if frames else 0


def _fully_known(call: Call) -> bool:
    """Every argument and the result have shapes and dtypes (and scalar values) known."""
    return _known(call.struct_info) and all(_known(arg.struct_info) for arg in call.args)


def _known(sinfo: StructInfo | None) -> bool:
    if isinstance(sinfo, TensorStructInfo):
        return sinfo.shape is not None and sinfo.dtype is not None
    if isinstance(sinfo, ShapeStructInfo):
        return sinfo.values is not None
    if isinstance(sinfo, PrimStructInfo):
        return sinfo.value is not None
    if isinstance(sinfo, TupleStructInfo):
        return all(_known(f) for f in sinfo.fields)
    return False
