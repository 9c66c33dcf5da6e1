"""Annotations in scripts: ``R.Tensor(...)``, ``R.Shape(...)``, ... <-> StructInfo.

Two spellings of symbolic dimensions exist. In a function signature Python
evaluates the annotation when the ``def`` runs, so dimensions are strings
(``R.Tensor(("n", 4), "float32")``, ``"n * 4"``); a string holding a single
new name declares that symbolic variable. Inside bodies annotations are
never evaluated and dimensions are written as expressions (``(n * 4,)``).
Both spellings parse everywhere; the printer uses strings in signatures.
"""
from __future__ import annotations

import ast
from typing import Callable

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.functor import collect
from tensorir.script.diagnostics import MAX_NESTING, deeper_than
from tensorir.script.literals import int_literal_problem, string_literal

from ..struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                           StructInfo, TensorStructInfo, TupleStructInfo)
from .sym_expr import SymExprParser, format_sym_expr

ANNOTATION_KINDS = ("Tensor", "Shape", "Tuple", "Callable", "Object", "Prim")
MAX_NDIM = 64  # as NumPy


# ---------------------------------------------------------------- printing
def format_struct_info(sinfo: StructInfo, name_of: Callable[[E.Var], str] | None = None,
                       signature: bool = False) -> str:
    """Script text of an annotation. ``signature=True`` writes symbolic dimensions
    as strings, the form that Python can evaluate in a ``def`` line."""
    name_of = name_of or (lambda v: v.name)

    def dim(e) -> str:
        if isinstance(e, E.IntImm) and e.dtype == "int64":
            return str(e.value)
        text = format_sym_expr(e, name_of)
        return string_literal(text) if signature else text

    def fmt(s: StructInfo) -> str:
        if isinstance(s, ObjectStructInfo):
            return "R.Object"
        if isinstance(s, TensorStructInfo):
            parts = []
            if s.shape is not None:
                parts.append(_tuple_text([dim(d) for d in s.shape]))
            elif s.ndim != -1:
                parts.append(f"ndim={s.ndim}")
            if s.dtype is not None:
                parts.append(f'dtype="{s.dtype}"')
            return f"R.Tensor({', '.join(parts)})" if parts else "R.Tensor"
        if isinstance(s, ShapeStructInfo):
            if s.values is not None:
                return f"R.Shape([{', '.join(dim(d) for d in s.values)}])"
            return f"R.Shape(ndim={s.ndim})" if s.ndim != -1 else "R.Shape"
        if isinstance(s, PrimStructInfo):
            if s.value is None:
                return f'R.Prim("{s.dtype}")'
            return f'R.Prim("{s.dtype}", value={dim(s.value)})'
        if isinstance(s, TupleStructInfo):
            return f"R.Tuple({', '.join(fmt(f) for f in s.fields)})"
        if isinstance(s, FuncStructInfo):
            params = "None" if s.params is None else f"[{', '.join(fmt(p) for p in s.params)}]"
            purity = "" if s.purity else ", purity=False"
            return f"R.Callable({params}, {fmt(s.ret)}{purity})"
        raise TypeError(f"not an annotation: {type(s).__name__}")

    return fmt(sinfo)


def _tuple_text(items: list[str]) -> str:
    return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"


