"""Evaluate the AST of a script expression into a PrimExpr.

Python literals stay Python values until an operator combines them with a
PrimExpr, so ``x * 2.0`` adopts the dtype of ``x`` (float16 stays float16)
exactly as the IR builders do; this is what lets printed literals re-parse
to the same nodes.
"""
from __future__ import annotations

import ast
import operator
from typing import Any, Callable

import numpy as np

from .. import dtype as dt
from .. import expr as E
from .. import thread_sync
from ..buffer import Buffer, Pointer
from ..dispatch import ClassDispatch, handles
from ..errors import ParseError
from ..stmt import BufferRegion, Range
from .diagnostics import SourceInfo, make_parse_error
from .literals import TargetAttr, int_literal_problem
from .namespace import DTYPE_NAMES

MISSING = object()


class LocalPointer:
    """A pointer local, ``p: T.handle("float32") = T.address_of(A[i, 0])`` (or ``T.bind(...,
    T.handle("float32"))``): the element position ``base`` in the storage of ``A``. It is no IR
    node: buffers declared over it are read as that storage (``AliasView``)."""

    def __init__(self, name: str, dtype: str, storage: Buffer, base, address):
        self.name, self.dtype, self.storage, self.base = name, dtype, storage, base
        self.address = address  # the T.address_of call it was bound to (its value as an argument)


class AliasView:
    """``V = T.decl_buffer(shape, dtype, data=p)`` over a LocalPointer: ``V[j]`` is element
    ``base + sum(j_d * stride_d)`` (row-major, or ``strides=``) of the one-dimensional view
    ``flat`` of the storage, exactly what the build's subroutine inlining makes of a pointer
    argument (``tensorir.transform.inline_subroutines``)."""

    def __init__(self, name: str, flat: Buffer, base, shape, strides):
        self.name, self.flat, self.base, self.shape, self.strides = name, flat, base, shape, strides
        self.dtype = flat.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def position(self, indices) -> list:
        from ..transform.inline_subroutines import _plus, _times, _widen
        pos = self.base
        for i, s in zip(indices, self.strides):
            pos = _plus(pos, _times(_widen(E.convert(i)), s))
        return [pos]


class AccessPtr:
    """``A.access_ptr`` before its call."""

    def __init__(self, buffer: Buffer):
        self.buffer = buffer

_BINOPS: dict[type, Callable] = {
    ast.Add: E.add, ast.Sub: E.sub, ast.Mult: E.mul, ast.Div: E.div,
    ast.FloorDiv: E.floordiv, ast.Mod: E.floormod,
    # Python's bit operators on integer expressions are TVM's bit intrinsics
    ast.LShift: lambda a, b: E.call_intrin("shift_left", a, b),
    ast.RShift: lambda a, b: E.call_intrin("shift_right", a, b),
    ast.BitAnd: lambda a, b: E.call_intrin("bitwise_and", a, b),
    ast.BitOr: lambda a, b: E.call_intrin("bitwise_or", a, b),
    ast.BitXor: lambda a, b: E.call_intrin("bitwise_xor", a, b),
}
_PY_FOLD = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
            ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod}
_CMPOPS = {ast.Eq: E.EQ, ast.NotEq: E.NE, ast.Lt: E.LT, ast.LtE: E.LE, ast.Gt: E.GT, ast.GtE: E.GE}

# T.<name>(a, b): binary helpers and their builders.
_THREAD_SYNC_CALLS = (thread_sync.STORAGE_SYNC, thread_sync.ACTIVEMASK) + thread_sync.SHUFFLES
_BINARY_FUNCS = {"max": E.max_, "min": E.min_, "floordiv": E.floordiv, "floormod": E.floormod,
                 "ceildiv": E.ceildiv}


# TVM's other names of intrinsics and helpers that are the same operation here.
_T_ALIASES = {"fabs": "abs", "nearbyint": "round", "indexdiv": "floordiv", "indexmod": "floormod",
              "ramp": "Ramp", "broadcast": "Broadcast"}


def _limit(parser, node, which: str):
    """``T.max_value("float32")`` / ``T.min_value(...)``: the dtype's largest / lowest value."""
    parser.expect_args(node, 1)
    dtype = parser.dtype(node.args[0])
    info = np.finfo(dt.to_numpy(dtype)) if dt.is_float(dtype) else np.iinfo(dt.to_numpy(dtype))
    value = info.max if which == "max" else (info.min if not dt.is_float(dtype) else -info.max)
    return E.const(float(value) if dt.is_float(dtype) else int(value), dtype)


def _truncmod(parser, node):
    """``T.truncmod(a, b)``: the remainder of the truncating division (C's ``%``)."""
    parser.expect_args(node, 2)
    a, b = E._promote_pair(parser.eval(node.args[0]), parser.eval(node.args[1]))
    if dt.is_float(a.dtype):
        return E.call_intrin("fmod", a, b)
    return a - E.div(a, b) * b


def _isfinite(parser, node):
    parser.expect_args(node, 1)
    x = parser.expr(node.args[0])
    return E.Not(E.Or(E.call_intrin("isnan", x), E.call_intrin("isinf", x)))


def _likely(parser, node):
    """``T.likely(cond)``: a branch hint; the condition itself here."""
    parser.expect_args(node, 1)
    return parser.expr(node.args[0])


