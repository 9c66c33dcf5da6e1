"""FuseAttention: ``softmax(q @ kt [* scale] [+ mask | where(cond, ., fill)], axis=-1) @ v``
becomes one ``call_tir`` of a generated online-softmax kernel (attention_kernel.py).

Operands are float32 rank-3 tensors ``q (B, N, D)``, ``kt (B, D, M)``,
``v (B, M, DV)`` whose shared dims are provably equal; N and M may be
symbolic (prefill: N = M; decode over a cache: N = 1, M = t). Grouped-query
attention written as ``(kv_heads, group * n, d)`` queries against
``(kv_heads, d, t)`` keys is the same shape. The scale and the ``where`` fill
must be scalar constants; a mask's dims, right-aligned against ``(B, N, M)``,
are 1 or provably equal. Every intermediate (scores, scaled, masked, probs)
must be a dataflow var used only by the next step, so nothing the pattern
drops is needed elsewhere. The pass runs before library dispatch, which would
otherwise send both products to batched GEMM calls around a materialized
``(B, N, M)`` softmax.
"""
from __future__ import annotations

import numpy as np
from tensorir import expr as E
from tensorir.arith import Analyzer
from tensorir.dispatch import handles

from ..expr import Call, Constant, DataflowVar, Function, Op, SeqExpr, Var, VarBinding
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..op import call_tir
from ..struct_info import TensorStructInfo
from .attention_kernel import (MASK_INDEX_TOKENS, AttentionMask, AttentionSpec, KeySource,
                               attention_kernel, attention_layout, attention_source)
from .attention_mask import MaskScalars, inline_mask
from .dispatch_library import PatternMatch, _BlockMatcher, _UseCounter, is_op, wildcard
from .pass_infra import Pass

_SCORES = is_op("relax.matmul", wildcard("q"), wildcard("kt"))
_SCALED = is_op("relax.multiply", _SCORES, wildcard("scale"), commutative=True)


def _split(x):
    """Scores regrouped ``(B, G * R, M) -> (B, G, R, M)``: grouped-query rows as rank 4."""
    return is_op("relax.reshape", x, wildcard("split_shape"))


def _patterns():
    """Largest first: the first that matches (and passes its check) wins. The scores may be
    regrouped to rank 4 (before or after the scale) for the mask and softmax, and then
    merged back before the product with ``v``."""
    found = []
    for scores, grouped in ((_SCALED, False), (_SCORES, False), (_split(_SCALED), True),
                            (is_op("relax.multiply", _split(_SCORES), wildcard("scale"), commutative=True), True),
                            (_split(_SCORES), True)):
        for masked in (is_op("relax.add", scores, wildcard("mask"), commutative=True),
                       is_op("relax.where", wildcard("cond"), scores, wildcard("fill")),
                       scores):
            probs = is_op("relax.nn.softmax", masked)
            if grouped:
                probs = is_op("relax.reshape", probs, wildcard("merge_shape"))
            found.append(is_op("relax.matmul", probs, wildcard("v")))
    return sorted(found, key=lambda p: -p.size())


PATTERNS = _patterns()


def _scalar_constant(expr) -> float | None:
    if isinstance(expr, Constant) and expr.data.size == 1 and expr.data.dtype.kind == "f":
        return float(expr.data.reshape(()))
    return None


def _float32_rank3(sinfo) -> bool:
    return isinstance(sinfo, TensorStructInfo) and sinfo.dtype == "float32" and sinfo.ndim == 3 \
        and sinfo.shape is not None


def _role_dims(match: PatternMatch, analyzer: Analyzer) -> dict | None:
    """role -> the graph's dim, when the operands' shared dims are provably equal."""
    q, kt, v = (match.sinfo(n) for n in ("q", "kt", "v"))
    if not all(_float32_rank3(s) for s in (q, kt, v)):
        return None
    dims = {"B": q.shape[0], "N": q.shape[1], "D": q.shape[2], "M": kt.shape[2], "DV": v.shape[2]}
    same = [(kt.shape[0], dims["B"]), (v.shape[0], dims["B"]), (kt.shape[1], dims["D"]),
            (v.shape[1], dims["M"])]
    return dims if all(analyzer.can_prove_equal(a, b) for a, b in same) else None


def _mask_roles(sinfo, score_roles: tuple, dims: dict, analyzer: Analyzer) -> tuple | None:
    """The mask's dims as roles or 1, right-aligned against the scores' roles."""
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None or sinfo.ndim > len(score_roles):
        return None
    roles = []
    for dim, role in zip(sinfo.shape, score_roles[len(score_roles) - sinfo.ndim:]):
        if analyzer.can_prove_equal(dim, 1):
            roles.append(1)
        elif analyzer.can_prove_equal(dim, dims[role]):
            roles.append(role)
        else:
            return None
    return tuple(roles)


