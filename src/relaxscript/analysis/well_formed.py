"""Well-formedness of graph-level IR.

Checks, reporting every problem found (not just the first):
- every variable use is preceded by its definition in an enclosing scope;
  DataflowVars are used only inside their dataflow block and bound only there;
- no variable is bound twice;
- every symbolic variable used in a body annotation, shape value or output
  annotation is defined by a parameter annotation or an earlier match_cast
  (a later match_cast is reported as "used before");
- a declared return annotation uses only symbolic vars of the parameters;
- dataflow blocks contain no impure calls (impure operators, impure functions,
  extern functions);
- every expression has an annotation (with ``check_struct_info``);
- every GlobalVar names a function of the module.

``located_problems`` pairs each problem with the source span of the binding
where it was found (``(file, line, col, source_line)`` as the script parser
records it, or None), so the parser can point at the user's line.
"""
from __future__ import annotations

from tensorir import expr as tir
from tensorir.dispatch import handles
from tensorir.errors import IRError

from ..expr import (Call, DataflowBlock, DataflowVar, Expr, Function, GlobalVar, MatchCast, Op,
                    PrimValue, SeqExpr, ShapeExpr, Var)
from ..irmodule import IRModule
from ..expr_functor import ExprVisitor
from ..struct_info import FuncStructInfo
from ..struct_info_of import signature_of
from ..struct_info_util import symbolic_vars_of


def free_symbolic_vars(node) -> list[tir.Var]:
    """Symbolic vars of an annotation, except those a Callable annotation binds itself."""
    if isinstance(node, FuncStructInfo):
        own = set(symbolic_vars_of(node.params or ()))
        return [v for v in symbolic_vars_of(node.ret) if v not in own]
    if isinstance(node, (tuple, list)):
        return [v for item in node for v in free_symbolic_vars(item)]
    if node is None or isinstance(node, tir.PrimExpr):
        return symbolic_vars_of(node) if node is not None else []
    out = []
    for field in node._fields:
        out.extend(free_symbolic_vars(getattr(node, field)))
    return out


class _WellFormedChecker(ExprVisitor):
    def __init__(self, mod: IRModule | None, check_struct_info: bool):
        self.mod = mod
        self.check_struct_info = check_struct_info
        self.problems: list[str] = []
        self.located: list[tuple[str, tuple | None]] = []  # (message, span of the binding)
        self.span = None
        self.where = ""
        self.visible: set[Var] = set()
        self.bound: set[Var] = set()
        self.dataflow_done: set[Var] = set()   # DataflowVars whose block has ended
        self.symbolic: list[set] = []          # scopes of defined symbolic vars
        self.cast_defined: set = set()         # symbolic vars some match_cast defines
        self.in_dataflow = False

    def report(self, message: str) -> None:
        self.problems.append(f"{self.where}: {message}" if self.where else message)
        self.located.append((message, self.span))

    # ---------------------------------------------------------------- scopes
    def check_function(self, name: str, func: Function) -> None:
        self.where = f"function '{name}'"
        self.visible, self.bound, self.dataflow_done = set(), set(), set()
        self.visit(func)

    def visit(self, node):
        if self.check_struct_info and isinstance(node, Expr) and not isinstance(node, Op) \
                and node.struct_info is None:
            self.report(f"{type(node).__name__} {_describe(node)} has no annotation")
        return super().visit(node)

    @handles(Function)
    def visit_Function(self, func: Function) -> None:
        saved_cast, saved_visible = self.cast_defined, set(self.visible)
        self.cast_defined = {v for b in _all_match_casts(func.body) for v in symbolic_vars_of(b.struct_info)}
        self.symbolic.append(set())
        for param in func.params:  # parameter annotations define symbolic vars for each other
            self.symbolic[-1].update(symbolic_vars_of(param.struct_info))
        for param in func.params:
            self.visit_var_def(param)
        if func.ret_struct_info is not None and self.check_struct_info:
            param_vars = self.symbolic[-1]
            for v in free_symbolic_vars(func.ret_struct_info):
                if v not in param_vars and not self._outer_defined(v):
                    self.report(f"return annotation uses symbolic var '{v.name}' that no parameter defines")
        self.visit(func.body)
        self.symbolic.pop()
        self.cast_defined, self.visible = saved_cast, saved_visible

    def _outer_defined(self, var) -> bool:
        return any(var in scope for scope in self.symbolic[:-1])

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq: SeqExpr) -> None:
        saved_visible = set(self.visible)
        self.symbolic.append(set())
        super().visit_SeqExpr(seq)
        self.symbolic.pop()
        self.visible = saved_visible

    def visit_block(self, block) -> None:
        is_dataflow = isinstance(block, DataflowBlock)
        saved, self.in_dataflow = self.in_dataflow, is_dataflow
        super().visit_block(block)
        self.in_dataflow = saved
        if is_dataflow:
            ended = {b.var for b in block.bindings if isinstance(b.var, DataflowVar)}
            self.visible -= ended
            self.dataflow_done |= ended

    def visit_binding(self, binding) -> None:
        saved = self.span
        self.span = _span_of(binding) or saved
        self.visit(binding.value)
        if isinstance(binding, MatchCast):
            self.symbolic[-1].update(symbolic_vars_of(binding.struct_info))
        self.visit_var_def(binding.var)
        self.span = saved

    # ---------------------------------------------------------------- definitions and uses
    def visit_var_def(self, var: Var) -> None:
        if var in self.bound:
            self.report(f"variable '{var.name_hint}' is bound more than once")
        self.bound.add(var)
        if isinstance(var, DataflowVar) and not self.in_dataflow:
            self.report(f"DataflowVar '{var.name_hint}' is bound outside a dataflow block")
        if var.struct_info is None:
            if self.check_struct_info:
                self.report(f"variable '{var.name_hint}' has no annotation")
        elif self.check_struct_info:
            self._check_symbolic(var.struct_info, f"the annotation of '{var.name_hint}'")
        self.visible.add(var)

    def visit_var_use(self, var: Var) -> None:
        if var in self.visible:
            return
        if var in self.dataflow_done:
            self.report(f"dataflow var '{var.name_hint}' is used outside its dataflow block")
        else:
            self.report(f"variable '{var.name_hint}' is used but not defined")

    def _check_symbolic(self, node, what: str) -> None:
        for v in free_symbolic_vars(node):
            if any(v in scope for scope in self.symbolic):
                continue
            if v in self.cast_defined:
                self.report(f"symbolic var '{v.name}' in {what} is used before the match_cast that defines it")
            else:
                self.report(f"symbolic var '{v.name}' in {what} is not defined by any parameter "
                            "annotation or earlier match_cast")

    @handles(ShapeExpr)
    def visit_ShapeExpr(self, shape: ShapeExpr) -> None:
        self._check_symbolic(shape.values, f"shape value {_describe(shape)}")

    @handles(PrimValue)
    def visit_PrimValue(self, prim: PrimValue) -> None:
        self._check_symbolic(prim.value, "a prim value")

    @handles(GlobalVar)
    def visit_GlobalVar(self, gvar: GlobalVar) -> None:
        if self.mod is not None and gvar.name_hint not in self.mod:
            self.report(f"GlobalVar '{gvar.name_hint}' names no function in the module")

    @handles(Call)
    def visit_Call(self, call: Call) -> None:
        if self.in_dataflow and not self._is_pure(call):
            self.report(f"impure call of {_describe(call.op)} inside a dataflow block")
        self.visit(call.op)
        for arg in call.args:
            self.visit(arg)
        if self.check_struct_info:
            self._check_symbolic(call.sinfo_args, f"the output annotation of a call of {_describe(call.op)}")

    def _is_pure(self, call: Call) -> bool:
        callee = call.op
        if isinstance(callee, Op):
            from ..op.registry import OpDeductionError, get_op_spec
            try:
                return get_op_spec(callee.name).pure
            except OpDeductionError:
                self.report(f"call of unknown operator {callee.name!r}")
                return True
        sinfo = callee.struct_info
        if sinfo is None and isinstance(callee, GlobalVar) and self.mod is not None and callee.name_hint in self.mod:
            sinfo = signature_of(self.mod[callee.name_hint])
        return isinstance(sinfo, FuncStructInfo) and sinfo.purity