def _infinity(parser, node):
    parser.expect_args(node, 1)
    return E.const(float("inf"), parser.dtype(node.args[0]))


def _node(build, arity: int = 2):
    """TVM's node constructors ``T.Add(a, b)``, ``T.Div(a, b)``, ``T.EQ(a, b)``, ``T.Not(a)``:
    the operation the printer writes with Python's operators or T.<helper>."""
    def parse(parser, node):
        parser.expect_args(node, arity)
        values = [parser.eval(a) for a in node.args]
        if arity == 1 or not any(isinstance(v, E.PrimExpr) for v in values):
            values = [parser.to_prim(v, a) for v, a in zip(values, node.args)]
        return build(*values)
    return parse


_NODE_CONSTRUCTORS = {
    "Add": _node(E.add), "Sub": _node(E.sub), "Mul": _node(E.mul),
    "Div": _node(E.div),  # C's division: truncating on integers, true division on floats
    "FloorDiv": _node(E.floordiv), "FloorMod": _node(E.floormod),
    "Min": _node(E.min_), "Max": _node(E.max_),
    **{name: _node(cls) for name, cls in (("EQ", E.EQ), ("NE", E.NE), ("LT", E.LT), ("LE", E.LE),
                                            ("GT", E.GT), ("GE", E.GE), ("And", E.And), ("Or", E.Or))},
    "Not": _node(E.Not, 1),
}


_T_SUGAR = {"max_value": lambda p, n: _limit(p, n, "max"), "min_value": lambda p, n: _limit(p, n, "min"),
            "truncmod": _truncmod, "isfinite": _isfinite, "likely": _likely, "infinity": _infinity,
            "Mod": _truncmod, **_NODE_CONSTRUCTORS}


# Parameter names of the expression helpers, for keyword arguments (TVM's spelling).
_PARAM_NAMES = {"if_then_else": ("cond", "t", "f"), "Select": ("condition", "true_value", "false_value"),
                "cast": ("x", "dtype"), "Cast": ("dtype", "value"), "Let": ("body", "where"),
                "Ramp": ("base", "stride", "lanes"), "Broadcast": ("value", "lanes"),
                "reinterpret": ("dtype", "value"),
                **{name: ("a", "b") for name in ("max", "min", "floordiv", "floormod", "ceildiv", "truncdiv")}}


def is_literal(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) or isinstance(value, bool)


def extent_between(lo, hi) -> E.PrimExpr:
    """Extent of ``[lo, hi)``, recognising the printer's ``lo + extent`` form exactly."""
    from ..structural import structural_equal
    lo, hi = E.convert(lo), E.convert(hi)
    if E.is_const_int(lo, 0):
        return hi
    if isinstance(hi, E.Add) and structural_equal(hi.a, lo, map_free_vars=False):
        return hi.b
    return E.sub(hi, lo)