def _groups(match: PatternMatch, dims: dict, analyzer: Analyzer) -> tuple[int, dict] | None:
    """(groups, the regrouped score dims by role) when the scores are split ``(B, G * R, M) ->
    (B, G, R, M)`` for the softmax and merged back; (1, {}) when they are not regrouped."""
    if "split_shape" not in match.values:
        return 1, {}
    split = match.calls["relax.nn.softmax"].struct_info
    merged = match.root.args[0].struct_info
    if not (isinstance(split, TensorStructInfo) and split.ndim == 4 and split.shape is not None
            and isinstance(merged, TensorStructInfo) and merged.ndim == 3 and merged.shape is not None):
        return None
    b, g, r, m = split.shape
    if not isinstance(g, E.IntImm) or g.value < 1:
        return None
    same = [(b, dims["B"]), (m, dims["M"]), (E.mul(g, r), dims["N"]),
            *zip(merged.shape, (dims["B"], dims["N"], dims["M"]))]
    if not all(analyzer.can_prove_equal(x, y) for x, y in same):
        return None
    return int(g.value), {"G": g, "R": r}


def _mask(match: PatternMatch, dims: dict, grouped: dict, context) -> tuple | None:
    """(AttentionMask or None, mask operand or None, vars the inlined mask made dead), or None
    on a near miss. A mask built from positions is computed in the kernel."""
    if "mask" in match.values:
        kind, operand, dtype, fill = "add", match.values["mask"], "float32", 0.0
    elif "cond" in match.values:
        fill = _scalar_constant(match.values["fill"])
        kind, operand, dtype = "where", match.values["cond"], "bool"
        if fill is None:
            return None
    else:
        return None, None, []
    sinfo = operand.struct_info
    if not isinstance(sinfo, TensorStructInfo) or sinfo.dtype != dtype:
        return None
    score_roles = ("B", "G", "R", "M") if grouped else ("B", "N", "M")
    tokens = [MASK_INDEX_TOKENS[r] for r in score_roles]
    inlined = inline_mask(operand, tokens, context.bound, context.uses, context.analyzer, context.scalars)
    if inlined is not None:
        text, walked = inlined
        return AttentionMask(kind, (), dtype, fill, text), None, context.dead_chain(walked)
    roles = _mask_roles(sinfo, score_roles, {**dims, **grouped}, context.analyzer)
    if roles is None:
        return None
    return AttentionMask(kind, roles, dtype, fill), operand, []


def _key_source(expr, roles: tuple, context) -> tuple:
    """(buffer, KeySource, vars made dead, scale buffer or None): keys or values read through at
    most one ``permute_dims``, one prefix ``strided_slice`` of the key axis and one ``astype``
    from float16 (a half-precision cache, widened by the kernel's loads), in place; or a q8
    cache's ``multiply(astype(int8 codes, float32), scales)`` whose scales (float32, the head
    dim's axis 1: one per head and key) come through the same kind of walk, with the codes'
    capacity (both read in place)."""
    scaled = _scaled_source(expr, roles, context)
    if scaled is not None:
        return scaled
    buffer, source, dead = _walk_source(expr, roles, context)
    return buffer, source, dead, None


def _scaled_source(expr, roles: tuple, context):
    call = context.bound.get(id(expr)) if isinstance(expr, Var) else None
    if not (isinstance(call, Call) and isinstance(call.op, Op) and call.op.name == "relax.multiply"
            and len(call.args) == 2):
        return None
    inner = [r for r in roles if r not in ("B", "M")]
    for codes, scales in (call.args, call.args[::-1]):
        buffer, source, dead = _walk_source(codes, roles, context, int8=True)
        if source.dtype != "int8":
            continue
        s_buffer, s_source, s_dead = _walk_source(scales, roles, context)
        s_sinfo = getattr(s_buffer, "struct_info", None)
        if s_source.dtype != "float32" or s_source.capacity != source.capacity or \
                not isinstance(s_sinfo, TensorStructInfo) or s_sinfo.shape is None or \
                any(not context.analyzer.can_prove_equal(dim, 1)
                    for dim, role in zip(s_sinfo.shape, s_source.axes) if role in inner):
            return None
        head = context.dead_chain([expr])
        dead = head + (dead + s_dead if head else [])
        return buffer, KeySource(source.axes, source.capacity, "int8", s_source.axes), dead, s_buffer
    return None


