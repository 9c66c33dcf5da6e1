"""An attention mask's graph expression rewritten as one loop-level expression.

FuseAttention computes a mask inside its kernel when the mask is built from
positions (``arange``, unit-axis ``reshape``, comparisons, ``full`` and
``triu``/``tril``, integer arithmetic, scalar constants) instead of reading an
``(n, m)`` tensor: the causal mask of a prefill or decode over a cache is then
a compare of two indices per score. ``inline_mask`` returns the expression as
script text over the kernel's index expressions; graph-level scalars (``t``,
an arange's start) become the kernel's scalar parameters, collected in
``MaskScalars``. Anything else gives None and the mask stays an operand.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.arith import Analyzer

from ..expr import Call, Constant, Op, PrimValue, Var
from ..struct_info import TensorStructInfo

_COMPARE = {"relax.less": "<", "relax.less_equal": "<=", "relax.greater": ">",
            "relax.greater_equal": ">=", "relax.equal": "==", "relax.not_equal": "!="}
_ARITH = {"relax.add": "+", "relax.subtract": "-", "relax.multiply": "*"}
_LOGICAL = {"relax.logical_and": "T.And", "relax.logical_or": "T.Or"}
_DTYPES = ("int64", "float32", "bool")


class MaskScalars:
    """Graph scalars the inlined mask reads, as kernel parameters ``s0, s1, ...``."""

    def __init__(self, analyzer: Analyzer, prefix: str = "s"):
        self.analyzer, self.prefix = analyzer, prefix
        self.values: list = []

    def name(self, value) -> str:
        for i, known in enumerate(self.values):
            if self.analyzer.can_prove_equal(known, value):
                return f"{self.prefix}{i}"
        self.values.append(value)
        return f"{self.prefix}{len(self.values) - 1}"


class _Inliner:
    def __init__(self, bound: dict, uses: dict, analyzer: Analyzer, scalars: MaskScalars):
        self.bound, self.uses, self.analyzer, self.scalars = bound, uses, analyzer, scalars
        self.walked: list = []      # vars looked through, in visiting order

    def is_one(self, dim) -> bool:
        return self.analyzer.can_prove_equal(dim, 1)

    def scalar(self, value) -> str | None:
        """A PrimValue / PrimExpr as int64 text."""
        expr = value.value if isinstance(value, PrimValue) else value
        if isinstance(expr, E.IntImm):
            return f"T.int64({int(expr.value)})"
        if isinstance(expr, E.PrimExpr) and expr.dtype == "int64":
            return self.scalars.name(expr)
        return None

    def broadcast(self, arg, indices: list[str]) -> list[str] | None:
        """``indices`` of a result, right-aligned onto ``arg``'s dims (a dim of 1 reads 0)."""
        sinfo = arg.struct_info
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.ndim > len(indices):
            return None
        own = indices[len(indices) - sinfo.ndim:]
        return ["T.int64(0)" if self.is_one(d) else i for d, i in zip(sinfo.shape, own)]

    def inline(self, expr, indices: list[str]) -> str | None:
        if isinstance(expr, Constant):
            if expr.data.size != 1 or str(expr.data.dtype) not in _DTYPES:
                return None
            value = expr.data.reshape(()).item()
            return {"int64": f"T.int64({int(value)})", "float32": f"T.float32({float(value)!r})",
                    "bool": f"T.bool({bool(value)})"}[str(expr.data.dtype)]
        if not isinstance(expr, Var) or id(expr) not in self.bound:
            return None
        value = self.bound[id(expr)]
        sinfo = expr.struct_info
        if not (isinstance(value, Call) and isinstance(value.op, Op) and isinstance(sinfo, TensorStructInfo)
                and sinfo.dtype in _DTYPES and sinfo.shape is not None and sinfo.ndim == len(indices)):
            return None
        self.walked.append(expr)
        return self.call(value, indices)

    def call(self, call: Call, indices: list[str]) -> str | None:
        name, args = call.op.name, call.args
        if name in _COMPARE or name in _ARITH or name in _LOGICAL:
            parts = [self.broadcast(a, indices) for a in args]
            if any(p is None for p in parts):
                return None
            left, right = (self.inline(a, p) for a, p in zip(args, parts))
            if left is None or right is None:
                return None
            if name in _LOGICAL:
                return f"{_LOGICAL[name]}({left}, {right})"
            return f"({left} {_COMPARE.get(name) or _ARITH[name]} {right})"
        if name == "relax.arange":
            start, step = self.scalar(args[0]), self.scalar(args[2])
            if start is None or step is None or call.struct_info.dtype != "int64":
                return None
            return f"({start} + {indices[0]} * {step})"
        if name == "relax.full":
            return self.inline(args[1], []) if call.struct_info.dtype == "float32" else None
        if name in ("relax.triu", "relax.tril"):
            inner = self.inline(args[0], indices)
            if inner is None:
                return None
            k = int(call.attrs.get("k", 0))
            row, col = indices[-2], indices[-1]
            keep = f"{col} - {row} >= T.int64({k})" if name == "relax.triu" \
                else f"{col} - {row} <= T.int64({k})"
            zero = "T.float32(0.0)" if call.struct_info.dtype == "float32" else "T.int64(0)"
            return f"T.if_then_else({keep}, {inner}, {zero})"
        if name == "relax.reshape":
            return self.reshape(args[0], call.struct_info.shape, indices)
        return None

    def reshape(self, arg, shape, indices: list[str]) -> str | None:
        """A reshape that only adds or drops axes of 1: the other axes pair up in order."""
        sinfo = arg.struct_info
        if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
            return None
        kept_out = [(d, i) for d, i in zip(shape, indices) if not self.is_one(d)]
        kept_in = [k for k, d in enumerate(sinfo.shape) if not self.is_one(d)]
        if len(kept_out) != len(kept_in) or not all(
                self.analyzer.can_prove_equal(sinfo.shape[k], d) for k, (d, _) in zip(kept_in, kept_out)):
            return None
        inner = ["T.int64(0)"] * sinfo.ndim
        for k, (_, i) in zip(kept_in, kept_out):
            inner[k] = i
        return self.inline(arg, inner)


def inline_mask(expr, indices: list[str], bound: dict, uses: dict, analyzer: Analyzer,
                scalars: MaskScalars) -> tuple[str, list] | None:
    """(script text of ``expr`` at ``indices``, the vars it looked through) or None.

    ``indices`` are right-aligned with ``expr``'s dims (one text per dim); ``bound`` maps
    var ids to their bound values; the collected scalars are added to ``scalars`` only
    when the whole expression inlines."""
    sinfo = expr.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.ndim > len(indices):
        return None
    trial = MaskScalars(analyzer, scalars.prefix)
    trial.values = list(scalars.values)
    inliner = _Inliner(bound, uses, analyzer, trial)
    own = indices[len(indices) - sinfo.ndim:]
    text = inliner.inline(expr, ["T.int64(0)" if inliner.is_one(d) else i for d, i in zip(sinfo.shape, own)])
    if text is None:
        return None
    scalars.values = trial.values
    return text, inliner.walked


__all__ = ["MaskScalars", "inline_mask"]
