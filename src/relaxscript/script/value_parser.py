"""Evaluation of graph-level expressions in a script (right-hand sides).

An ``ast.expr`` becomes a *script value*: a graph-level Expr, a symbolic
PrimExpr, an annotation (StructInfo), or a plain Python literal (attribute
values such as ``axis=-1``, a dtype string). Operator calls are built by the
operator's own constructor with those values, exactly as Python code would
call it; nothing in the text is executed.
"""
from __future__ import annotations

import ast
import inspect

import numpy as np

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.dispatch import ClassDispatch, handles
from tensorir.errors import ParseError

from .. import expr as rx
from ..op.layout_transform import IndexMap
from ..struct_info import PrimStructInfo, StructInfo
from . import namespace as ns
from .annotations import ANNOTATION_KINDS, AnnotationParser
from .constants import CONSTANT_KEY, METADATA_NAME
from .scope import ParseContext, Scope
from .sym_expr import SymExprParser

# R.<name> forms that are statements, not values.
STATEMENT_FORMS = ("dataflow", "output", "func_attr", "match_cast", "sym_var", "module_attrs")

# Python operators on graph-level values, as TVM's ``ExprWithOp`` defines them (``==``/``!=``
# compare identity there and ``%`` is not defined: those stay errors).
METHODS = {"astype": "astype"}
BINARY_OPS = {ast.Add: "add", ast.Sub: "subtract", ast.Mult: "multiply", ast.Div: "divide",
              ast.FloorDiv: "floor_divide", ast.Pow: "power"}
COMPARE_OPS = {ast.Lt: "less", ast.LtE: "less_equal", ast.Gt: "greater", ast.GtE: "greater_equal"}

# TVM forms this project does not implement, with the reason given in the ParseError.
OUT_OF_SCOPE = {
    "call_tir_with_grad": "gradients are not supported",
    "emit_te": "it runs TVM's TE/topi Python code while parsing; write the prim_func (or the "
               "R.* operator) instead",
    "vm.call_tir_dyn": "it is a VM-internal form; write R.call_tir",
    # closures are not run-time values here: LambdaLift passes captured values as parameters
    "make_closure": "closures are not run-time values here; write a local @R.function",
    "invoke_closure": "closures are not run-time values here; call the function",
    "invoke_pure_closure": "closures are not run-time values here; call the function",
}
OUT_OF_SCOPE_PREFIXES = {
    "dist.": "distributed tensors are not supported",
    "grad.": "gradients are not supported",
    "ccl.": "collective communication (distributed) is not supported",
}


def symbolic_of(value, name: str):
    """The symbolic variable a name means in a shape: a symbolic Var itself, or the value of
    a scalar parameter declared with it (TVM's ``n: T.int64``, printed ``n: R.Prim(value="n")``:
    one name, the graph-level value in the body and the symbolic variable in shapes)."""
    if isinstance(value, E.Var):
        return value
    sinfo = getattr(value, "struct_info", None) if isinstance(value, rx.Var) else None
    if isinstance(sinfo, PrimStructInfo) and isinstance(sinfo.value, E.Var) and sinfo.value.name == name:
        return sinfo.value
    return None


# Packed calls whose first argument is the callee (a name, or a Var bound to R.ExternFunc).
PACKED_CALLS = ("call_dps_packed", "call_pure_packed", "call_packed")