def _walk_source(expr, roles: tuple, context, int8: bool = False) -> tuple:
    """(buffer, KeySource, vars made dead) of the walk ``_key_source`` describes (``int8``: the
    ``astype`` may widen int8 codes, whose scales the caller finds)."""
    axes, capacity, walked, seen, dtype = list(roles), False, [], set(), "float32"
    while isinstance(expr, Var) and isinstance(context.bound.get(id(expr)), Call):
        call = context.bound[id(expr)]
        name = call.op.name if isinstance(call.op, Op) else None
        source = call.args[0] if call.args else None
        sinfo = getattr(source, "struct_info", None)
        if name in seen or not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
            break
        if name == "relax.permute_dims":
            perm = call.attrs.get("axes")
            perm = list(range(len(axes)))[::-1] if perm is None else [int(a) for a in perm]
            inner = [None] * len(axes)
            for j, p in enumerate(perm):
                inner[p] = axes[j]
            axes = inner
        elif name == "relax.strided_slice":
            prefix = _prefix_slice_axis(call, context.analyzer)
            if prefix is None or axes[prefix] != "M":
                break
            capacity = sinfo.shape[prefix]
            capacity = int(capacity.value) if isinstance(capacity, E.IntImm) else None
        elif name == "relax.astype":
            if sinfo.dtype not in (("float16", "int8") if int8 else ("float16",)) or \
                    call.struct_info.dtype != "float32":
                break
            dtype = sinfo.dtype
        else:
            break
        seen.add(name)
        walked.append(expr)
        expr = source
    return expr, KeySource(tuple(axes), capacity, dtype), context.dead_chain(walked)


def _prefix_slice_axis(call: Call, analyzer: Analyzer) -> int | None:
    """The axis of ``strided_slice(x, [a], [0], [e], [1])``, else None."""
    values = []
    for arg in call.args[1:5]:
        sinfo = arg.struct_info
        if getattr(sinfo, "values", None) is None or len(sinfo.values) != 1:
            return None
        values.append(sinfo.values[0])
    axis, begin, _, stride = values
    ndim = call.args[0].struct_info.ndim
    if not (isinstance(axis, E.IntImm) and analyzer.can_prove_equal(begin, 0)
            and analyzer.can_prove_equal(stride, 1)):
        return None
    return int(axis.value) % ndim


def attention_spec(match: PatternMatch, analyzer: Analyzer, context=None) -> AttentionSpec | None:
    """The kernel's description, or None when the match is a near miss (``context`` gives the
    function's bindings for in-place key sources and masks computed in the kernel)."""
    return _fusion(match, analyzer, context)[0]


def _fusion(match: PatternMatch, analyzer: Analyzer, context=None):
    """(spec, kernel operands, tir_vars, vars made dead), spec None on a near miss."""
    miss = (None, [], [], [])
    if any(c.attrs.get("out_dtype") not in (None, "float32")
           for c in (match.root, match.calls["relax.matmul"])):
        return miss
    softmax = match.calls["relax.nn.softmax"]
    dims = _role_dims(match, analyzer)
    if dims is None:
        return miss
    grouping = _groups(match, dims, analyzer)
    if grouping is None:
        return miss
    groups, grouped = grouping
    if softmax.attrs.get("axis") not in (-1, 3 if grouped else 2):
        return miss
    scale = None
    if "scale" in match.values:
        scale = _scalar_constant(match.values["scale"])
        if scale is None:
            return miss
    context = context or _Context({}, {}, analyzer)
    context.scalars = MaskScalars(analyzer)
    masked = _mask(match, dims, grouped, context)
    if masked is None:
        return miss
    mask, mask_operand, dead = masked
    kt, keys, dead_k, k_scale = _key_source(match.values["kt"], ("B", "D", "M"), context)
    v, values, dead_v, v_scale = _key_source(match.values["v"], ("B", "M", "DV"), context)
    static = {r: (int(d.value) if isinstance(d, E.IntImm) else None) for r, d in dims.items()}
    if keys.capacity is not False or values.capacity is not False:   # both take M as a scalar
        keys, values = (s if s.capacity is not False else KeySource(s.axes, static["M"], s.dtype, s.scale_axes)
                        for s in (keys, values))
    spec = AttentionSpec(static, None if scale is None else float(np.float32(scale)), mask,
                         groups, keys, values, len(context.scalars.values))
    tir_vars = ([dims["M"]] if spec.sliced() and static["M"] is None else []) + context.scalars.values
    operands = [match.values["q"], kt, v] + [x for x in (k_scale, v_scale) if x is not None] \
        + ([mask_operand] if mask_operand is not None else [])
    return spec, operands, tir_vars, dead + dead_k + dead_v


class _Context:
    """The function's bindings and use counts, for looking through an operand's producers."""

    def __init__(self, bound: dict, uses: dict, analyzer: Analyzer):
        self.bound, self.uses, self.analyzer = bound, uses, analyzer
        self.scalars = MaskScalars(analyzer)

    def dead_chain(self, walked: list) -> list:
        """The leading vars of a producer chain that only the chain uses (dataflow vars used
        once): fused away with the attention."""
        dead = []
        for var in walked:
            if not isinstance(var, DataflowVar) or self.uses.get(id(var), 0) != 1:
                break
            dead.append(var)
        return dead