# ---------------------------------------------------------------- parsing
class AnnotationParser:
    """Parses annotation AST nodes into StructInfo.

    ``lookup_sym(name)`` returns the symbolic variable bound to ``name`` or
    None; ``declare_sym(name)`` creates one (used for new names written as
    strings when ``allow_declare`` is set); ``error(message, node)`` builds a
    ParseError. ``r_names``/``t_names`` are the names of the R/T namespaces.
    """

    def __init__(self, lookup_sym, declare_sym, error, r_names=frozenset({"R"}),
                 t_names=frozenset({"T"}), python=None):
        self.python = python    # decorator form: plain Python such as HIDDEN, evaluated
        self.lookup_sym = lookup_sym
        self.declare_sym = declare_sym
        self.error = error
        self.r_names = r_names
        self.t_names = t_names
        self.allow_declare = False
        # Symbolic vars first named inside R.Callable(...) belong to that signature.
        self._callable_frames: list[dict] = []

    def parse(self, node: ast.expr, allow_declare: bool = False) -> StructInfo:
        saved, self.allow_declare = self.allow_declare, allow_declare
        try:
            return self._annotation(node)
        finally:
            self.allow_declare = saved

    def is_annotation(self, node: ast.AST) -> bool:
        """Whether ``node`` spells an annotation (``R.Tensor...``, ``R.Tuple[...]``)."""
        return self._kind(node) is not None

    # ------------------------------------------------------------ dispatch
    def _kind(self, node) -> str | None:
        target = node.func if isinstance(node, ast.Call) else node
        target = target.value if isinstance(target, ast.Subscript) else target
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                and target.value.id in self.r_names and target.attr in ANNOTATION_KINDS:
            return target.attr
        if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) \
                and target.value.id in self.r_names and target.attr == "Any":
            return "Object"  # newer TVM's name of R.Object
        return None

    def scalar_dtype(self, node) -> str | None:
        """The dtype of TVM's scalar annotation ``T.int64`` / ``T.bool`` / ``T.float16``
        (``R.Prim(dtype)``), or None when ``node`` is not one."""
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in self.t_names):
            return None
        try:
            dtype = dt.normalize(node.attr)
        except ValueError:
            return None
        # one number or bool: T.handle / T.void / vector dtypes are no graph-level scalar
        scalar = dt.lanes(dtype) == 1 and (dt.is_int(dtype) or dt.is_float(dtype) or dtype == "bool")
        return dtype if scalar else None

    def _annotation(self, node: ast.expr) -> StructInfo:
        kind = self._kind(node)
        if kind is None and self.scalar_dtype(node) is not None:
            return PrimStructInfo(self.scalar_dtype(node))
        if kind is None:
            raise self.error(f"expected an annotation such as R.Tensor(...), got {ast.unparse(node)}", node)
        if isinstance(node, ast.Subscript):  # the paper's R.Tuple[A, B]
            if kind != "Tuple":
                raise self.error(f"R.{kind}[...] is not an annotation; call it: R.{kind}(...)", node)
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return TupleStructInfo([self._annotation(e) for e in items])
        if isinstance(node, ast.Attribute):
            return self._build(kind, [], {}, node)
        if any(isinstance(a, ast.Starred) for a in node.args) or any(k.arg is None for k in node.keywords):
            raise self.error("*args/**kwargs are not supported in annotations", node)
        return self._build(kind, node.args, {k.arg: k.value for k in node.keywords}, node)

    def _build(self, kind: str, args: list, kwargs: dict, node) -> StructInfo:
        if kind == "Tuple":
            if kwargs:
                raise self.error("R.Tuple takes no keyword arguments", node)
            if len(args) == 1 and isinstance(args[0], (ast.List, ast.Tuple)):
                args = args[0].elts
            return TupleStructInfo([self._annotation(a) for a in args])
        if kind == "Tensor":
            args, kwargs = self._without_vdevice(args, kwargs, node)
        names = {"Tensor": ("shape", "dtype", "ndim"), "Shape": ("values", "ndim"),
                 "Prim": ("dtype", "value"), "Callable": ("params", "ret", "purity"),
                 "Object": ()}[kind]
        bound = self._bind(kind, names, args, kwargs, node)
        return getattr(self, "_" + kind.lower())(bound, node)

    def _without_vdevice(self, args: list, kwargs: dict, node):
        """TVM's ``R.Tensor(shape, dtype, vdevice)``: a virtual device naming the host CPU
        (``"llvm"``, ``"cpu"``, optionally ``:0``) is the only device here and is dropped;
        any other is refused. A third positional int stays ``ndim``."""
        args, kwargs = list(args), dict(kwargs)
        vdevice = kwargs.pop("vdevice", None)
        if len(args) >= 3 and isinstance(args[2], ast.Constant) and isinstance(args[2].value, str):
            vdevice = args.pop(2)
        if vdevice is None or _is_none(vdevice):
            return args, kwargs
        text = vdevice.value if isinstance(vdevice, ast.Constant) and isinstance(vdevice.value, str) else None
        if text is None or text.split(":")[0].split(" ")[0] not in ("llvm", "cpu", "c") \
                or text.split(":")[1:] not in ([], ["0"]):
            raise self.error(f"R.Tensor: vdevice {ast.unparse(vdevice)} is not supported: the only "
                             'device is the host CPU ("llvm" or "cpu")', vdevice)
        return args, kwargs

    def _bind(self, kind, names, args, kwargs, node) -> dict:
        if kind == "Tensor" and args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            args = [None, *args]  # R.Tensor("float32"): dtype only
        if len(args) > len(names):
            raise self.error(f"R.{kind} takes at most {len(names)} positional argument(s), "
                             f"got {len(args)}", node)
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise self.error(f"R.{kind} got an unexpected keyword argument {key!r}", value)
            if key in bound:
                raise self.error(f"R.{kind} got multiple values for {key!r}", value)
            bound[key] = value
        return {k: v for k, v in bound.items() if v is not None and not _is_none(v)}

    # ------------------------------------------------------------ kinds
    def _object(self, bound, node) -> StructInfo:
        return ObjectStructInfo()

    def _tensor(self, bound, node) -> StructInfo:
        dtype = self.dtype(bound["dtype"]) if "dtype" in bound else None
        ndim = self._int(bound["ndim"], "ndim") if "ndim" in bound else -1
        shape = self._dims(bound["shape"], "shape") if "shape" in bound else None
        if shape is not None and ndim not in (-1, len(shape)):
            raise self.error(f"R.Tensor: ndim={ndim} but the shape has {len(shape)} dimension(s)", node)
        return TensorStructInfo(shape, dtype, ndim)

    def _shape(self, bound, node) -> StructInfo:
        ndim = self._int(bound["ndim"], "ndim") if "ndim" in bound else -1
        values = self._dims(bound["values"], "values") if "values" in bound else None
        if values is not None and ndim not in (-1, len(values)):
            raise self.error(f"R.Shape: ndim={ndim} but {len(values)} value(s) given", node)
        return ShapeStructInfo(values, ndim)

    def _prim(self, bound, node) -> StructInfo:
        value = self.dim(bound["value"]) if "value" in bound else None
        if "dtype" in bound:
            dtype = self.dtype(bound["dtype"])
        elif value is not None:
            dtype = value.dtype
        else:
            raise self.error('R.Prim needs a dtype (R.Prim("int64")) or a value', node)
        return PrimStructInfo(dtype, value)

    def _callable(self, bound, node) -> StructInfo:
        self._callable_frames.append({})
        try:
            params = None
            if "params" in bound:
                if not isinstance(bound["params"], (ast.List, ast.Tuple)):
                    raise self.error("R.Callable parameters must be a list of annotations", bound["params"])
                params = [self._annotation(p) for p in bound["params"].elts]
            ret = self._annotation(bound["ret"]) if "ret" in bound else ObjectStructInfo()
        finally:
            self._callable_frames.pop()
        purity = True
        if "purity" in bound:
            p = bound["purity"]
            if not (isinstance(p, ast.Constant) and isinstance(p.value, bool)):
                raise self.error("purity must be True or False", p)
            purity = p.value
        return FuncStructInfo(params, ret, purity)

    # ------------------------------------------------------------ pieces
    def dtype(self, node) -> str:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            raise self.error(f"dtype must be a string such as \"float32\", got {ast.unparse(node)}", node)
        try:
            return dt.normalize(node.value)
        except ValueError:
            raise self.error(f"unknown dtype {node.value!r}", node) from None

    def _int(self, node, what: str) -> int:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) \
                and isinstance(node.operand, ast.Constant):
            value = -node.operand.value
        elif isinstance(node, ast.Constant):
            value = node.value
        else:
            value = None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(f"{what} must be an integer, got {ast.unparse(node)}", node)
        if what == "ndim" and not -1 <= value <= MAX_NDIM:
            raise self.error(f"ndim must be -1 (unknown) or 0 .. {MAX_NDIM}, got {value}", node)
        return value

    def _dims(self, node, what: str) -> list[E.PrimExpr]:
        if not isinstance(node, (ast.Tuple, ast.List)):
            raise self.error(f"{what} must be a tuple or list of dimensions, got {ast.unparse(node)}", node)
        if len(node.elts) > MAX_NDIM:
            raise self.error(f"{what} has {len(node.elts)} dimensions; at most {MAX_NDIM} are supported", node)
        return [self._checked_dim(self.dim(d), d) for d in node.elts]

    def _checked_dim(self, value: E.PrimExpr, node) -> E.PrimExpr:
        """A dimension is an integer expression whose literals fit int64 (a float or an
        overflowing literal would only fail later, inside generated C)."""
        if not dt.is_int(value.dtype):
            raise self.error(f"a dimension must be an integer expression, got {ast.unparse(node)} "
                             f"of dtype {value.dtype}", node)
        for literal in collect(value, lambda n: isinstance(n, E.IntImm)):
            problem = int_literal_problem(literal.value, literal.dtype)
            if problem is not None:
                raise self.error(f"in dimension {ast.unparse(node)}: {problem}", node)
        return value

    def dim(self, node: ast.expr) -> E.PrimExpr:
        """One dimension: an int, a symbolic expression, or a string holding one."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return self._string_dim(node)
        return self._sym_parser(lambda message, _inner: self.error(message, _inner)).parse(node)

    def _string_dim(self, node: ast.Constant) -> E.PrimExpr:
        text = node.value.strip()
        try:
            inner = ast.parse(text, mode="eval").body
        except SyntaxError:
            raise self.error(f"cannot parse the dimension {node.value!r}", node) from None
        except (RecursionError, MemoryError):
            inner = None
        if inner is None or deeper_than(inner, MAX_NESTING) is not None:
            raise self.error(f"the dimension is nested more than {MAX_NESTING} levels deep", node)
        if isinstance(inner, ast.Name) and self._lookup(inner.id) is None:
            if self._callable_frames:
                var = self._callable_frames[-1][inner.id] = E.size_var(inner.id)
                return var
            if not self.allow_declare:
                raise self.error(f"undefined symbolic variable {inner.id!r}; declare it with "
                                 f"`{inner.id} = T.int64()`", node)
            return self.declare_sym(inner.id)
        # Errors inside the string point at the string literal.
        return self._sym_parser(lambda message, _inner: self.error(message, node)).parse(inner)

    def _lookup(self, name: str):
        for frame in reversed(self._callable_frames):
            if name in frame:
                return frame[name]
        return self.lookup_sym(name)

    def _sym_parser(self, error) -> SymExprParser:
        def lookup(name, at):
            var = self._lookup(name)
            if var is None:
                raise error(f"undefined symbolic variable {name!r}", at)
            return var
        return SymExprParser(lookup, error, self.t_names, python=self.python)


def _is_none(node) -> bool:
    return isinstance(node, ast.Constant) and node.value is None
