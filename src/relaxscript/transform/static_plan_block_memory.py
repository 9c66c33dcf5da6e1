"""StaticPlanBlockMemory: dynamic shape-aware memory planning (paper Algorithm 3).

Runs after CallTIRRewrite. In every function (and separately in every If
branch, so a storage made in one branch is never reused in the other) the
``R.builtin.alloc_tensor`` bindings are visited in order; each asks the
storage pool for a free storage whose size the analyzer proves equal to (or
at least) its size in bytes, else a new one; a tensor's storage returns to
the pool after the tensor's last use (see ``liveness``). The allocation
becomes ``R.memory.alloc_tensor(storage, 0, shape, dtype)`` and the storage
``R.memory.alloc_storage`` is emitted before its first tensor.

Upper bounds give a static plan: when every symbolic var of a tensor's size
has an upper bound (``T.int64(upper=...)`` or the function attribute
``relax.memory_upper_bound = {"n": 1024}``), the request is the size at the
bounds, a constant, so storages have constant sizes known ahead of time.

Escaping tensors (reachable from the result) keep ``R.builtin.alloc_tensor``.
Finally KillAfterLastUse frees each storage after its last use.
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.arith import Analyzer
from tensorir.functor import collect
from tensorir.stmt import Range

from ..block_builder import BlockBuilder
from ..expr import Function, SeqExpr, ShapeExpr, Var, VarBinding
from ..irmodule import IRModule
from ..op import memory as mem
from ..struct_info import ObjectStructInfo
from .kill_after_last_use import insert_kills, map_if_branches
from .liveness import analyze_scope, op_name
from .pass_infra import Pass, PassContext
from .storage_pool import StoragePool
from .var_bounds import UPPER_BOUND_ATTR, MemoryPlanError, var_bounds



def size_in_bytes(shape, dtype: str) -> E.PrimExpr:
    """``prod(shape) * itemsize`` of a tensor."""
    total = E.IntImm(np.dtype(dt.to_numpy(dtype)).itemsize)
    for dim in shape:
        total = dim * total
    return total


def bounds_analyzer(func: Function, name: str = "function") -> Analyzer:
    """An analyzer knowing the function's bound attributes (``relax.memory_upper_bound``,
    TVM's ``tir_var_upper_bound``/``tir_var_lower_bound``; see ``var_bounds``); facts on
    the Vars themselves are always known."""
    analyzer = Analyzer()
    bounds = var_bounds(func, name)
    if not bounds:
        return analyzer
    by_name = {v.name: v for v in collect(func, lambda n: isinstance(n, E.Var))}
    for var_name, (lower, upper) in bounds.items():
        var = by_name[var_name]
        low = max(lower if lower is not None else 0, var.lower or 0)
        if upper is not None:   # a lower bound alone only tightens the VM's entry check
            analyzer.bind(var, Range(low, upper - low + 1))
    return analyzer


def request_size(size: E.PrimExpr, analyzer: Analyzer) -> E.PrimExpr:
    """The size to plan for: the constant size at the bounds when every var is bounded."""
    size = analyzer.simplify(size)
    if isinstance(size, E.IntImm):
        return size
    upper = analyzer.const_int_bound(size)[1]
    return E.IntImm(upper) if upper is not None else size


class _Planner:
    def __init__(self, analyzer: Analyzer, builder: BlockBuilder):
        self.analyzer = analyzer
        self.builder = builder
        self.storage_count = 0

    def plan_seq(self, seq: SeqExpr) -> SeqExpr:
        blocks = map_if_branches(seq.blocks, self.plan_seq)
        bindings = [b for block in blocks for b in block.bindings]
        live = analyze_scope(bindings, seq.body)
        dead = live.dead_after()
        pool = StoragePool(self.analyzer)
        assigned = {}
        for index, binding in enumerate(bindings):
            if self._plannable(binding, live):
                shape = binding.value.args[0].values
                size = size_in_bytes(shape, binding.value.attrs["dtype"])
                token = pool.request(request_size(size, self.analyzer), index)
                token.tensors.append(binding.var)
                assigned[binding.var] = token
            for obj in dead.get(index, ()):
                if obj in assigned:
                    pool.release(assigned[obj])
        blocks = self._rewrite(blocks, assigned)
        return seq.replace(blocks=tuple(insert_kills(blocks, seq.body, self.builder)))

    @staticmethod
    def _plannable(binding, live) -> bool:
        return (isinstance(binding, VarBinding) and op_name(binding.value) == mem.BUILTIN_ALLOC_TENSOR
                and binding.var not in live.escaping and binding.var not in live.killed
                and isinstance(binding.value.args[0], ShapeExpr))

    def _rewrite(self, blocks, assigned) -> list:
        storage_vars = {}
        out = []
        for block in blocks:
            bindings = []
            for binding in block.bindings:
                token = assigned.get(binding.var) if isinstance(binding, VarBinding) else None
                if token is None:
                    bindings.append(binding)
                    continue
                if token not in storage_vars:
                    storage_vars[token] = Var(f"storage{self.storage_count}", ObjectStructInfo())
                    self.storage_count += 1
                    alloc = self.builder.normalize(mem.alloc_storage(ShapeExpr([token.size])))
                    bindings.append(VarBinding(storage_vars[token], alloc))
                old = binding.value
                view = mem.memory_alloc_tensor(storage_vars[token], 0, old.args[0], old.attrs["dtype"])
                bindings.append(VarBinding(binding.var, self.builder.normalize(view)))
            out.append(type(block)(bindings))
        return out


def plan_function(func: Function, mod: IRModule, name: str = "function") -> Function:
    planner = _Planner(bounds_analyzer(func, name), BlockBuilder(mod))
    return func.replace(body=planner.plan_seq(func.body))


class StaticPlanBlockMemory(Pass):
    """Place explicit allocations into reused storages (symbolic sizes, upper bounds)."""
    name = "StaticPlanBlockMemory"

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        functions = dict(mod.functions)
        for name, func in mod.relax_functions.items():
            functions[name] = plan_function(func, mod, f"function '{name}'")
        return IRModule(functions, mod.attrs)


__all__ = ["StaticPlanBlockMemory", "MemoryPlanError", "plan_function", "size_in_bytes",
           "bounds_analyzer", "request_size", "UPPER_BOUND_ATTR"]