def _takes(spec: AttentionSpec, max_query_rows: int | None) -> bool:
    rows = spec.dims.get("N")
    return max_query_rows is None or (rows is not None and rows <= max_query_rows)


def _plan(block, uses: dict, analyzer: Analyzer, max_query_rows: int | None = None,
          bound: dict | None = None) -> tuple[dict, set[int]]:
    """root var id -> (match, fusion) for the block's attentions, and the ids of consumed vars."""
    matcher = _BlockMatcher(block, uses, analyzer)
    if bound is None:
        bound = {key: b.value for key, b in matcher.bound.items()}
    context = _Context(bound, uses, analyzer)
    plans, consumed = {}, set()
    for binding in reversed(block.bindings):
        if id(binding.var) in consumed or not isinstance(binding, VarBinding) or \
                not isinstance(binding.value, Call):
            continue
        for pattern in PATTERNS:
            match, taken = PatternMatch(binding.value), set(consumed)
            if not matcher.match(pattern, binding.value, match, taken):
                continue
            fusion = _fusion(match, analyzer, context)
            if fusion[0] is not None and _takes(fusion[0], max_query_rows):
                plans[id(binding.var)] = (match, fusion)
                consumed |= {id(v) for v in match.consumed} | {id(v) for v in fusion[3]}
                break
    return plans, consumed


def kernel_key(spec: AttentionSpec) -> tuple:
    """Everything ``attention_kernel(spec)`` is made of: its script text and layout attribute
    (``repr`` keeps a -0.0 fill apart from 0.0)."""
    return attention_source(spec), repr(sorted(attention_layout(spec).items()))


class _AttentionFuser(PassMutator):
    def __init__(self, mod: IRModule, max_query_rows: int | None):
        super().__init__(mod)
        self.max_query_rows = max_query_rows
        self.plans: dict = {}
        self.consumed: set[int] = set()
        self.uses: dict[int, int] = {}
        self.bound: dict[int, object] = {}
        self.kernels: dict = {}   # kernel_key(spec) -> GlobalVar: 30 layers' equal kernels parsed once

    @handles(Function)
    def visit_Function(self, func):
        counter = _UseCounter()
        counter.visit(func)
        self.uses = counter.counts
        self.bound = {}
        return super().visit_Function(func)

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq: SeqExpr):
        for block in seq.blocks:
            self.bound.update({id(b.var): b.value for b in block.bindings if isinstance(b, VarBinding)})
            plans, consumed = _plan(block, self.uses, self.builder.analyzer, self.max_query_rows, self.bound)
            self.plans.update(plans)
            self.consumed |= consumed
        return super().visit_SeqExpr(seq)

    def visit_binding(self, binding):
        if id(binding.var) in self.consumed:
            return None
        planned = self.plans.get(id(binding.var))
        if planned is None:
            return super().visit_binding(binding)
        match, (spec, operands, tir_vars, _) = planned
        args = [self.visit_expr(operand) for operand in operands]
        key = kernel_key(spec)
        kernel = self.kernels.get(key)
        if kernel is None:
            kernel = self.kernels[key] = self.builder.add_func(attention_kernel(spec), "fused_attention")
        call = self.builder.normalize(call_tir(kernel, args, binding.var.struct_info,
                                               tir_vars=tir_vars or None))
        new_var = self._rebind(binding.var, call)
        if new_var is not binding.var:
            self.var_remap[binding.var] = new_var
        return None


class FuseAttention(Pass):
    """Replace each matched attention by one call of a fused online-softmax kernel.

    ``max_query_rows``: fuse only attentions whose query rows per head are a known constant
    at most this (decode); None (the default pipeline's choice) fuses every match. On the C
    target the kernel is generated (backends/c/attention.py) and measured faster than the BLAS
    matmuls around a softmax at every query length; the loop nest alone (other targets,
    ``RELAXSCRIPT_GENERATED_KERNELS=0``) is fast only for short queries, hence the bound."""
    name = "FuseAttention"

    def __init__(self, max_query_rows: int | None = None):
        if max_query_rows is not None and (not isinstance(max_query_rows, int) or max_query_rows < 1):
            raise ValueError(f"FuseAttention: max_query_rows must be a positive int or None, got {max_query_rows!r}")
        self.max_query_rows = max_query_rows

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return _AttentionFuser(mod, self.max_query_rows).transform_module(mod)


__all__ = ["FuseAttention", "attention_spec", "PATTERNS"]