class ValueParser(ClassDispatch):
    def __init__(self, ctx: ParseContext, scope: Scope, global_vars: dict, class_names=frozenset()):
        self.ctx = ctx
        self.scope = scope
        self.global_vars = global_vars  # name -> GlobalVar of the module being parsed
        self.class_names = frozenset(class_names) | {"cls"}
        self.annotations = AnnotationParser(self.lookup_sym, self.declare_sym, ctx.error,
                                            ctx.r_names, ctx.t_names, python=self.python_value)
        self.declare_hook = None  # set by the function parser: declares a new symbolic var
        # Vars bound to R.ExternFunc("name") (id -> ExternFunc): a packed call through such a
        # variable calls that registered function (TVM: ``f = R.ExternFunc("g")``,
        # ``R.call_dps_packed(f, ...)``); the call names the function itself.
        self.extern_functions: dict[int, rx.ExternFunc] = {}

    def extern_callee(self, value):
        """The ExternFunc a packed call's callee ``value`` stands for (itself when not a Var)."""
        if isinstance(value, rx.Var) and id(value) in self.extern_functions:
            return self.extern_functions[id(value)]
        return value

    # ------------------------------------------------------------ symbolic names
    def lookup_sym(self, name: str):
        return symbolic_of(self.scope.lookup(name), name)

    def bound_by_script(self, name: str) -> bool:
        return self.scope.lookup(name) is not None or name in self.global_vars or name in self.class_names

    def python_value(self, node: ast.expr) -> tuple[bool, object]:
        """Plain Python of the decorated definition's scope, evaluated (``ParseContext.python_value``)."""
        return self.ctx.python_value(node, self.bound_by_script)

    def declare_sym(self, name: str) -> E.Var:
        if self.declare_hook is None:
            raise ParseError(f"cannot declare symbolic variable {name!r} here")
        return self.declare_hook(name)

    def sym_parser(self) -> SymExprParser:
        def lookup(name, node):
            value = self.scope.lookup(name)
            if symbolic_of(value, name) is not None:
                return symbolic_of(value, name)
            if value is not None:
                raise self.ctx.error(f"{name!r} is a graph-level value, not a symbolic variable", node)
            raise self.ctx.error(f"undefined symbolic variable {name!r}", node)
        return SymExprParser(lookup, self.ctx.error, self.ctx.t_names, python=self.python_value)

    def sym(self, node: ast.expr) -> E.PrimExpr:
        return self.sym_parser().parse(node)

    # ------------------------------------------------------------ entry points
    def expr(self, node: ast.expr) -> rx.Expr:
        """A graph-level Expr (tuples of Exprs become ``rx.Tuple``)."""
        value = self.value(node)
        if isinstance(value, rx.Expr):
            return value
        if isinstance(node, (ast.Tuple, ast.List)) and not node.elts:
            return rx.Tuple([])  # `gv = ()`: the empty tuple value
        raise self.ctx.error(f"expected a graph-level value, got {_describe(value)} "
                             f"({ast.unparse(node)})", node)

    def value(self, node: ast.expr):
        method = self.handler_for(type(node))
        try:
            if method is None:
                raise self.ctx.error(f"unsupported expression: {ast.unparse(node)}", node)
            result = method(self, node)
        except ParseError:
            found, python = self.python_value(node)   # decorator form: axis=cfg.axis, 2 * HIDDEN
            if not found:
                raise
            return python.item() if isinstance(python, np.generic) else python
        # Locate nodes built here; shared ones (variables, the single Op per name) keep theirs.
        if isinstance(result, rx.Expr) and not isinstance(result, (rx.Var, rx.GlobalVar, rx.Op)) \
                and not _has_span(result):
            result.span = self.ctx.span(node)
        return result

    # ------------------------------------------------------------ node kinds
    @handles(ast.Constant)
    def _Constant(self, node: ast.Constant):
        if node.value is None or isinstance(node.value, (bool, int, float, str)):
            return node.value
        raise self.ctx.error(f"unsupported constant {node.value!r}", node)

    @handles(ast.Name)
    def _Name(self, node: ast.Name):
        value = self.scope.lookup(node.id)
        if value is not None:
            return value
        if node.id in self.global_vars:
            return self.global_vars[node.id]
        if node.id in ("True", "False", "None"):
            return {"True": True, "False": False, "None": None}[node.id]
        raise self.ctx.error(f"undefined name {node.id!r}", node)

    @handles(ast.Attribute)
    def _Attribute(self, node: ast.Attribute):
        if isinstance(node.value, ast.Name) and node.value.id in self.class_names:
            if node.attr not in self.global_vars:
                raise self.ctx.error(f"the module has no function {node.attr!r} "
                                     f"(it has {sorted(self.global_vars)})", node)
            return self.global_vars[node.attr]
        path = self.ctx.r_path(node)
        if path is None and node.attr in ("struct_info", "ty") and self._is_graph_operand(node.value):
            # `x.struct_info` (newer TVM: `x.ty`): the annotation of a value (TVM writes
            # sinfo_args=[x.struct_info], ty_args=[x.ty])
            value = self.expr(node.value)
            if value.struct_info is None:
                raise self.ctx.error(f"{ast.unparse(node.value)} has no annotation yet", node)
            return value.struct_info
        if path in ANNOTATION_KINDS:
            return self.annotations.parse(node)
        if path is not None:
            self.check_in_scope(path, node)
            from ..op.registry import get_op
            try:
                return get_op("relax." + path)
            except ValueError:
                raise self.ctx.error(f"unknown R function 'R.{path}'", node) from None
        raise self.ctx.error(f"unsupported attribute {ast.unparse(node)}", node)

    @handles(ast.Tuple, ast.List)
    def _Tuple(self, node):
        items = [self.value(e) for e in node.elts]
        if any(isinstance(i, rx.Expr) for i in items):
            # a string among graph-level values is the value R.str would make (TVM converts it so:
            # mlc-llm's packed-call argument tuples pass activation names that way)
            items = [rx.StringImm(i) if isinstance(i, str) else i for i in items]
            for item, sub in zip(items, node.elts):
                if not isinstance(item, rx.Expr):
                    raise self.ctx.error(f"a tuple of graph-level values cannot hold {_describe(item)}", sub)
            return rx.Tuple(items)
        return items if isinstance(node, ast.List) else tuple(items)

    @handles(ast.Dict)
    def _Dict(self, node: ast.Dict):
        out = {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                raise self.ctx.error("** is not supported here", node)
            key_value = self.literal(key)
            if not isinstance(key_value, (str, int, float, bool)) and key_value is not None:
                raise self.ctx.error(f"dict keys are literals such as strings, got {ast.unparse(key)}", key)
            out[key_value] = self.literal(value)
        return out

    @handles(ast.Subscript)
    def _Subscript(self, node: ast.Subscript):
        if isinstance(node.value, ast.Subscript) and isinstance(node.value.value, ast.Name) \
                and node.value.value.id == METADATA_NAME:
            return self.metadata_constant(node)
        if self.annotations.is_annotation(node):
            return self.annotations.parse(node)
        base = self.expr(node.value)
        index = self.literal(node.slice)
        if not isinstance(index, int) or isinstance(index, bool):
            raise self.ctx.error("tuple indices must be integer literals", node.slice)
        return rx.TupleGetItem(base, index)

    @handles(ast.BinOp, ast.Compare, ast.BoolOp)
    def _BinOp(self, node):
        if isinstance(node, ast.BinOp) and self._is_graph_operand(node.left, node.right):
            return self.graph_operator(node, BINARY_OPS.get(type(node.op)), [node.left, node.right])
        if isinstance(node, ast.Compare) and self._is_graph_operand(node.left, *node.comparators):
            if len(node.ops) != 1:
                raise self.ctx.error("chained comparisons of graph-level values are not supported; "
                                     "compare two values at a time", node)
            return self.graph_operator(node, COMPARE_OPS.get(type(node.ops[0])),
                                       [node.left, node.comparators[0]])
        return self.sym(node)

    @handles(ast.UnaryOp)
    def _UnaryOp(self, node: ast.UnaryOp):
        # Negative literals stay Python numbers (attribute values such as axis=-1).
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
                and isinstance(node.operand.value, (int, float)) and not isinstance(node.operand.value, bool):
            return -node.operand.value
        if isinstance(node.op, ast.USub) and self._is_graph_operand(node.operand):
            return self.graph_operator(node, "negative", [node.operand])
        return self.sym(node)

    def _is_graph_operand(self, *nodes) -> bool:
        """Whether an operand is (syntactically) a graph-level value: a name bound to one, a
        call of an R function or module member, or an operator over such values."""
        for node in nodes:
            if isinstance(node, ast.Name):
                value = self.scope.lookup(node.id)
                if isinstance(value, rx.Expr) or (value is None and node.id in self.global_vars):
                    return True
            elif isinstance(node, ast.Call):
                if self.ctx.r_path(node.func) is not None or self._is_graph_operand(node.func):
                    return True
            elif isinstance(node, ast.Attribute):
                if isinstance(node.value, ast.Name) and node.value.id in self.class_names:
                    return True
            elif isinstance(node, ast.Subscript):
                if self._is_graph_operand(node.value):
                    return True
            elif isinstance(node, ast.BinOp):
                if self._is_graph_operand(node.left, node.right):
                    return True
            elif isinstance(node, ast.UnaryOp):
                if self._is_graph_operand(node.operand):
                    return True
        return False

    def graph_operator(self, node, op_name: str | None, operands: list) -> rx.Expr:
        """``a + b`` on graph-level values is ``R.add(a, b)`` (TVM's operator overloads)."""
        if op_name is None:
            raise self.ctx.error(f"operator {ast.unparse(node)!r} is not defined on graph-level values; "
                                 "call the R function (e.g. R.mod, R.equal)", node)
        values = []
        for operand in operands:
            value = self.value(operand)
            if not isinstance(value, rx.Expr):
                raise self.ctx.error(f"the operands of {op_name} must both be graph-level values, got "
                                     f"{_describe(value)} ({ast.unparse(operand)}); convert a number "
                                     "with R.const first", operand)
            values.append(value)
        constructor = ns.lookup_op_constructor(op_name)
        try:
            return constructor(*values)
        except (TypeError, ValueError) as err:
            raise self.ctx.error(f"R.{op_name}: {err}", node) from None

    def check_in_scope(self, path: str, node) -> None:
        reason = OUT_OF_SCOPE.get(path) or next(
            (why for prefix, why in OUT_OF_SCOPE_PREFIXES.items() if path.startswith(prefix)), None)
        if reason is not None:
            raise self.ctx.error(f"R.{path} is not supported: {reason}", node)

    @handles(ast.Lambda)
    def _Lambda(self, node: ast.Lambda, index_dtype: str = "int64"):
        """``lambda i, j: (j, i)``: an index map (R.layout_transform's ``index_map``)."""
        a = node.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or a.posonlyargs:
            raise self.ctx.error("an index map is a lambda of plain index names", node)
        params = [E.Var(arg.arg, "int64") for arg in a.args]
        by_name = {p.name: p for p in params}
        if len(by_name) != len(params):
            raise self.ctx.error("an index map names each index once", node)

        def lookup(name, at):
            if name in by_name:
                return by_name[name]
            raise self.ctx.error(f"an index map reads only its own indices, not {name!r}", at)
        parser = SymExprParser(lookup, self.ctx.error, self.ctx.t_names)
        body = node.body.elts if isinstance(node.body, (ast.Tuple, ast.List)) else [node.body]
        return IndexMap(params, [parser.parse(e) for e in body], index_dtype)

    def _t_index_map(self, node: ast.Call):
        """``T.index_map(lambda ..., index_dtype="int32")``."""
        kwargs = {k.arg: k.value for k in node.keywords}
        unknown = set(kwargs) - {"index_dtype", "inverse_index_map"}
        if len(node.args) != 1 or not isinstance(node.args[0], ast.Lambda) or unknown:
            raise self.ctx.error("T.index_map takes one lambda (and index_dtype=)", node)
        if "inverse_index_map" in kwargs:
            raise self.ctx.error("T.index_map: inverse_index_map is not supported; the inverse is "
                                 "derived from the map", node)
        dtype = "int64"
        if "index_dtype" in kwargs:
            dtype = self.value(kwargs["index_dtype"])
            if dtype not in ("int32", "int64"):
                raise self.ctx.error(f"T.index_map: index_dtype must be int32 or int64, got {dtype!r}",
                                     node)
        return self._Lambda(node.args[0], dtype)

    @handles(ast.Call)
    def _Call(self, node: ast.Call):
        func = node.func
        path = self.ctx.r_path(func)
        if path is not None:
            return self.r_call(path, node)
        if isinstance(func, ast.Attribute) and self.ctx.is_t(func.value):
            if func.attr == "index_map":
                return self._t_index_map(node)
            return self.sym(node)
        if isinstance(func, ast.Name) and func.id == "float" and self.scope.lookup("float") is None:
            return self.literal(node)
        if isinstance(func, ast.Attribute) and func.attr in METHODS and self._is_graph_operand(func.value):
            # `x.astype("float16")`: TVM's methods of graph-level values are the R functions.
            return self.call_constructor(METHODS[func.attr], ns.lookup_op_constructor(METHODS[func.attr]),
                                         node, receiver=self.expr(func.value))
        callee = self.expr(func)
        if node.keywords:
            raise self.ctx.error("calls of graph-level functions take no keyword arguments", node)
        return rx.Call(callee, [self.expr(a) for a in node.args])

    # ------------------------------------------------------------ R.<name>(...)
    def r_call(self, path: str, node: ast.Call):
        if path in ANNOTATION_KINDS:
            return self.annotations.parse(node)
        if path in STATEMENT_FORMS:
            raise self.ctx.error(f"R.{path}(...) is a statement and cannot be used as a value here", node)
        self.check_in_scope(path, node.func)
        special = getattr(self, "_r_" + path.replace(".", "__"), None)
        if special is not None:
            return special(node)
        constructor = ns.lookup_op_constructor(path)
        if constructor is None or isinstance(constructor, ns.OpGroup):
            raise self.ctx.error(f"unknown R function 'R.{path}'", node.func)
        return self.call_constructor(path, constructor, node)

    def call_constructor(self, path: str, constructor, node: ast.Call, receiver=None):
        args = ([] if receiver is None else [receiver]) + [self.value(a) for a in node.args]
        if path in PACKED_CALLS and args:
            args[0] = self.extern_callee(args[0])
        kwargs = {k.arg: self.value(k.value) for k in node.keywords}
        if any(k.arg is None for k in node.keywords) or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.ctx.error("*args/**kwargs are not supported in scripts", node)
        if "out_ty" in kwargs and "out_sinfo" not in kwargs and not _accepts(constructor, "out_ty") \
                and _accepts(constructor, "out_sinfo"):
            # newer TVM's name of out_sinfo (R.call_tir / call_dps_packed / call_tir_inplace ...)
            kwargs["out_sinfo"] = kwargs.pop("out_ty")
        if "ty_args" in kwargs and "sinfo_args" not in kwargs and not _accepts(constructor, "ty_args"):
            kwargs["sinfo_args"] = kwargs.pop("ty_args")      # the same list, TVM's other name
        sinfo_args = None
        if "sinfo_args" in kwargs and not _accepts(constructor, "sinfo_args"):
            sinfo_args = kwargs.pop("sinfo_args")
        try:
            inspect.signature(constructor).bind(*args, **kwargs)
        except TypeError as err:
            raise self.ctx.error(f"R.{path}: {err}", node) from None
        except ValueError:  # builtins without a signature: let the call decide
            pass
        try:
            result = constructor(*args, **kwargs)
        except ParseError:
            raise
        except (TypeError, ValueError, OverflowError) as err:
            message = str(err)  # constructors often name themselves already
            if not message.startswith((f"R.{path}:", f"relax.{path}:")):
                message = f"R.{path}: {message}"
            raise self.ctx.error(message, node) from None
        if sinfo_args is not None:
            result = result.replace(sinfo_args=tuple(self._sinfo_list(sinfo_args, node)))
        return result

    def _sinfo_list(self, value, node) -> list[StructInfo]:
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if not isinstance(item, StructInfo):
                raise self.ctx.error(f"sinfo_args must be annotations, got {_describe(item)}", node)
        return list(items)

    def _expect(self, node: ast.Call, name: str, positional: int, keywords=()) -> list:
        """The arguments of ``R.<name>(...)`` in order, checking arity."""
        names = list(keywords)
        args = list(node.args)
        if len(args) > len(names) or len(args) < positional and not node.keywords:
            raise self.ctx.error(f"R.{name} takes {positional} argument(s), got {len(args)}", node)
        bound = dict(zip(names, args))
        for k in node.keywords:
            if k.arg not in names or k.arg in bound:
                raise self.ctx.error(f"R.{name} got an unexpected keyword argument {k.arg!r}", k.value)
            bound[k.arg] = k.value
        missing = [n for n in names[:positional] if n not in bound]
        if missing:
            raise self.ctx.error(f"R.{name} is missing argument(s) {missing}", node)
        return [bound.get(n) for n in names]

    def _r_shape(self, node):
        (values,) = self._expect(node, "shape", 1, ("values",))
        if not isinstance(values, (ast.List, ast.Tuple)):
            raise self.ctx.error("R.shape takes a list of dimensions: R.shape([n, 4])", values)
        return rx.ShapeExpr([self.sym(v) for v in values.elts])

    def _r_prim_value(self, node):
        (value,) = self._expect(node, "prim_value", 1, ("value",))
        return rx.PrimValue(self.sym(value))

    def _r_str(self, node):
        (value,) = self._expect(node, "str", 1, ("value",))
        return rx.StringImm(self._string(value, "R.str"))

    def _r_dtype(self, node):
        """``R.dtype("float32")``: TVM's dtype value, a dtype attribute here (printed as the string)."""
        (value,) = self._expect(node, "dtype", 1, ("value",))
        try:
            return dt.normalize(self._string(value, "R.dtype"))
        except ValueError as err:
            raise self.ctx.error(f"R.dtype: {err}", value) from None

    def _r_TupleGetItem(self, node):
        """TVM's ``R.TupleGetItem(t, i)`` is ``t[i]``."""
        value, index = self._expect(node, "TupleGetItem", 2, ("tuple_value", "index"))
        index_value = self.literal(index)
        if not isinstance(index_value, int) or isinstance(index_value, bool):
            raise self.ctx.error("R.TupleGetItem takes an integer literal index", index)
        return rx.TupleGetItem(self.expr(value), index_value)

    def _r_vm__kill_object(self, node):
        """TVM's ``R.vm.kill_object(x)``: our kill of a tensor or of a storage."""
        from ..op.memory import kill_storage, kill_tensor
        from ..struct_info import TensorStructInfo
        (value,) = self._expect(node, "vm.kill_object", 1, ("obj",))
        target = self.expr(value)
        kill = kill_tensor if isinstance(target.struct_info, TensorStructInfo) else kill_storage
        return kill(target)

    def _r_builtin__stop_lift_params(self, node):
        """TVM's ``R.builtin.stop_lift_params(x)`` marks where its LiftTransformParams stops;
        nothing lifts parameters here, so it is the value itself."""
        (value,) = self._expect(node, "builtin.stop_lift_params", 1, ("x",))
        return self.expr(value)

    def _r_tuple(self, node):
        return rx.Tuple([self.expr(a) for a in node.args])

    def _r_ExternFunc(self, node):
        (symbol,) = self._expect(node, "ExternFunc", 1, ("global_symbol",))
        return rx.ExternFunc(self._string(symbol, "R.ExternFunc"))

    def _packed_parts(self, node, form: str):
        if not node.args:
            raise self.ctx.error(f"R.{form} needs the function name first", node)
        callee = self.extern_callee(self.value(node.args[0])) if isinstance(node.args[0], ast.Name) else None
        symbol = callee.global_symbol if isinstance(callee, rx.ExternFunc) \
            else self._string(node.args[0], f"R.{form}")
        sinfo_args = []
        for k in node.keywords:
            if k.arg not in ("sinfo_args", "ty_args"):  # ty_args: older TVM's spelling
                raise self.ctx.error(f"R.{form} got an unexpected keyword argument {k.arg!r}", k.value)
            sinfo_args = self._sinfo_list(self.value(k.value), k.value)
        return symbol, [self.packed_arg(a) for a in node.args[1:]], sinfo_args

    def packed_arg(self, node):
        """An argument of a packed call: literals are values there (TVM's PrimValue/StringImm)."""
        value = self.value(node)
        if isinstance(value, str):
            return rx.StringImm(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return rx.PrimValue(self.sym(node))
        if isinstance(value, E.PrimExpr):
            return rx.PrimValue(value)
        if isinstance(value, rx.Expr):
            return value
        raise self.ctx.error(f"expected a graph-level value, got {_describe(value)} "
                             f"({ast.unparse(node)})", node)

    def _r_call_packed(self, node):
        symbol, args, sinfo_args = self._packed_parts(node, "call_packed")
        return rx.Call(rx.ExternFunc(symbol), args, sinfo_args=sinfo_args)

    def _r_call_pure_packed(self, node):
        from ..op.packed import call_pure_packed
        symbol, args, sinfo_args = self._packed_parts(node, "call_pure_packed")
        if not sinfo_args:
            raise self.ctx.error("R.call_pure_packed needs sinfo_args (the result's annotation)", node)
        return call_pure_packed(symbol, *args, sinfo_args=sinfo_args)

    def _r_const(self, node):
        value, dtype = self._expect(node, "const", 1, ("value", "dtype"))
        data = self.const_data(value)
        dtype_name = None if dtype is None else self.annotations.dtype(dtype)
        try:
            return ns.const(data, dtype_name)
        except (TypeError, ValueError, OverflowError) as err:
            raise self.ctx.error(f"R.const: {err}", node) from None

    def const_data(self, node):
        if isinstance(node, ast.Subscript):
            return self.value(node)
        if isinstance(node, ast.Name) and self.scope.lookup(node.id) is None:
            found = self.ctx.py_globals.get(node.id)  # decorator form: arrays from Python
            if isinstance(found, (np.ndarray, np.generic, int, float, bool, list)):
                return found
        if not isinstance(node, ast.Constant):        # decorator form: R.const(np.ones(4))
            found, value = self.python_value(node)
            if found:
                return value
        return self.literal(node)

    def metadata_constant(self, node: ast.Subscript):
        outer = node.value
        key, index = self.literal(outer.slice), self.literal(node.slice)
        if key != CONSTANT_KEY or not isinstance(index, int):
            raise self.ctx.error(f'expected metadata["{CONSTANT_KEY}"][index]', node)
        table = self.ctx.metadata.get(CONSTANT_KEY, [])
        if not 0 <= index < len(table):
            raise self.ctx.error(f"metadata has no constant {index} ({len(table)} present; is the "
                                 "metadata section of the text missing?)", node)
        return table[index]

    # ------------------------------------------------------------ literals
    def literal(self, node: ast.expr):
        """A Python literal; ``float("nan")``/``float("inf")`` included."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" \
                and len(node.args) == 1 and isinstance(node.args[0], ast.Constant):
            text = node.args[0].value
            try:
                if not isinstance(text, str):
                    raise ValueError
                return float(text)
            except ValueError:
                raise self.ctx.error(f"float({text!r}) is not a number; write float(\"nan\"), "
                                     "float(\"inf\") or a numeric literal", node) from None
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.literal(e) for e in node.elts]
            return items if isinstance(node, ast.List) else tuple(items)
        if isinstance(node, ast.Dict):
            return self._Dict(node)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -self.literal(node.operand)
        try:
            value = ast.literal_eval(node)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            found, value = self.python_value(node)     # decorator form: axis=AXIS, eps=cfg.eps
            if not found:
                raise self.ctx.error(f"expected a literal value, got {ast.unparse(node)}", node) from None
            value = value.item() if isinstance(value, np.generic) else value
        unprintable = unprintable_literal(value)
        if unprintable is not None:
            raise self.ctx.error(f"unsupported literal {unprintable!r} of type {type(unprintable).__name__}: "
                                 "values are None, bool, int, float, str, or tuples, lists and dicts of "
                                 "them", node)
        return value

    def _string(self, node, what: str) -> str:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            raise self.ctx.error(f"{what} takes a string literal", node)
        return node.value


def _accepts(func, name: str) -> bool:
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def _has_span(node) -> bool:
    return getattr(node, "span", None) is not None


def _describe(value) -> str:
    if isinstance(value, StructInfo):
        return "an annotation"
    if isinstance(value, E.PrimExpr):
        return "a symbolic expression (wrap it: R.prim_value(...) or R.shape([...]))"
    return f"the Python value {value!r}"


def unprintable_literal(value):
    """The first part of a literal the script form cannot write (bytes, complex, set), or None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif not (item is None or isinstance(item, (bool, int, float, str))):
            return item
    return None