class ExprParser(ClassDispatch):
    """Turns ``ast.expr`` nodes into PrimExprs.

    ``lookup(name)`` returns the value bound to a name (Var, PrimExpr,
    Buffer, Python constant) or ``MISSING``. ``t_names`` are the names that
    refer to the ``T`` namespace.
    """

    def __init__(self, source: SourceInfo, lookup: Callable[[str], Any],
                 context: Callable[[], str | None] | str | None = None,
                 t_names: frozenset[str] = frozenset({"T"})):
        self.source = source
        self.lookup = lookup
        self._context = context
        self.t_names = t_names
        self.undefined_message = "undefined name {!r}"
        self.python = None      # node -> (found, value): plain Python of a decorated definition

    # -------------------------------------------------------------- errors
    @property
    def context(self) -> str | None:
        return self._context() if callable(self._context) else self._context

    def error(self, message: str, node: ast.AST | None) -> ParseError:
        return make_parse_error(message, node, self.source, self.context)

    # -------------------------------------------------------------- entry points
    def expr(self, node: ast.expr, dtype: str | None = None) -> E.PrimExpr:
        """Evaluate to a PrimExpr; a bare literal gets ``dtype`` when given."""
        return self.to_prim(self.eval(node), node, dtype)

    def to_prim(self, value, node: ast.AST, dtype: str | None = None) -> E.PrimExpr:
        if isinstance(value, E.PrimExpr):
            return value
        if isinstance(value, Buffer):
            raise self.error(f"buffer {value.name!r} used as a scalar; index it as {value.name}[...]", node)
        if isinstance(value, str):
            return E.StringImm(value)
        if is_literal(value):
            try:
                literal = E.const(value, dtype)
            except (ValueError, TypeError, OverflowError) as err:
                raise self.error(str(err), node) from None
            problem = int_literal_problem(literal.value, literal.dtype) \
                if isinstance(literal, E.IntImm) else None
            if problem is not None:
                raise self.error(problem, node)
            return literal
        raise self.error(f"expected a scalar expression, got {type(value).__name__}", node)

    def constant(self, node: ast.AST, what: str, kinds=(int, float, str, bool)):
        """A value that must be known while parsing (dtype, name, fact, ...)."""
        try:
            value = self.eval(node) if isinstance(node, ast.expr) else node
        except ParseError:
            value = MISSING  # e.g. a name only known at run time
        if isinstance(value, (E.IntImm, E.FloatImm, E.StringImm)):
            value = value.value
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise self.error(f"{what} must be a constant {'/'.join(k.__name__ for k in kinds)}, "
                             f"got {ast.unparse(node) if isinstance(node, ast.AST) else value!r}", node)
        return value

    def dtype(self, node: ast.AST) -> str:
        name = self.constant(node, "dtype", (str,))
        try:
            return dt.normalize(name)
        except ValueError:
            raise self.error(f"unknown dtype {name!r}", node) from None

    # -------------------------------------------------------------- evaluation
    def eval(self, node: ast.expr):
        method = self.handler_for(type(node))
        try:
            if method is None:
                raise self.error(f"unsupported expression: {ast.unparse(node)}", node)
            return method(self, node)
        except ParseError:
            found, value = self.python(node) if self.python is not None else (False, None)
            if not found:       # decorator form: cfg.hidden, math.sqrt(D) evaluated in Python
                raise
            return value.item() if isinstance(value, np.generic) else value
        except (ValueError, TypeError, ZeroDivisionError, OverflowError) as err:
            raise self.error(str(err), node) from None

    @handles(ast.Constant)
    def eval_Constant(self, node: ast.Constant):
        if isinstance(node.value, int) and not isinstance(node.value, bool):
            problem = int_literal_problem(node.value)
            if problem is not None:
                raise self.error(problem, node)
        if node.value is None or isinstance(node.value, (int, float, str, bool)):
            return node.value
        raise self.error(f"unsupported constant {node.value!r}", node)

    @handles(ast.Name)
    def eval_Name(self, node: ast.Name):
        value = self.lookup(node.id)
        if value is MISSING:
            if node.id in ("True", "False"):
                return node.id == "True"
            raise self.error(self.undefined_message.format(node.id), node)
        if isinstance(value, LocalPointer):
            if not self.handles_allowed:
                raise self.error(f"{node.id!r} is a pointer: pass it to a prim_func or T.call_extern, or "
                                 f"declare a buffer over it, T.decl_buffer(shape, dtype, data={node.id})", node)
            return value.address
        if isinstance(value, E.Var) and value.dtype == "handle" and not self.handles_allowed:
            raise self.error(f"{node.id!r} is an opaque T.handle: give it a shape with "
                             f"T.match_buffer({node.id}, shape, dtype), or pass it to T.call_extern", node)
        return value

    handles_allowed = False  # set while reading the arguments of T.call_extern
    module = None  # a subroutines.ModuleScope: the module's other prim_funcs, callable by name

    @handles(ast.Tuple, ast.List)
    def eval_Tuple(self, node):
        return [self.eval(e) for e in node.elts]

    @handles(ast.BinOp)
    def eval_BinOp(self, node: ast.BinOp):
        a, b = self.eval(node.left), self.eval(node.right)
        op = type(node.op)
        if op is ast.Pow:
            if all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)) and 0 <= b <= 64:
                return a ** b   # Python's value of two int literals (2**40 as an extent), as TVMScript
            return E.call_intrin("pow", self.to_prim(a, node.left), b)
        if op not in _BINOPS:
            raise self.error(f"unsupported operator {type(node.op).__name__}", node)
        for side, sub in ((a, node.left), (b, node.right)):
            if not (is_literal(side) or isinstance(side, E.PrimExpr)):
                self.to_prim(side, sub)  # raises a precise error
        # Python folds two literals only where the IR builders would fold them the same way
        # (they leave a float % unfolded and floor a float // through math.floor(a / b)).
        if is_literal(a) and is_literal(b) and op in _PY_FOLD and not isinstance(a, bool) \
                and not isinstance(b, bool) and not (op in (ast.FloorDiv, ast.Mod) and (
                    b == 0 or isinstance(a, float) or isinstance(b, float))):
            folded = _PY_FOLD[op](a, b)
            # An int result beyond int64 stays an expression, as the IR builders keep it.
            if not isinstance(folded, int) or int_literal_problem(folded, "int64") is None:
                return folded
        return _BINOPS[op](a, b)

    @handles(ast.UnaryOp)
    def eval_UnaryOp(self, node: ast.UnaryOp):
        value = self.eval(node.operand)
        if isinstance(node.op, ast.Not):
            return E.Not(self.to_prim(value, node.operand))
        if isinstance(node.op, ast.UAdd):
            return value
        if isinstance(node.op, ast.Invert):
            return E.call_intrin("bitwise_not", self.to_prim(value, node.operand))
        if isinstance(node.op, ast.USub):
            if is_literal(value) and not isinstance(value, bool):
                return -value
            return -self.to_prim(value, node.operand)
        raise self.error("unsupported unary operator", node)

    @handles(ast.BoolOp)
    def eval_BoolOp(self, node: ast.BoolOp):
        cls = E.And if isinstance(node.op, ast.And) else E.Or
        values = [self.to_prim(self.eval(v), v) for v in node.values]
        out = values[0]
        for v in values[1:]:
            out = cls(out, v)
        return out

    @handles(ast.Compare)
    def eval_Compare(self, node: ast.Compare):
        left = self.eval(node.left)
        result = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.eval(right_node)
            if type(op) not in _CMPOPS:
                raise self.error(f"unsupported comparison {type(op).__name__}", node)
            if is_literal(left) and is_literal(right):
                left = self.to_prim(left, node.left)
            cmp = _CMPOPS[type(op)](left, right)
            result = cmp if result is None else E.And(result, cmp)
            left = right
        return result

    @handles(ast.IfExp)
    def eval_IfExp(self, node: ast.IfExp):
        return E.select(self.to_prim(self.eval(node.test), node.test), self.eval(node.body),
                        self.eval(node.orelse))

    @handles(ast.Subscript)
    def eval_Subscript(self, node: ast.Subscript):
        base = self.eval(node.value)
        if isinstance(base, AliasView):
            indices = self.index_list(node.slice)
            if len(indices) != base.ndim:
                raise self.error(f"buffer {base.name!r} has {base.ndim} dimension(s), "
                                 f"indexed with {len(indices)}", node)
            return E.BufferLoad(base.flat, base.position(self.access_indices(indices)))
        if isinstance(base, Pointer):
            raise self.error(f"{base.name!r} is a pointer (T.handle({base.dtype!r})): read and write it "
                             f"through a buffer over it, T.decl_buffer(shape, {base.dtype!r}, "
                             f"data={base.name})", node)
        if isinstance(base, Buffer):
            indices = self.index_list(node.slice)
            if len(indices) != base.ndim:
                raise self.error(f"buffer {base.name!r} has {base.ndim} dimension(s), "
                                 f"indexed with {len(indices)}", node)
            return E.BufferLoad(base, self.access_indices(indices))
        if isinstance(base, (list, tuple)):
            return base[self.constant(node.slice, "tuple index", (int,))]
        raise self.error(f"cannot index {ast.unparse(node.value)}", node)

    @handles(ast.Attribute)
    def eval_Attribute(self, node: ast.Attribute):
        if self.is_t(node.value):
            raise self.error(f"T.{node.attr} is not a value here", node)
        base = self.eval(node.value)
        if isinstance(base, Buffer) and node.attr == "access_ptr":
            return AccessPtr(base)
        if isinstance(base, Buffer) and node.attr in ("shape", "dtype", "strides", "elem_offset"):
            value = getattr(base, node.attr)
            return list(value) if isinstance(value, tuple) else value
        if isinstance(base, Buffer) and node.attr == "data":
            # the buffer's pointer: the address of its storage's first element (printed so)
            if not self.handles_allowed:
                raise self.error(f"{ast.unparse(node)} (a pointer) is usable only as a T.call_extern "
                                 "argument", node)
            storage = base.storage
            return E.address_of(E.BufferLoad(storage, [E.const(0, "int64") for _ in storage.shape]))
        raise self.error(f"unsupported attribute {ast.unparse(node)}", node)

    @handles(ast.Call)
    def eval_Call(self, node: ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and self.is_t(func.value):
            return self.call_t(func.attr, node)
        callee = self.module.callee(func, lambda n: self.lookup(n) is MISSING) \
            if self.module is not None else None
        if callee is not None:
            return self.call_subroutine(callee, node)
        if isinstance(func, ast.Attribute) and func.attr == "astype" and len(node.args) == 1 \
                and not node.keywords:
            # `x.astype("float16")`: TVM's method spelling of T.Cast
            return E.cast(self.dtype(node.args[0]), self.expr(func.value))
        if isinstance(func, ast.Attribute) and func.attr == "access_ptr":
            target = self.eval(func)
            if isinstance(target, AccessPtr):
                return self.access_ptr(target.buffer, node)
        if isinstance(func, ast.Name) and self.lookup(func.id) is MISSING:
            if func.id in ("min", "max") and len(node.args) >= 2 and not node.keywords:
                build = E.min_ if func.id == "min" else E.max_
                out = self.eval(node.args[0])
                for arg in node.args[1:]:
                    out = build(out, self.eval(arg))
                return out
            if func.id == "abs" and len(node.args) == 1:
                return E.call_intrin("abs", self.expr(node.args[0]))
            if func.id == "float" and len(node.args) == 1 and not node.keywords \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                try:  # float("nan") / float("inf"): how annotation values print non-finite floats
                    return float(node.args[0].value)
                except ValueError:
                    raise self.error(f"float({node.args[0].value!r}) is not a number", node) from None
        raise self.error(f"unknown function {ast.unparse(func)!r}", node)

    def call_subroutine(self, callee: str, node: ast.Call) -> E.CallFunc:
        """``Module.sub(args)``: a call of another prim_func of the module (see E.CallFunc)."""
        sig = self.module.signatures[callee]
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(f"a call of prim_func {callee!r} takes its arguments positionally", node)
        if len(node.args) != len(sig.params):
            raise self.error(f"prim_func {callee!r} takes {len(sig.params)} argument(s), "
                             f"got {len(node.args)}", node)
        args = []
        for (kind, dtype), arg in zip(sig.params, node.args):
            if kind in ("buffer", "handle"):
                raise self.error(f"prim_func {callee!r} takes a {'T.Buffer' if kind == 'buffer' else 'T.handle'} "
                                 "parameter: only scalars and typed pointers (T.handle(\"float32\")) pass "
                                 "between prim_funcs here", arg)
            if kind == "scalar":
                value = self.expr(arg, dtype)
                if value.dtype != dtype and dt.is_int(value.dtype) and dt.is_int(dtype) \
                        and dt.lanes(value.dtype) == 1:
                    # an index of another width (our loop variables are int64, TVM's int32)
                    value = E.cast(dtype, value)
                if value.dtype != dtype:
                    raise self.error(f"prim_func {callee!r} takes a {dtype} here, got a {value.dtype} "
                                     f"value; convert it with T.{dtype}(...)", arg)
                args.append(value)
                continue
            saved, self.handles_allowed = self.handles_allowed, True
            try:
                value = self.eval(arg)
            finally:
                self.handles_allowed = saved
            if isinstance(value, Pointer):  # a pointer parameter passed on
                value = E.address_of(E.BufferLoad(value, []))
            if not (isinstance(value, E.Call) and value.op == E.ADDRESS_OF):
                raise self.error(f"prim_func {callee!r} takes a pointer (T.handle({dtype!r})) here: pass "
                                 "T.address_of(A[i]) or A.data", arg)
            if value.args[0].buffer.dtype != dtype:
                raise self.error(f"prim_func {callee!r} takes a {dtype} pointer here, got the address of "
                                 f"a {value.args[0].buffer.dtype} element", arg)
            args.append(value)
        return E.CallFunc(sig.ret or "void", callee, args)

    def llvm_intrin(self, name: str, node: ast.Call) -> E.Call:
        """``T.call_llvm_pure_intrin(T.llvm_lookup_intrinsic_id("llvm.ctpop.i8"), *args, dtype=...)``,
        the id as a number, or the older ``T.call_llvm_pure_intrin("dtype", "llvm.name", *args)``."""
        args, kw = list(node.args), {k.arg: k.value for k in node.keywords}
        if set(kw) - {"dtype"}:
            raise self.error(f"T.{name} takes only dtype= as a keyword", node)
        if len(args) >= 2 and "dtype" not in kw and all(isinstance(a, ast.Constant) and isinstance(a.value, str)
                                                         for a in args[:2]):
            dtype, ident = self.dtype(args[0]), E.StringImm(args[1].value)
            args = args[2:]
        else:
            if "dtype" not in kw or not args:
                raise self.error(f"T.{name}(T.llvm_lookup_intrinsic_id(\"llvm.name\"), *args, dtype=...) "
                                 "needs the intrinsic and dtype=", node)
            dtype, first = self.dtype(kw["dtype"]), args.pop(0)
            if isinstance(first, ast.Call) and isinstance(first.func, ast.Attribute) \
                    and self.is_t(first.func.value) and first.func.attr == "llvm_lookup_intrinsic_id":
                self.expect_args(first, 1)
                ident = E.StringImm(self.constant(first.args[0], "LLVM intrinsic name", (str,)))
            else:
                ident = self.expr(first)
                if not (isinstance(ident, E.IntImm) and ident.dtype != "bool"):
                    raise self.error("an LLVM intrinsic is T.llvm_lookup_intrinsic_id(\"llvm.name\") "
                                     "or its numeric id", first)
        return E.Call(dtype, "tir." + name, [ident, *(self.expr(a) for a in args)])

    # -------------------------------------------------------------- T.<name>(...)
    def is_t(self, node: ast.AST) -> bool:
        return isinstance(node, ast.Name) and node.id in self.t_names

    def call_t(self, name: str, node: ast.Call):
        if name == "call_extern" and any(k.arg == "dtype" for k in node.keywords):
            # T.call_extern("name", *args, dtype="int32"): the dtype is the first parameter
            dtype = next(k.value for k in node.keywords if k.arg == "dtype")
            node = ast.copy_location(ast.Call(func=node.func, args=[dtype, *node.args],
                                              keywords=[k for k in node.keywords if k.arg != "dtype"]), node)
        name = _T_ALIASES.get(name, name)
        if (name in E.INTRINSICS or name in ("if_then_else", "Select")) \
                and any(k.arg == "dtype" for k in node.keywords):
            # older TVM printed the result dtype: T.if_then_else(c, a, b, dtype="float32")
            dtype = self.dtype(next(k.value for k in node.keywords if k.arg == "dtype"))
            plain = ast.copy_location(ast.Call(func=node.func, args=node.args,
                                               keywords=[k for k in node.keywords if k.arg != "dtype"]), node)
            return E.cast(dtype, self.call_t(name, plain))
        node = self.keywords_to_positions(name, node)
        args = node.args
        if name == "Let":
            return self.let_expr(node)
        if name in _T_SUGAR:
            return _T_SUGAR[name](self, node)
        if name in DTYPE_NAMES:
            return self.typed_literal(name, node)
        if name in E.INTRINSICS:
            self.expect_args(node, E.INTRINSICS[name])
            return E.call_intrin(name, *[self.to_prim(self.eval(a), a) for a in args])
        if name in _BINARY_FUNCS or name == "truncdiv":
            self.expect_args(node, 2)
            a, b = self.eval(args[0]), self.eval(args[1])
            if name == "truncdiv":
                a, b = E._promote_pair(a, b)
                if dt.is_float(a.dtype):
                    raise self.error("T.truncdiv takes integer operands", node)
                return E.div(a, b)
            return _BINARY_FUNCS[name](a, b)
        if name in ("if_then_else", "Select"):
            self.expect_args(node, 3)
            return E.select(self.expr(args[0]), self.eval(args[1]), self.eval(args[2]))
        if name == "cast":
            self.expect_args(node, 2)
            return E.cast(self.dtype(args[1]), self.expr(args[0]))
        if name == "Cast":
            self.expect_args(node, 2)
            return E.Cast(self.dtype(args[0]), self.expr(args[1]))
        if name == "Ramp":
            self.expect_args(node, 3)
            # a literal base or stride adopts the other's dtype, as in an arithmetic operation
            base, stride = (v if is_literal(v) else self.to_prim(v, a)
                            for v, a in ((self.eval(a), a) for a in args[:2]))
            return E.Ramp(base, stride, self.lanes(args[2], "T.Ramp"))
        if name == "Broadcast":
            self.expect_args(node, 2)
            return E.Broadcast(self.expr(args[0]), self.lanes(args[1], "T.Broadcast"))
        if name == "call_extern":
            if len(args) < 2:
                raise self.error("T.call_extern(dtype, name, *args) needs a dtype and a name", node)
            self.handles_allowed = True
            try:
                extern_args = [self.expr(a) for a in args[2:]]
            finally:
                self.handles_allowed = False
            # dtype="" is TVM's spelling of a call returning nothing (void)
            void = isinstance(args[0], ast.Constant) and args[0].value == ""
            return E.Call("void" if void else self.dtype(args[0]),
                          self.constant(args[1], "extern name", (str,)), extern_args)
        if name in ("call_llvm_pure_intrin", "call_llvm_intrin"):
            return self.llvm_intrin(name, node)
        if name == "address_of":
            self.expect_args(node, 1)
            load = self.eval(args[0])
            if isinstance(load, Buffer):  # T.address_of(A): its first element, as TVM prints it
                load = E.BufferLoad(load, [E.const(0, d.dtype) for d in load.shape])
            if not isinstance(load, E.BufferLoad):
                raise self.error("T.address_of takes a buffer element such as A[i, 0]", args[0])
            return E.address_of(load)
        if name == "undef":
            if node.args or any(k.arg != "dtype" for k in node.keywords):
                raise self.error("T.undef takes only dtype=", node)
            return E.undef(self.dtype(node.keywords[0].value) if node.keywords else "int32")
        if name == "reinterpret":
            self.expect_args(node, 2)
            return E.reinterpret(self.dtype(args[0]), self.expr(args[1]))
        if name in _THREAD_SYNC_CALLS:
            call = self.thread_sync_call(name, node)
            call.span = self.where(node)   # lowering's refusals name the line
            return call
        if name == "checked_index":
            self.expect_args(node, 2)
            index, extent = (self.expr(a) for a in args)
            for what, value, arg in (("index", index, args[0]), ("extent", extent, args[1])):
                if not dt.is_int(value.dtype):
                    raise self.error(f"T.checked_index: the {what} must be an integer, got {value.dtype}", arg)
            return E.checked_index(index, extent)
        if name in ("int", "float"):
            raise self.error(f"unknown function 'T.{name}'; use a sized type such as T.int64", node)
        raise self.error(f"unknown function 'T.{name}'", node)

    def where(self, node: ast.AST) -> str:
        """``file:line`` of ``node`` in the user's source."""
        return f"{self.source.filename}:{node.lineno + self.source.line_offset}"

    def thread_sync_call(self, name: str, node: ast.Call):
        """Barriers and warp shuffles between the threads of a block (``tensorir.thread_sync``)."""
        args = node.args
        if name == thread_sync.STORAGE_SYNC:
            self.expect_args(node, 1)
            scope = self.constant(args[0], "storage scope", (str,))
            if scope not in thread_sync.SYNC_SCOPES:
                raise self.error(f"T.{name} takes one of {', '.join(thread_sync.SYNC_SCOPES)}, got {scope!r}", args[0])
            return thread_sync.storage_sync(scope)
        if name == thread_sync.ACTIVEMASK:
            self.expect_args(node, 0)
            return thread_sync.activemask()
        self.expect_args(node, 5)
        try:
            return thread_sync.warp_shuffle(name, *[self.to_prim(self.eval(a), a) for a in args])
        except ValueError as err:
            raise self.error(str(err), node) from None

    def keywords_to_positions(self, name: str, node: ast.Call) -> ast.Call:
        """``T.if_then_else(cond=c, t=a, f=b)``: keyword arguments of the expression helpers,
        named as TVM names them, moved to their positions (``span=`` is dropped)."""
        params = _PARAM_NAMES.get(name) or (("x", "y")[:E.INTRINSICS[name]] if name in E.INTRINSICS else None)
        keywords = [k for k in node.keywords if k.arg != "span"]
        if params is None or not keywords:
            return node if len(keywords) == len(node.keywords) else \
                ast.copy_location(ast.Call(func=node.func, args=node.args, keywords=keywords), node)
        args = list(node.args)
        by_name = {}
        for k in keywords:
            if k.arg not in params or params.index(k.arg) < len(args) or k.arg in by_name:
                raise self.error(f"T.{name} got an unexpected or repeated argument {k.arg!r} "
                                 f"(its parameters: {', '.join(params)})", k.value)
            by_name[k.arg] = k.value
        for p in params[len(args):]:
            if p not in by_name:
                break
            args.append(by_name.pop(p))
        if by_name:
            raise self.error(f"T.{name} is missing an argument before {next(iter(by_name))!r}", node)
        return ast.copy_location(ast.Call(func=node.func, args=args, keywords=[]), node)

    def let_expr(self, node: ast.Call):
        """``T.Let(body, where={x: value})``: ``body`` with ``x`` replaced by ``value`` (the IR
        has no let expression; the substitution means the same). ``x`` may be a declared var
        or a new name, which then takes the value's dtype. The body is parsed with ``x`` read
        as the value, so the operator builders fold it exactly as they fold the printed result
        (substituting into an already built body left ``1 + 1`` unfolded, which printed as
        ``T.int32(1) + T.int32(1)`` and re-parsed as ``2``)."""
        if len(node.args) != 2 or not isinstance(node.args[1], ast.Dict):
            raise self.error("T.Let takes a body and where={var: value}", node)
        names = {}
        for key, value in zip(node.args[1].keys, node.args[1].values):
            known = self.lookup(key.id) if isinstance(key, ast.Name) else MISSING
            if isinstance(known, E.Var):
                var = known
            elif isinstance(key, ast.Name) and known is MISSING:
                var = None
            else:
                raise self.error("the keys of T.Let's where= are variable names", key or node)
            bound = self.expr(value, var.dtype if var is not None else None)
            var = var if var is not None else E.Var(key.id, bound.dtype)
            if bound.dtype != var.dtype:
                raise self.error(f"T.Let binds {var.name!r} ({var.dtype}) to a {bound.dtype} value", value)
            names[key.id] = bound
        outer = self.lookup
        self.lookup = lambda name: names[name] if name in names else outer(name)
        try:
            return self.expr(node.args[0])
        finally:
            self.lookup = outer

    def access_ptr(self, buf: Buffer, node: ast.Call):
        """``A.access_ptr("r", offset=k)``: the address of element ``k`` (row-major) of ``A``,
        i.e. ``T.address_of`` of that element; the access mask is checked, not kept."""
        names = ("access_mask", "ptr_type", "content_lanes", "offset", "extent")
        if len(node.args) > len(names) or any(k.arg not in names for k in node.keywords):
            raise self.error(f"{buf.name}.access_ptr takes {', '.join(names)}", node)
        given = dict(zip(names, node.args)) | {k.arg: k.value for k in node.keywords}
        if "access_mask" not in given:
            raise self.error(f'{buf.name}.access_ptr needs an access mask: "r", "w" or "rw"', node)
        mask = self.constant(given["access_mask"], "access mask", (str, int))
        if mask not in ("r", "w", "rw", 1, 2, 3):
            raise self.error(f'access mask must be "r", "w", "rw" (or 1, 2, 3), got {mask!r}', given["access_mask"])
        if self.constant(given.get("ptr_type", ast.Constant("handle")), "ptr_type", (str,)) != "handle" \
                or self.constant(given.get("content_lanes", ast.Constant(1)), "content_lanes", (int,)) != 1:
            raise self.error("access_ptr supports ptr_type=\"handle\" and content_lanes=1 only", node)
        offset = self.expr(given["offset"]) if "offset" in given else E.const(0, "int64")
        if not dt.is_int(offset.dtype):
            raise self.error("the offset of access_ptr is an integer", given["offset"])
        if "extent" in given:
            self.expr(given["extent"])  # checked for names; the pointer does not depend on it
        indices = []
        for dim in reversed(buf.shape):  # row-major unravel of the element offset
            indices.append(E.floormod(offset, dim) if len(indices) < buf.ndim - 1 else offset)
            offset = E.floordiv(offset, dim)
        return E.address_of(E.BufferLoad(buf, indices[::-1] if buf.ndim else []))

    def lanes(self, node: ast.expr, what: str) -> int:
        """A vector's lane count: a constant integer of at least 2."""
        value = self.constant(node, f"{what}'s lane count", (int,))
        if not 2 <= value <= dt.MAX_LANES:
            raise self.error(f"{what}'s lane count must be from 2 to {dt.MAX_LANES}, got {value}", node)
        return value

    def expect_args(self, node: ast.Call, count: int) -> None:
        name = ast.unparse(node.func)
        if node.keywords:
            raise self.error(f"{name} takes no keyword arguments", node)
        if len(node.args) != count:
            raise self.error(f"{name} takes {count} argument(s), got {len(node.args)}", node)

    def typed_literal(self, dtype: str, node: ast.Call):
        if len(node.args) != 1 or node.keywords:
            raise self.error(f"T.{dtype}(...) declares a symbolic variable only as a statement "
                             f"`n = T.{dtype}(...)`; in an expression give exactly one value", node)
        value = self.eval(node.args[0])
        if isinstance(value, str):
            try:
                value = float(value)  # "inf", "nan"
            except ValueError:
                raise self.error(f"T.{dtype}({value!r}) is not a number", node) from None
        if isinstance(value, E.PrimExpr):
            return E.cast(dtype, value)
        return self.to_prim(value, node, dtype)

    # -------------------------------------------------------------- indices and regions
    @staticmethod
    def index_list(node: ast.expr) -> list[ast.expr]:
        if isinstance(node, ast.Tuple):
            return list(node.elts)
        return [node]

    def access_indices(self, nodes) -> list:
        """The indices of a load or store; a slice ``lo:hi:step`` (TVM's vector access,
        ``B[i * 32:i * 32 + 32]``) is ``T.Ramp(lo, step, lanes)`` with a constant lane count
        ``ceil((hi - lo) / step)``, a scalar index where that is 1; one slice per access."""
        out = [self.slice_index(n) if isinstance(n, ast.Slice) else self.expr(n) for n in nodes]
        if sum(isinstance(n, ast.Slice) for n in nodes) > 1:
            raise self.error("a vector access slices one dimension (the others index one element)",
                             next(n for n in nodes if isinstance(n, ast.Slice)))
        return out

    def slice_index(self, node: ast.Slice) -> E.PrimExpr:
        if node.lower is None or node.upper is None:
            raise self.error("a vector access slice needs both bounds, lo:hi", node)
        lo, hi = E._promote_pair(self.eval(node.lower), self.eval(node.upper))
        step = 1 if node.step is None else self.constant(node.step, "slice step", (int,))
        extent = extent_between(lo, hi)
        if not E.is_const_int(extent):
            from ..arith import Analyzer
            extent = Analyzer().simplify(E.sub(hi, lo))
        if not E.is_const_int(extent) or step <= 0:
            raise self.error("a vector access slice spans a constant number of elements with a positive "
                             f"constant step, got {ast.unparse(node)}", node)
        lanes = max(-(-extent.value // step), 0)
        if lanes == 1:
            return lo
        if lanes < 1:
            raise self.error(f"the slice {ast.unparse(node)} selects no element", node)
        return E.Ramp(lo, E.const(step, lo.dtype), lanes)

    def region(self, node: ast.expr) -> BufferRegion:
        """``A[vi, 0:4]`` / ``A`` (whole buffer) as a BufferRegion."""
        if not isinstance(node, ast.Subscript):
            buf = self.eval(node)
            if isinstance(buf, Buffer):
                return BufferRegion.full(buf)
            raise self.error(f"expected a buffer region such as A[i, 0:4], got {ast.unparse(node)}", node)
        buf = self.eval(node.value)
        if not isinstance(buf, Buffer):
            raise self.error(f"{ast.unparse(node.value)} is not a buffer", node.value)
        indices = self.index_list(node.slice)
        if len(indices) != buf.ndim:
            raise self.error(f"buffer {buf.name!r} has {buf.ndim} dimension(s), "
                             f"region gives {len(indices)}", node)
        ranges = []
        for dim, idx in enumerate(indices):
            if isinstance(idx, ast.Slice):
                if idx.step is not None:
                    raise self.error("region slices take no step", idx)
                lo = self.expr(idx.lower) if idx.lower is not None else E.const(0, buf.shape[dim].dtype)
                hi = self.expr(idx.upper) if idx.upper is not None else buf.shape[dim]
                ranges.append(Range(lo, extent_between(lo, hi)))
            else:
                ranges.append(Range(self.expr(idx), 1))
        return BufferRegion(buf, ranges)

    def python_value(self, node: ast.expr):
        """Annotation values: literals, lists and dicts of them, or PrimExprs."""
        if isinstance(node, ast.Dict):
            out = {}
            for k, v in zip(node.keys, node.values):
                if k is None:
                    raise self.error("** is not supported in annotations", node)
                out[self.constant(k, "annotation key", (str,))] = self.python_value(v)
            return out
        if isinstance(node, (ast.List, ast.Tuple)):
            items = [self.python_value(e) for e in node.elts]
            return items if isinstance(node, ast.List) else tuple(items)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and self.is_t(node.func.value) \
                and node.func.attr == "target":
            return self.target_attr(node)
        value = self.eval(node)
        if not (value is None or isinstance(value, (int, float, str, E.PrimExpr))):
            raise self.error(f"an annotation value is a literal, a list, tuple or dict of them, "
                             f"or a scalar expression; got {ast.unparse(node)}", node)
        return value

    def target_attr(self, node: ast.Call) -> TargetAttr:
        """``T.target("llvm")`` or ``T.target({"kind": ..., ...})`` (an attribute value only)."""
        host = [k for k in node.keywords if k.arg == "host"]
        if len(node.args) != 1 or len(host) != len(node.keywords):
            raise self.error("T.target takes one target: a string such as \"llvm\" or a dict of "
                             "its fields (and host=)", node)
        spec = self.python_value(node.args[0])
        if host and isinstance(spec, str):   # T.target("cuda", host="llvm"): the dict TVM means by it
            spec = {"kind": spec, "host": self.python_value(host[0].value)}
        elif host and isinstance(spec, dict):
            spec = {**spec, "host": self.python_value(host[0].value)}
        if not isinstance(spec, (str, dict)) or (isinstance(spec, dict) and "kind" not in spec):
            raise self.error("T.target takes a string such as \"llvm\" or a dict with a \"kind\"",
                             node.args[0])
        return TargetAttr(spec)
