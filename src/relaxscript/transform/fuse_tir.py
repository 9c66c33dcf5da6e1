"""FuseTIR: turn each call of a primitive subgraph function into one ``call_tir``.

For every function FuseOps marked ``primitive``, the prim_funcs it calls are
merged into one prim_func (``fuse_tir_merge``), named like the subgraph
function, which it replaces in the module. Each call
``cls.fused_f(x, y, R.shape([n]))`` becomes
``R.call_tir(cls.fused_f, (x, y), out_sinfo=..., tir_vars=R.shape([n]))``:
the subgraph's symbolic vars are matched against the arguments'
annotations, which gives the output annotation and the scalar values.
Afterwards the subgraph functions and the prim_funcs only they called are
removed when nothing refers to them any more. A primitive function that is
not a plain chain of ``call_tir``s is left as it is.
"""
from __future__ import annotations

from tensorir import expr as tir
from tensorir.dispatch import handles
from tensorir.function import PrimFunc
from tensorir.functor import collect

from ..expr import Call, GlobalVar, ShapeExpr
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..op.call import call_tir
from ..struct_info import TensorStructInfo, TupleStructInfo
from ..struct_info_of import signature_of
from ..struct_info_util import match_symbolic_vars, substitute_sinfo
from .fuse_ops import is_primitive
from .fuse_tir_bind import FuseTIRError
from .fuse_tir_merge import MergedKernel, UnsupportedSubgraph, merge_subgraph
from .pass_infra import Pass


class FuseTIR(Pass):
    """Merge the prim_funcs of each primitive subgraph function into one kernel."""
    name = "FuseTIR"

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        merged: dict[str, tuple] = {}
        for name, func in mod.relax_functions.items():
            if is_primitive(func):
                try:
                    merged[name] = (func, merge_subgraph(name, func, mod))
                except UnsupportedSubgraph:
                    continue
        if not merged:
            return mod
        callees = {n for func, _ in merged.values() for n in _referenced_names(func)}
        functions = {n: f for n, f in mod.functions.items() if n not in merged}
        functions.update({n: kernel.prim_func for n, (_, kernel) in merged.items()})
        rewriter = _CallRewriter(IRModule(functions, mod.attrs), merged)
        result = rewriter.run()
        return _drop_unreferenced(result, callees)


class _CallRewriter(PassMutator):
    def __init__(self, mod: IRModule, merged: dict):
        super().__init__(mod)
        self.mod = mod
        self.merged = merged

    def run(self) -> IRModule:
        return self.transform_module(self.mod)

    @handles(Call)
    def visit_Call(self, call: Call):
        new = self.generic_visit(call)
        callee = new.op
        if not (isinstance(callee, GlobalVar) and callee.name_hint in self.merged):
            return new
        func, kernel = self.merged[callee.name_hint]
        return self._as_call_tir(callee.name_hint, func, kernel, new)

    def _as_call_tir(self, name: str, func, kernel: MergedKernel, call: Call):
        args = [self.builder.normalize(a) for a in call.args]
        if len(args) != len(func.params):
            raise FuseTIRError(f"call of {name!r} passes {len(args)} argument(s), "
                               f"the function takes {len(func.params)}")
        bindings = match_symbolic_vars(TupleStructInfo([p.struct_info for p in func.params]),
                                       TupleStructInfo([a.struct_info for a in args]),
                                       self.builder.analyzer)
        missing = [v.name for v in kernel.scalar_vars if v not in bindings]
        ret = signature_of(func).ret
        missing += [v.name for v in collect(ret, _is_tir_var) if v not in bindings and v.name not in missing]
        if missing:
            raise FuseTIRError(f"call of {name!r}: the arguments' annotations do not determine "
                               f"symbolic var(s) {', '.join(missing)}")
        tensors = [a for a, p in zip(args, func.params) if isinstance(p.struct_info, TensorStructInfo)]
        out_sinfo = substitute_sinfo(ret, bindings)
        out_sinfo = list(out_sinfo.fields) if isinstance(out_sinfo, TupleStructInfo) else out_sinfo
        tir_vars = ShapeExpr([bindings[v] for v in kernel.scalar_vars]) if kernel.scalar_vars else None
        return call_tir(self.mod.get_global_var(name), tensors, out_sinfo, tir_vars)


def _is_tir_var(node) -> bool:
    return isinstance(node, tir.Var)


def _referenced_names(node) -> set[str]:
    return {g.name_hint for g in collect(node, lambda n: isinstance(n, GlobalVar))}


def _drop_unreferenced(mod: IRModule, candidates: set[str]) -> IRModule:
    """Remove the prim_funcs in ``candidates`` that no graph-level function refers to."""
    used = set()
    for func in mod.relax_functions.values():
        used |= _referenced_names(func)
    functions = {n: f for n, f in mod.functions.items()
                 if not (n in candidates and isinstance(f, PrimFunc) and n not in used)}
    return IRModule(functions, mod.attrs)


__all__ = ["FuseTIR", "FuseTIRError"]