def _span_of(binding):
    """The parser's span of a binding: on the binding, its value or its variable."""
    for node in (binding, binding.value, binding.var):
        span = getattr(node, "span", None)
        if span:
            return span
    return None


def _all_match_casts(node):
    from tensorir.functor import collect
    return collect(node, lambda n: isinstance(n, MatchCast))


def _describe(node) -> str:
    name = getattr(node, "name_hint", None) or getattr(node, "name", None) or getattr(node, "global_symbol", None)
    return f"'{name}'" if name else type(node).__name__


def _checked(mod_or_func, check_struct_info: bool) -> _WellFormedChecker:
    if isinstance(mod_or_func, IRModule):
        checker = _WellFormedChecker(mod_or_func, check_struct_info)
        for name, func in mod_or_func.relax_functions.items():
            checker.check_function(name, func)
        return checker
    if isinstance(mod_or_func, Function):
        checker = _WellFormedChecker(None, check_struct_info)
        checker.check_function(mod_or_func.attrs.get("global_symbol", "<function>"), mod_or_func)
        return checker
    raise TypeError(f"well_formed expects an IRModule or a Function, got {type(mod_or_func).__name__}")


def _problems(mod_or_func, check_struct_info: bool) -> list[str]:
    return _checked(mod_or_func, check_struct_info).problems


def located_problems(mod_or_func, check_struct_info: bool = True) -> list[tuple[str, tuple | None]]:
    """Every problem as ``(message, span)``; span is the parser's location of the binding, or None."""
    return _checked(mod_or_func, check_struct_info).located


def well_formed(mod_or_func, check_struct_info: bool = True) -> bool:
    """True when ``mod_or_func`` passes every check (see the module docstring)."""
    return not _problems(mod_or_func, check_struct_info)


def check_well_formed(mod_or_func, check_struct_info: bool = True) -> None:
    """Raise ``IRError`` listing every problem when the IR is not well-formed."""
    problems = _problems(mod_or_func, check_struct_info)
    if problems:
        raise IRError("IR is not well-formed:\n" + "\n".join(f"  - {p}" for p in problems))
