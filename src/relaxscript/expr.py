"""Graph-level expressions.

Every expression carries ``struct_info`` (its annotation), filled in by the
BlockBuilder's normalizer when the expression is built; passes never write
annotations by hand. Variables are binders compared up to renaming; their
annotation is part of their identity for structural equality.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from tensorir.expr import PrimExpr, convert
from tensorir.node import Node

from .struct_info import StructInfo


class Expr(Node):
    __slots__ = ("struct_info",)

    def __init__(self):
        self.struct_info = None


class Var(Expr):
    """A graph-level variable bound once (by a parameter or a binding)."""
    __slots__ = ("name_hint",)
    _binder = True
    _fields = ("struct_info",)

    def __init__(self, name_hint: str, struct_info: StructInfo | None = None):
        self.name_hint = name_hint
        self.struct_info = struct_info


class DataflowVar(Var):
    """A variable local to a dataflow block (not visible after it)."""
    __slots__ = ()


class GlobalVar(Expr):
    """Reference to a function of the enclosing IRModule, by name."""
    __slots__ = ("name_hint",)
    _attrs = ("name_hint",)

    def __init__(self, name_hint: str, struct_info: StructInfo | None = None):
        self.name_hint = name_hint
        self.struct_info = struct_info


class Op(Expr):
    """A registered operator (``relax.add``, ``relax.nn.softmax``, ``relax.call_tir``)."""
    __slots__ = ("name",)
    _attrs = ("name",)

    def __init__(self, name: str):
        self.name = name
        self.struct_info = None


class ExternFunc(Expr):
    """A function known only by its symbol (resolved at build time)."""
    __slots__ = ("global_symbol",)
    _attrs = ("global_symbol",)

    def __init__(self, global_symbol: str):
        self.global_symbol = global_symbol
        self.struct_info = None


class Constant(Expr):
    __slots__ = ("data",)
    _attrs = ("data",)

    def __init__(self, data):
        self.data = np.asarray(data)
        self.struct_info = None


class ShapeExpr(Expr):
    """A shape value ``R.shape([n, 4])``."""
    __slots__ = ("values",)
    _fields = ("values",)

    def __init__(self, values: Sequence):
        self.values = tuple(convert(v) for v in values)
        self.struct_info = None


class PrimValue(Expr):
    """A scalar value ``R.prim_value(n + 1)``."""
    __slots__ = ("value",)
    _fields = ("value",)

    def __init__(self, value):
        self.value = convert(value)
        self.struct_info = None


class StringImm(Expr):
    __slots__ = ("value",)
    _attrs = ("value",)

    def __init__(self, value: str):
        self.value = value
        self.struct_info = None


class Tuple(Expr):
    __slots__ = ("fields",)
    _fields = ("fields",)

    def __init__(self, fields: Sequence[Expr]):
        self.fields = tuple(fields)
        self.struct_info = None


class TupleGetItem(Expr):
    __slots__ = ("tuple_value", "index")
    _fields = ("tuple_value",)
    _attrs = ("index",)

    def __init__(self, tuple_value: Expr, index: int):
        self.tuple_value = tuple_value
        self.index = int(index)
        self.struct_info = None


class Call(Expr):
    """Call of an Op, a GlobalVar, a Var holding a function, or an ExternFunc.

    ``attrs`` holds an operator's non-tensor parameters as plain Python values
    (ints, floats, strings, tuples, dtypes) in a normalised form; ``sinfo_args``
    holds annotations that are arguments (the output annotation of call_tir).
    """
    __slots__ = ("op", "args", "attrs", "sinfo_args")
    _fields = ("op", "args", "sinfo_args")
    _attrs = ("attrs",)

    def __init__(self, op: Expr, args: Sequence[Expr], attrs: Mapping | None = None,
                 sinfo_args: Sequence[StructInfo] = ()):
        self.op = op
        self.args = tuple(args)
        self.attrs = dict(attrs or {})
        self.sinfo_args = tuple(sinfo_args)
        self.struct_info = None


class If(Expr):
    """``if cond: ... else: ...`` on a scalar boolean; branches are SeqExprs."""
    __slots__ = ("cond", "true_branch", "false_branch")
    _fields = ("cond", "true_branch", "false_branch")

    def __init__(self, cond: Expr, true_branch: "SeqExpr", false_branch: "SeqExpr"):
        self.cond, self.true_branch, self.false_branch = cond, true_branch, false_branch
        self.struct_info = None


class Binding(Node):
    __slots__ = ("var",)


class VarBinding(Binding):
    """``var = value``."""
    __slots__ = ("value",)
    _fields = ("var", "value")

    def __init__(self, var: Var, value: Expr):
        self.var, self.value = var, value


class MatchCast(Binding):
    """``var = R.match_cast(value, struct_info)``: a runtime-checked cast that may
    define new symbolic variables."""
    __slots__ = ("value", "struct_info")
    _fields = ("struct_info", "var", "value")

    def __init__(self, var: Var, value: Expr, struct_info: StructInfo):
        self.var, self.value, self.struct_info = var, value, struct_info


class BindingBlock(Node):
    __slots__ = ("bindings",)
    _fields = ("bindings",)

    def __init__(self, bindings: Sequence[Binding]):
        self.bindings = tuple(bindings)


class DataflowBlock(BindingBlock):
    """``with R.dataflow():`` — pure bindings; only ``R.output`` vars escape."""
    __slots__ = ()


class SeqExpr(Expr):
    """Blocks of bindings followed by a result expression."""
    __slots__ = ("blocks", "body")
    _fields = ("blocks", "body")

    def __init__(self, blocks: Sequence[BindingBlock], body: Expr):
        self.blocks = tuple(blocks)
        self.body = body
        self.struct_info = None


class Function(Expr):
    """A graph-level function. ``ret_struct_info`` is the declared return annotation.

    Symbolic variables are defined by the parameters' annotations (and by
    match_casts in the body). ``attrs`` holds ``R.func_attr`` entries;
    ``attrs["global_symbol"]`` names a public function. ``is_private`` is the script's
    ``@R.function(private=True)``: such a function is never a build's entry (vm/build.py's
    mark_entry_functions), as TVM's build drops an unreferenced private function; every pass keeps
    it on the functions it rebuilds (``pass_check.check_kept_privacy``). It is not part of
    structural equality (TVM's Expected modules mark privacy by the absence of ``global_symbol``,
    which parsed modules do not carry either).
    """
    __slots__ = ("params", "body", "ret_struct_info", "is_pure", "attrs", "is_private")
    _fields = ("params", "body", "ret_struct_info")
    _attrs = ("is_pure", "attrs")

    def __init__(self, params: Sequence[Var], body: SeqExpr, ret_struct_info: StructInfo | None = None,
                 is_pure: bool = True, attrs: Mapping | None = None, is_private: bool = False):
        self.params = tuple(params)
        self.body = body
        self.ret_struct_info = ret_struct_info
        self.is_pure = is_pure
        self.attrs = dict(attrs or {})
        self.is_private = is_private
        self.struct_info = None

    def script(self, name: str | None = None) -> str:
        """This function alone as script text, named ``name`` (default: its
        ``global_symbol`` attribute, else ``main``); ``rx.from_source`` parses it back."""
        from .script.printer import print_function
        return print_function(self, name or self.attrs.get("global_symbol", "main"))


def const_int_tuple(values: Sequence) -> tuple[PrimExpr, ...]:
    return tuple(convert(v) for v in values)
