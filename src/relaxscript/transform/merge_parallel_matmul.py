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

Weights that reach a function as parameters (a decoder layer called once per
layer with that layer's constant weights) merge too: for a graph function whose
matmuls group on parameters (static 2-D annotations), a copy
``<name>_merged_weights`` takes one extra parameter per group (the joined
weight) and its group members become slices of one matmul; every call whose
grouped arguments are all constants calls the copy instead, passing the
constants joined at build time. The original function is left as it was (other
callers and the VM's entry points keep its signature); DeadCodeElimination
drops it from a build once nothing reaches it.

Block-quantized constant weights merge the same way: ``R.matmul(x, w_i)`` with
``w_i = R.dequantize(data_i, scale_i[, min_i], format=f)`` of constants (one
format, one depth) becomes one matmul of ``R.dequantize`` of the arrays joined
along their columns. Blocks run along rows (``quantization.formats``: every
array is ``(row blocks..., cols)``), so a column of each array belongs to one
output column and the join is exact; the dequantize still fuses into the
generated GEMV/GEMM.

Left operands rounded to 8-bit activations (``QuantizeActivations`` puts one ``R.fake_quantize`` of
``x`` in front of each quantized matmul) count as one when they round the same var to the same format:
the merged matmul reads the first member's rounded value, and the other roundings are left for
DeadCodeElimination. So gate and up of a quantized MLP merge into one product whose halves meet in
``silu(gate) * up``, which FuseOps makes that product's pair epilogue
(``fuse_partition.pair_epilogue_group``): one kernel launch for both.

Not merged: the same weight twice in a group (nothing to gain), weights whose
shapes are not static, matmuls whose left operand is not a var, and groups
whose merged weight would exceed ``max_elements`` elements.
"""
from __future__ import annotations

import numpy as np

from tensorir import expr as tir
from tensorir.dispatch import handles

from ..expr import Call, Constant, Function, GlobalVar, Op, Var, VarBinding
from ..expr_functor import ExprMutator, ExprVisitor, PassMutator
from ..irmodule import IRModule
from ..struct_info import TensorStructInfo
from ..struct_info_util import symbolic_vars_of
from .. import op
from .pass_infra import Pass
from .symbolic_params import fresh_copies

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
        return merge_module(mod, self.max_elements)[0]


def merge_module(mod: IRModule, max_elements: int = DEFAULT_MAX_ELEMENTS) -> tuple[IRModule, int]:
    """The merged module and the number of groups merged (for reports)."""
    variants = {}
    for name, func in list(mod.relax_functions.items()):
        groups = _param_groups(func)
        if not groups:
            continue
        joined = {members: Var(f"merged_weight{i}", _joined_sinfo(members)) for i, members in enumerate(groups)}
        variant_params = (*func.params, *joined.values())
        variant = Function(variant_params, func.body, func.ret_struct_info, func.is_pure, func.attrs,
                           func.is_private)
        renewer = _Renewer(variant)
        variant = renewer.visit(variant)
        joined = {tuple(renewer.var_remap[p] for p in members): renewer.var_remap[var]
                  for members, var in joined.items()}
        variant = _Merger(mod, max_elements, joined).visit(variant)
        positions = [tuple(func.params.index(p) for p in members) for members in groups]
        variant_name = f"{name}_merged_weights"
        while variant_name in mod:
            variant_name += "_"
        mod = mod.with_function(variant_name, variant)
        variants[name] = (mod.get_global_var(variant_name), positions)
    merger = _Merger(mod, max_elements, variants=variants)
    merged = merger.transform_module(mod)
    groups = merger.groups
    for name, (variant_gv, positions) in variants.items():
        if merger.calls_redirected.get(name):
            groups += len(positions)
        else:  # no caller passes constants: the copy would serve nobody
            merged = merged.without_function(variant_gv.name_hint)
    return merged, groups


def _static_matrix(sinfo) -> bool:
    return (isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and len(sinfo.shape) == 2
            and all(isinstance(d, tir.IntImm) for d in sinfo.shape))


def _joined_sinfo(members: tuple) -> TensorStructInfo:
    shapes = [tuple(int(d.value) for d in p.struct_info.shape) for p in members]
    return TensorStructInfo((shapes[0][0], sum(s[1] for s in shapes)), members[0].struct_info.dtype)


def _matmul_parts(binding):
    """(lhs, rhs, out_dtype) of a ``matmul(var, rhs)`` binding, or None."""
    value = binding.value
    if not (isinstance(binding, VarBinding) and isinstance(value, Call) and isinstance(value.op, Op)
            and value.op.name == "relax.matmul"):
        return None
    lhs, rhs = value.args
    if not isinstance(lhs, Var) or lhs.struct_info.ndim < 1:
        return None
    return lhs, rhs, value.attrs.get("out_dtype")


def _rounded_sources(bindings) -> dict:
    """var -> (source var, format) for the bindings ``var = R.fake_quantize(source, format=...)``:
    two of them with one key hold the same values."""
    found = {}
    for binding in bindings:
        value = binding.value
        if isinstance(binding, VarBinding) and isinstance(value, Call) and isinstance(value.op, Op) and \
                value.op.name == "relax.fake_quantize" and isinstance(value.args[0], Var):
            found[binding.var] = (value.args[0], value.attrs["format"])
    return found


def _groups(bindings, weight_of) -> list[list]:
    """Groups (binding order) of [(binding var, weight source), ...] with at least two
    distinct sources; ``weight_of(rhs)`` gives (source, dtype, K) or None. Left operands that
    round one var to one format (``_rounded_sources``) group together."""
    by_key: dict[tuple, list] = {}
    rounded = _rounded_sources(bindings)
    for binding in bindings:
        parts = _matmul_parts(binding)
        weight = parts and weight_of(parts[1])
        if not weight:
            continue
        source, dtype, depth = weight
        lhs = rounded.get(parts[0], parts[0])
        members = by_key.setdefault((lhs, type(source), dtype, depth, parts[2]), [])
        if all(s is not source for _, s in members):
            members.append((binding.var, source))
    return [members for members in by_key.values() if len(members) >= 2]


def _param_groups(func: Function) -> list[tuple]:
    """Groups of parameters used as right operands of matmuls sharing a left operand."""
    eligible = {p for p in func.params if _static_matrix(p.struct_info)}

    def weight_of(rhs):
        return (rhs, rhs.struct_info.dtype, int(rhs.struct_info.shape[0].value)) if rhs in eligible else None
    found, used = [], set()
    for block in func.body.blocks:
        for members in _groups(block.bindings, weight_of):
            params = tuple(source for _, source in members)
            if used.isdisjoint(params):  # a parameter joins one group only
                found.append(params)
                used.update(params)
    return found


class _Merger(PassMutator):
    def __init__(self, mod: IRModule, max_elements: int, joined: dict | None = None, variants: dict | None = None):
        super().__init__(mod)
        self.max_elements = max_elements
        self.joined = joined or {}        # group of parameters -> the variant's joined-weight parameter
        self.variants = variants or {}    # callee name -> (variant GlobalVar, groups as parameter positions)
        self.constant_of: dict[Var, Constant] = {}
        self.quantized_of: dict[Var, _QuantizedWeight] = {}
        self.groups = 0  # merged groups of constants, for reports
        self.calls_redirected: dict[str, int] = {}  # callee name -> calls now going to its variant

    def visit_block_bindings(self, block) -> None:
        plan = self._plan(block.bindings)
        for binding in block.bindings:
            member = plan.get(binding.var)
            if member is None:
                self.visit_binding(binding)
                continue
            group, offset, width = member
            if group.merged is None:
                weight = group.weight
                if isinstance(weight, Call):   # a joined quantized weight: bound, so it prints as a step
                    weight = self.builder.emit(weight, "merged_weight")
                group.merged = self.builder.emit(
                    op.matmul(self.visit_expr(group.lhs), weight, group.out_dtype), "merged_matmul")
            last = group.merged.struct_info.ndim - 1
            sliced = op.strided_slice(group.merged, [last], [offset], [offset + width], [1])
            self.var_remap[binding.var] = self._rebind(binding.var, self.visit_expr(sliced))

    def _plan(self, bindings) -> dict:
        """Each merged binding's var -> (group, column offset, width)."""
        for binding in bindings:
            if isinstance(binding, VarBinding) and isinstance(binding.value, Constant):
                self.constant_of[binding.var] = binding.value
            quantized = isinstance(binding, VarBinding) and self._quantized(binding)
            if quantized:
                self.quantized_of[binding.var] = quantized
        plan = {}
        for members in _groups(bindings, self._weight_of):
            sources = tuple(source for _, source in members)
            widths = [self._width(source) for source in sources]
            if isinstance(sources[0], np.ndarray):
                if sum(s.size for s in sources) > self.max_elements:
                    continue
                weight = Constant(np.concatenate(sources, axis=1))
                self.groups += 1
            elif isinstance(sources[0], _QuantizedWeight):
                if sum(s.depth * s.width for s in sources) > self.max_elements:
                    continue
                weight = _QuantizedWeight.joined(sources)
                self.groups += 1
            elif sources in self.joined:
                weight = self.joined[sources]
            else:
                continue
            lhs, _, out_dtype = _matmul_parts(next(b for b in bindings if b.var is members[0][0]))
            group = _Group(lhs, weight, out_dtype)
            offset = 0
            for (var, _), width in zip(members, widths):
                plan[var] = (group, offset, width)
                offset += width
        return plan

    def _quantized(self, binding):
        """A ``dequantize`` of constants (or vars bound to them) as a ``_QuantizedWeight``, else None."""
        value = binding.value
        if not (isinstance(value, Call) and isinstance(value.op, Op) and value.op.name == "relax.dequantize"):
            return None
        arrays = []
        for arg in value.args:
            arg = self.constant_of.get(arg, arg) if isinstance(arg, Var) else arg
            if not isinstance(arg, Constant) or arg.data.ndim < 1:
                return None
            arrays.append(arg.data)
        sinfo = binding.var.struct_info
        if not _static_matrix(sinfo):
            return None
        depth, width = (int(d.value) for d in sinfo.shape)
        if any(a.shape[-1] != width for a in arrays):
            return None
        return _QuantizedWeight(value.attrs["format"], tuple(arrays), depth, width)

    @staticmethod
    def _width(source) -> int:
        if isinstance(source, _QuantizedWeight):
            return source.width
        if isinstance(source, np.ndarray):
            return source.shape[1]
        return int(source.struct_info.shape[1].value)

    def _weight_of(self, rhs):
        """(source, dtype, K) for a constant 2-D right operand, a dequantize of constants
        (dtype: the format) or a parameter the variant joins."""
        if isinstance(rhs, Var) and rhs in self.quantized_of:
            source = self.quantized_of[rhs]
            return source, source.format, source.depth
        if isinstance(rhs, Var) and rhs in self.constant_of:
            rhs = self.constant_of[rhs]
        if isinstance(rhs, Constant):
            data = rhs.data
            return (data, data.dtype.str, data.shape[0]) if data.ndim == 2 else None
        if isinstance(rhs, Var) and any(rhs in group for group in self.joined):
            return rhs, rhs.struct_info.dtype, int(rhs.struct_info.shape[0].value)
        return None

    @handles(Call)
    def visit_Call(self, call: Call):
        new = self.generic_visit(call)
        if not (isinstance(new.op, GlobalVar) and new.op.name_hint in self.variants):
            return new
        variant, positions = self.variants[new.op.name_hint]
        joined = []
        for group in positions:
            values = [self._constant_arg(new.args[i]) for i in group]
            if any(v is None for v in values):
                return new
            joined.append(Constant(np.concatenate(values, axis=1)))
        name = new.op.name_hint
        self.calls_redirected[name] = self.calls_redirected.get(name, 0) + 1
        return Call(variant, [*new.args, *joined], new.attrs, new.sinfo_args)

    def _constant_arg(self, arg):
        if isinstance(arg, Var):
            arg = self.builder.lookup_binding(arg) or arg
        return arg.data if isinstance(arg, Constant) else None


class _SymbolicVars(ExprVisitor):
    def __init__(self):
        super().__init__()
        self.found: dict[tir.Var, None] = {}

    def visit_symbolic_var(self, var: tir.Var) -> None:
        self.found[var] = None

    def visit_struct_info(self, sinfo) -> None:
        self.found.update(dict.fromkeys(symbolic_vars_of(sinfo)))

    def visit_var_def(self, var: Var) -> None:
        self.visit_struct_info(var.struct_info)


class _Renewer(ExprMutator):
    """A copy of a function with its own graph and symbolic variables (a variable belongs to
    one function)."""

    def __init__(self, func: Function):
        super().__init__()
        symbols = _SymbolicVars()
        symbols.visit(func)
        self.var_remap.update(fresh_copies(symbols.found))

    def visit_var_def(self, var: Var) -> Var:
        new = type(var)(var.name_hint, self.visit_value(var.struct_info))
        self.var_remap[var] = new
        return new


class _QuantizedWeight:
    """The constant arrays of one ``R.dequantize`` (a (depth, width) float32 matrix)."""
    __slots__ = ("format", "arrays", "depth", "width")

    def __init__(self, format_name: str, arrays: tuple, depth: int, width: int):
        self.format, self.arrays, self.depth, self.width = format_name, arrays, depth, width

    @staticmethod
    def joined(members) -> Call:
        """``R.dequantize`` of the members' arrays joined along their columns (the last axis)."""
        arrays = [Constant(np.concatenate([m.arrays[i] for m in members], axis=-1))
                  for i in range(len(members[0].arrays))]
        scale_min = arrays[1:] if len(arrays) == 3 else arrays[1:] + [None]
        return op.dequantize(arrays[0], *scale_min, format=members[0].format)


class _Group:
    __slots__ = ("lhs", "weight", "out_dtype", "merged")

    def __init__(self, lhs: Var, weight, out_dtype):
        self.lhs, self.weight, self.out_dtype = lhs, weight, out_dtype
        self.merged = None  # the merged matmul's var, once emitted


__all__ = ["MergeParallelMatmul", "merge_module"]
