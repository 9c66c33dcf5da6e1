"""MergeParallelMatmul: matmuls sharing their left operand with constant weights
become one wider matmul (BladeDISC §4.3, horizontal GEMM merging).

In one binding block, ``y_i = R.matmul(x, W_i)`` for the same ``x`` and constant
2-D weights ``W_i`` of shape ``(K, N_i)`` (a ``Constant`` or a var bound to one;
parameters become constants with ``BindParams``) with the same dtype and
``out_dtype`` are rewritten into

    merged = R.matmul(x, concat(W_0, W_1, ...))      # weights joined at build time
    y_i = R.strided_slice(merged, [last], [o_i], [o_i + N_i])

``merged`` is bound where the first member was; each ``y_i`` keeps its var and
its place. One GEMM of width ``sum N_i`` reads ``x`` once and keeps the BLAS or
generated kernel busy on wider tiles (Q/K/V projections, gate/up); the slices
are injective, so FuseOps fuses them into their consumers (the reshapes into
heads, the SiLU-times-up product).

Not merged: a weight used once in the group twice over (nothing to gain), weights
whose shapes are not static, matmuls whose left operand is not a var, and
groups whose merged weight would exceed ``max_elements`` elements.
"""
from __future__ import annotations

import numpy as np

from ..expr import Call, Constant, Op, Var, VarBinding
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from .. import op
from .pass_infra import Pass

DEFAULT_MAX_ELEMENTS = 1 << 26


class MergeParallelMatmul(Pass):
    """Merge matmuls of one left operand with constant right operands into one matmul."""
    name = "MergeParallelMatmul"

    def __init__(self, max_elements: int = DEFAULT_MAX_ELEMENTS):
        if not isinstance(max_elements, int) or max_elements < 0:
            raise ValueError(f"MergeParallelMatmul: max_elements must be a non-negative int, "
                             f"got {max_elements!r}")
        self.max_elements = max_elements

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return _Merger(mod, self.max_elements).transform_module(mod)


class _Merger(PassMutator):
    def __init__(self, mod: IRModule, max_elements: int):
        super().__init__(mod)
        self.max_elements = max_elements
        self.constant_of: dict[Var, Constant] = {}
        self.groups = 0  # merged groups, for reports

    def visit_block_bindings(self, block) -> None:
        plan = self._plan(block.bindings)
        for binding in block.bindings:
            member = plan.get(binding.var)
            if member is None:
                self.visit_binding(binding)
                continue
            group, offset, width = member
            if group.merged is None:
                group.merged = self.builder.emit(
                    op.matmul(self.visit_expr(group.lhs), Constant(group.weight), group.out_dtype),
                    "merged_matmul")
            last = group.merged.struct_info.ndim - 1
            sliced = op.strided_slice(group.merged, [last], [offset], [offset + width], [1])
            self.var_remap[binding.var] = self._rebind(binding.var, self.visit_expr(sliced))

    def _plan(self, bindings) -> dict:
        """Each merged binding's var -> (group, column offset, width)."""
        for binding in bindings:
            if isinstance(binding, VarBinding) and isinstance(binding.value, Constant):
                self.constant_of[binding.var] = binding.value
        by_key: dict[tuple, list] = {}
        for binding in bindings:
            weight = self._constant_weight(binding)
            if weight is None:
                continue
            lhs, out_dtype = binding.value.args[0], binding.value.attrs.get("out_dtype")
            key = (lhs, weight.dtype.str, weight.shape[0], out_dtype)
            members = by_key.setdefault(key, [])
            if all(w is not weight for _, w in members):
                members.append((binding.var, weight))
        plan = {}
        for (lhs, _, _, out_dtype), members in by_key.items():
            if len(members) < 2:
                continue
            weight = np.concatenate([w for _, w in members], axis=1)
            if weight.size > self.max_elements:
                continue
            group = _Group(lhs, weight, out_dtype)
            self.groups += 1
            offset = 0
            for var, w in members:
                plan[var] = (group, offset, w.shape[1])
                offset += w.shape[1]
        return plan

    def _constant_weight(self, binding) -> np.ndarray | None:
        """The constant 2-D right operand of ``binding``'s matmul, or None."""
        value = binding.value
        if not (isinstance(binding, VarBinding) and isinstance(value, Call) and isinstance(value.op, Op)
                and value.op.name == "relax.matmul"):
            return None
        lhs, rhs = value.args
        if not isinstance(lhs, Var) or lhs.struct_info.ndim < 1:
            return None
        if isinstance(rhs, Var):
            rhs = self.constant_of.get(rhs)
        if not isinstance(rhs, Constant) or rhs.data.ndim != 2:
            return None
        return rhs.data


class _Group:
    __slots__ = ("lhs", "weight", "out_dtype", "merged")

    def __init__(self, lhs: Var, weight: np.ndarray, out_dtype):
        self.lhs, self.weight, self.out_dtype = lhs, weight, out_dtype
        self.merged = None  # the merged matmul's var, once emitted


__all__ = ["MergeParallelMatmul"]
