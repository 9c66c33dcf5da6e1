"""Printer of graph-level IR to the script form (``mod.script()``).

The text parses back (``rx.from_source``) to a structurally equal module and
printing is a fixpoint. Every binding shows its annotation; symbolic
variables are declared once at the top of each function body; signatures
write symbolic dimensions as strings so the text is also valid Python.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.function import PrimFunc
from tensorir.functor import collect
from tensorir.script.printer import function_name

from .. import expr as rx
from ..irmodule import GLOBAL_INFOS, IRModule
from ..struct_info import PrimStructInfo, StructInfo
from .annotations import format_struct_info as _format_sinfo
from .constants import format_metadata
from .expr_printer import ExprPrinter, member_name
from .ir_namespace import VDevice
from .naming import Namer

HEADER = "# from relaxscript import R\n# from tensorir import T\n"
INDENT = "    "


def print_module(mod: IRModule) -> str:
    """The script text of a whole module."""
    constants: list = []
    lines = [HEADER, "@R.ir_module", "class Module:"]
    attrs = {k: v for k, v in mod.attrs.items() if k != GLOBAL_INFOS}
    if attrs:
        lines.append(f"{INDENT}R.module_attrs({ExprPrinter.python_literal(attrs)})")
    if mod.global_infos:
        lines.append(f"{INDENT}I.module_global_infos({_global_infos(mod.global_infos)})")
    for index, (name, func) in enumerate(mod.functions.items()):
        if index or mod.attrs:
            lines.append("")
        lines.append(_print_member(func, member_name(name), constants, in_module=True))
    if not mod.functions and not mod.attrs:
        lines.append(f"{INDENT}pass")
    if constants:
        lines += ["", format_metadata(constants)]
    return "\n".join(lines) + "\n"


def _global_infos(infos: dict) -> str:
    def item(info):
        if isinstance(info, VDevice):
            return (f"I.vdevice({ExprPrinter.python_literal(info.target)}, {info.vdevice_id!r}, "
                    f"{ExprPrinter.python_literal(info.memory_scope)})")
        return ExprPrinter.python_literal(info)
    entries = [f"{ExprPrinter.python_literal(k)}: [{', '.join(item(i) for i in v)}]" for k, v in infos.items()]
    return "{" + ", ".join(entries) + "}"


def print_function(func, name: str = "main") -> str:
    """The script text of one function, as a free-standing ``@R.function``
    (references to other functions print as bare names)."""
    constants: list = []
    # A free-standing function's name is only its label (a global_symbol may hold any text).
    body = _print_member(func, function_name(name), constants, in_module=False, indent="")
    text = f"{HEADER}\n{body}\n"
    if constants:
        text += "\n" + format_metadata(constants) + "\n"
    return text


def format_struct_info(sinfo: StructInfo, signature: bool = False) -> str:
    """``R.Tensor((n, 4), dtype="float32")`` etc.; symbolic vars by their names."""
    return _format_sinfo(sinfo, None, signature)


def format_expr(expr: rx.Expr) -> str:
    """One expression in script syntax (variables by their name hints)."""
    namer = Namer()
    constants: list = []
    printer = ExprPrinter(lambda node, hint: namer.name(node, hint), constants, in_module=True)
    text = printer.expr(expr)
    return text if not constants else f"{text}  # with {len(constants)} metadata constant(s)"


def _print_member(func, name: str, constants: list, in_module: bool, indent: str = INDENT) -> str:
    if isinstance(func, PrimFunc):
        return _print_prim_func(func, name, indent)
    if isinstance(func, rx.Function):
        return FunctionPrinter(constants, in_module).print(func, name, indent)
    raise TypeError(f"cannot print module member {name!r} of type {type(func).__name__}")


def _print_prim_func(func: PrimFunc, name: str, indent: str) -> str:
    from tensorir.script.printer import print_prim_func
    text = print_prim_func(func, name, indent=len(indent)).rstrip("\n")
    if not text.lstrip().startswith("@"):
        text = f"{indent}@T.prim_func\n{text}"
    return text


class FunctionPrinter:
    def __init__(self, constants: list, in_module: bool):
        self.constants = constants
        self.in_module = in_module
        self.namer = Namer()
        self.lines: list[str] = []
        self.exprs = ExprPrinter(self.namer.name, constants, in_module)
        self.nested = False

    # ------------------------------------------------------------ function
    def print(self, func: rx.Function, name: str, indent: str) -> str:
        params = [(self.namer.name(p, p.name_hint), p) for p in func.params]
        # n: T.int64 -- a scalar parameter naming its own symbolic variable (TVM's form)
        tied = {id(p) for pname, p in params if self._tie_symbolic_var(pname, p)}
        # A nested function shares the namer: it declares only variables new to it.
        sym_vars = [v for v in _symbolic_vars(func) if self.namer.get(v) is None]
        for v in sym_vars:
            self.namer.name(v, v.name)
        signature = ", ".join(f"{pname}: T.int64" if id(p) in tied else
                              f"{pname}: {self.sinfo(p.struct_info, signature=True)}"
                              for pname, p in params)
        ret = "" if func.ret_struct_info is None else \
            f" -> {self.sinfo(func.ret_struct_info, signature=True)}"
        flags = ([] if func.is_pure else ["pure=False"]) + \
            (["private=True"] if getattr(func, "is_private", False) else [])
        decorator = f"@R.function({', '.join(flags)})" if flags else "@R.function"
        self.lines = [f"{indent}{decorator}", f"{indent}def {name}({signature}){ret}:"]
        body_indent = indent + INDENT
        if func.attrs:
            self.emit(body_indent, f"R.func_attr({ExprPrinter.python_literal(func.attrs)})")
        for v in sym_vars:
            self.emit(body_indent, f"{self.namer.get(v)} = {_declaration(v)}")
        if self.in_module and not self.nested and collect(func, lambda n: isinstance(n, rx.GlobalVar)):
            self.emit(body_indent, "cls = Module")  # as TVM's printer introduces `cls.f` references
        self.seq_blocks(func.body, body_indent)
        self.emit(body_indent, f"return {self.exprs.expr(func.body.body)}")
        return "\n".join(self.lines)

    def _tie_symbolic_var(self, pname: str, param) -> bool:
        """Whether ``param`` prints as ``pname: T.int64``: it is R.Prim(value=v) for a symbolic
        variable v of the same name that nothing named yet, declared as the parser declares
        it (plain ``T.int64()``); v then prints as the parameter's name."""
        sinfo = param.struct_info
        v = sinfo.value if isinstance(sinfo, PrimStructInfo) else None
        if not (isinstance(v, E.Var) and v.dtype == "int64" and v.name == param.name_hint == pname
                and self.namer.get(v) is None and _declaration(v) == "T.int64()"):
            return False
        self.namer.pin(v, pname)
        return True

    def emit(self, indent: str, text: str) -> None:
        self.lines.append(indent + text)

    def sinfo(self, sinfo: StructInfo, signature: bool = False) -> str:
        return _format_sinfo(sinfo, lambda v: self.namer.name(v, v.name), signature)

    # ------------------------------------------------------------ blocks
    def seq_blocks(self, seq: rx.SeqExpr, indent: str) -> None:
        for block in seq.blocks:
            if isinstance(block, rx.DataflowBlock):
                self.emit(indent, "with R.dataflow():")
                inner = indent + INDENT
                for binding in block.bindings:
                    self.binding(binding, inner)
                outputs = [self.namer.get(b.var) for b in block.bindings
                           if not isinstance(b.var, rx.DataflowVar)]
                self.emit(inner, f"R.output({', '.join(outputs)})")
            else:
                for binding in block.bindings:
                    self.binding(binding, indent)

    def binding(self, binding: rx.Binding, indent: str) -> None:
        var = binding.var
        if isinstance(binding, rx.MatchCast):
            value = self.exprs.expr(binding.value)
            target = self.namer.name(var, var.name_hint)
            self.emit(indent, f"{target} = R.match_cast({value}, {self.sinfo(binding.struct_info)})")
            return
        value = binding.value
        if isinstance(value, rx.If):
            self.if_binding(var, value, indent)
            return
        if isinstance(value, rx.Function):
            self.local_function(var, value, indent)
            return
        text = self.exprs.expr(value)
        target = self.namer.name(var, var.name_hint)
        self.emit(indent, f"{target}: {self.sinfo(var.struct_info)} = {text}")

    def if_binding(self, var: rx.Var, node: rx.If, indent: str) -> None:
        cond = self.exprs.expr(node.cond)
        # Name the result first so both branches assign the same, stable name.
        target = self.namer.name(var, var.name_hint)
        annotation = self.sinfo(var.struct_info)
        for keyword, branch in (("if " + cond, node.true_branch), ("else", node.false_branch)):
            self.emit(indent, keyword + ":")
            inner = indent + INDENT
            self.seq_blocks(branch, inner)
            self.emit(inner, f"{target}: {annotation} = {self.exprs.expr(branch.body)}")

    def local_function(self, var: rx.Var, func: rx.Function, indent: str) -> None:
        name = self.namer.name(var, var.name_hint)
        nested = FunctionPrinter(self.constants, self.in_module)
        nested.nested = True  # `cls` is already bound by the enclosing function
        nested.namer = self.namer  # one namespace: the closure sees the outer names
        nested.exprs = self.exprs
        self.lines.append(nested.print(func, name, indent))


def _symbolic_vars(func: rx.Function) -> list[E.Var]:
    """Symbolic variables used anywhere in ``func`` (nested functions included), in walk order."""
    return collect(func, lambda n: isinstance(n, E.Var))


def _declaration(v: E.Var) -> str:
    facts = []
    if v.lower != 0:
        facts.append(f"lower={v.lower!r}")
    if v.upper is not None:
        facts.append(f"upper={v.upper!r}")
    if v.multiple_of is not None:
        facts.append(f"multiple_of={v.multiple_of!r}")
    return f"T.{v.dtype}({', '.join(facts)})"


__all__ = ["print_module", "print_function", "format_struct_info", "format_expr"]
