"""Parsing one ``@R.function`` definition into a graph-level Function.

The body is rebuilt binding by binding through a BlockBuilder, so every
binding's annotation is deduced. A written annotation must be implied by the
deduced one; when only a runtime check could establish it, the error points
to ``R.match_cast``.
"""
from __future__ import annotations

import ast
import contextlib

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.errors import ParseError

from .. import expr as rx
from ..irmodule import IRModule
from ..struct_info import FuncStructInfo, ObjectStructInfo, PrimStructInfo
from ..struct_info_util import NO, RUNTIME, format_sinfo, is_base_of, symbolic_vars_of
from .scope import ParseContext, Scope
from .value_parser import ValueParser

_FACTS = ("lower", "upper", "multiple_of")



def written_return(node):
    """A function's return annotation; ``-> None`` is none (TVM deduces the result then)."""
    returns = node.returns
    if isinstance(returns, ast.Constant) and returns.value is None:
        return None
    return returns

class FunctionParser:
    def __init__(self, ctx: ParseContext, global_vars: dict, class_names=frozenset()):
        self.ctx = ctx
        self.global_vars = global_vars
        self.class_names = class_names

    # ------------------------------------------------------------ signature only
    def signature(self, node: ast.FunctionDef) -> FuncStructInfo:
        """The Callable annotation of ``node`` (return Object when not written)."""
        self._start(node)
        try:
            params, ret = self._params_and_ret(node)
            ret = ret if ret is not None else ObjectStructInfo()
            return FuncStructInfo([p.struct_info for p in params], ret, decorator_purity(node, self.ctx))
        finally:
            self.ctx.where = []

    # ------------------------------------------------------------ whole function
    def parse(self, node: ast.FunctionDef, outer: Scope | None = None) -> rx.Function:
        """Parse ``node``; ``outer`` is the enclosing scope of a local function."""
        from ..block_builder import BlockBuilder
        saved_where = list(self.ctx.where)
        self._start(node, outer)
        try:
            params, ret = self._params_and_ret(node)
            attrs = self._func_attrs(node.body)
            # A builder of its own: its module only receives this function.
            self.bb = BlockBuilder(IRModule())
            with self.bb.function(node.name, params, attrs, decorator_purity(node, self.ctx),
                                  decorator_flag(node, self.ctx, "private", False)):
                self._body(node, ret)
            func = self.bb.get()[node.name]
            func.span = self.ctx.span(node)
            if outer is None:  # a local function is checked with its enclosing one
                self._check_well_formed(func, node)
            return func
        finally:
            self.ctx.where = saved_where

    def _start(self, node: ast.FunctionDef, outer: Scope | None = None) -> None:
        self.ctx.where = self.ctx.where + [f"in function {node.name!r}"] if outer else \
            [f"in function {node.name!r}"]
        self.scope = Scope()
        if outer is not None:  # a closure sees the enclosing names; its own stay local
            self.scope.frames = [{k: v for f in outer.frames for k, v in f.items()}]
        self.values = ValueParser(self.ctx, self.scope, self.global_vars, self.class_names)
        self.values.declare_hook = self._declare
        self.skip: set[int] = set()
        self._declarations(node.body)

    def _declare(self, name: str) -> E.Var:
        var = E.size_var(name)
        self.scope.frames[0][name] = var  # symbolic vars live for the whole function
        return var

    @contextlib.contextmanager
    def _where(self, phrase: str):
        self.ctx.where.append(phrase)
        try:
            yield
        finally:
            self.ctx.where.pop()

    def _params_and_ret(self, node: ast.FunctionDef):
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.defaults or args.posonlyargs:
            raise self.ctx.error("graph-level functions take plain positional parameters only", node)
        params, seen = [], set()
        self._declare_shape_names(args.args)
        for arg in args.args:
            if arg.arg in seen:
                raise self.ctx.error(f"duplicate parameter {arg.arg!r}", arg)
            seen.add(arg.arg)
            with self._where(f"parameter {arg.arg!r}"):
                if arg.annotation is None:
                    raise self.ctx.error(f"parameter {arg.arg!r} needs an annotation such as "
                                         'R.Tensor(("n", 4), "float32")', arg)
                sinfo = self.values.annotations.parse(arg.annotation, allow_declare=True)
                if self._declares_itself(arg):
                    sinfo = PrimStructInfo("int64", self.values.lookup_sym(arg.arg))
            var = rx.Var(arg.arg, sinfo)
            var.span = self.ctx.span(arg)
            self.scope.define(arg.arg, var)
            params.append(var)
        ret = None
        if written_return(node) is not None:
            with self._where("return annotation"):
                ret = self.values.annotations.parse(node.returns)
        return params, ret

    def _declares_itself(self, arg: ast.arg) -> bool:
        """``n: T.int64``: TVM's scalar parameter whose name is also a symbolic variable that
        later annotations may use (``x: R.Tensor([n + 1])``); it reads as ``R.Prim(value="n")``."""
        return self.values.annotations.scalar_dtype(arg.annotation) == "int64"

    def _declare_shape_names(self, args) -> None:
        """A dimension written as a bare name (``"m"``) in any parameter's shape is declared
        before the annotations are read, so an earlier parameter may use it in an expression
        (``x: R.Tensor(("m + 1",)), y: R.Tensor(("m",))``), as TVM allows."""
        for arg in args:
            if self._declares_itself(arg) and self.scope.lookup(arg.arg) is None:
                self._declare(arg.arg)
            for node in ast.walk(arg.annotation) if arg.annotation is not None else ():
                if not isinstance(node, ast.Call):
                    continue
                path = self.ctx.r_path(node.func)
                if path == "Callable":
                    break  # a callable's dimensions are its own
                dims = []
                if path in ("Tensor", "Shape"):
                    shape = node.args[0] if node.args else next(
                        (k.value for k in node.keywords if k.arg in ("shape", "values")), None)
                    if isinstance(shape, (ast.Tuple, ast.List)):
                        dims = shape.elts
                elif path == "Prim":
                    dims = [k.value for k in node.keywords if k.arg == "value"]
                for dim in dims:
                    if isinstance(dim, ast.Constant) and isinstance(dim.value, str) \
                            and dim.value.strip().isidentifier() and self.scope.lookup(dim.value.strip()) is None:
                        self._declare(dim.value.strip())

    # ------------------------------------------------------------ pre-scans
    def _declarations(self, body: list) -> None:
        """``n = T.int64(...)`` / ``n, m = R.sym_var(), R.sym_var()`` anywhere in the body."""
        for stmt in body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
                target, value = stmt.targets[0], stmt.value
                pairs = [(target, value)]
                if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                        and len(target.elts) == len(value.elts):
                    pairs = list(zip(target.elts, value.elts))
                if all(isinstance(t, ast.Name) and self._declaration_dtype(v) for t, v in pairs):
                    for t, v in pairs:
                        self._declare_with_facts(t, v)
                    self.skip.add(id(stmt))
            for field in ("body", "orelse"):
                inner = getattr(stmt, field, None)
                if isinstance(inner, list) and not isinstance(stmt, ast.FunctionDef):
                    self._declarations(inner)

    def _declaration_dtype(self, node) -> str | None:
        """The dtype when ``node`` is ``T.<int dtype>(facts...)``, ``R.sym_var(...)`` or
        ``T.Var("name", "int64")`` (TVM's constructor, as test code spells a declaration)."""
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "Var" and self.ctx.is_t(node.func.value) \
                and len(node.args) == 2 and not node.keywords \
                and all(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in node.args):
            try:
                dtype = dt.normalize(node.args[1].value)
            except ValueError:
                return None
            return dtype if dt.is_int(dtype) else None
        if not isinstance(node, ast.Call) or node.args and not _is_dtype_arg(node):
            return None
        func = node.func
        if isinstance(func, ast.Attribute) and self.ctx.is_r(func.value) and func.attr == "sym_var":
            return node.args[0].value if node.args else "int64"
        if isinstance(func, ast.Attribute) and self.ctx.is_t(func.value) and not node.args:
            try:
                dtype = dt.normalize(func.attr)
            except ValueError:
                return None
            return dtype if dt.is_int(dtype) else None
        return None

    def _declare_with_facts(self, target: ast.Name, value: ast.Call) -> None:
        name = target.id
        if value.func.attr == "Var" and value.args and value.args[0].value != name:
            # a second name for one variable would print back as two
            raise self.ctx.error(f"T.Var({value.args[0].value!r}, ...) is bound to {name!r}: a "
                                 "symbolic variable declaration uses its own name", value)
        if isinstance(self.scope.frames[0].get(name), E.Var):
            raise self.ctx.error(f"symbolic variable {name!r} is declared twice", target)
        try:
            dtype = dt.normalize(self._declaration_dtype(value))
        except ValueError:
            raise self.ctx.error(f"unknown dtype {value.args[0].value!r}", value.args[0]) from None
        facts = {"lower": 0}
        for kw in value.keywords:
            if kw.arg == "is_size_var":  # TVM's printer marks shape vars; they are non-negative here anyway
                if not isinstance(self.values.literal(kw.value), bool):
                    raise self.ctx.error("is_size_var must be True or False", kw.value)
                continue
            key = {"upper_bound": "upper", "lower_bound": "lower"}.get(kw.arg, kw.arg)
            if key not in _FACTS:
                raise self.ctx.error(f"unknown fact {kw.arg!r} (use lower=, upper=, multiple_of=)", kw.value)
            fact = self.values.literal(kw.value)
            if fact is not None and (not isinstance(fact, int) or isinstance(fact, bool)):
                raise self.ctx.error(f"{kw.arg} must be an integer or None", kw.value)
            facts[key] = fact
        self.scope.frames[0][name] = E.Var(name, dtype, **facts)

    def _func_attrs(self, body: list) -> dict:
        attrs = {}
        for stmt in body:
            if _is_r_call(stmt, "func_attr", self.ctx):
                call = stmt.value
                if len(call.args) != 1 or call.keywords or not isinstance(call.args[0], ast.Dict):
                    raise self.ctx.error('R.func_attr takes one dict literal: R.func_attr({"key": value})', call)
                attrs.update(self.values.value(call.args[0]))
                self.skip.add(id(stmt))
        return attrs

    # ------------------------------------------------------------ statements
    def _body(self, node: ast.FunctionDef, ret) -> None:
        body = [s for s in node.body if id(s) not in self.skip and not _is_docstring(s)]
        if not body or not isinstance(body[-1], ast.Return):
            raise self.ctx.error(f"function {node.name!r} must end with a return statement",
                                 body[-1] if body else node)
        for stmt in body[:-1]:
            self._statement(stmt)
        self._return(body[-1], ret)

    def _statement(self, stmt: ast.stmt) -> None:
        if id(stmt) in self.skip or _is_docstring(stmt) or isinstance(stmt, ast.Pass):
            return
        if self._is_class_alias(stmt):
            return
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self._assignment(stmt)
        elif isinstance(stmt, ast.With):
            self._dataflow(stmt)
        elif isinstance(stmt, ast.If):
            self._if(stmt)
        elif isinstance(stmt, ast.Expr) and _is_r_call(stmt, "output", self.ctx):
            raise self.ctx.error("R.output(...) is only allowed as the last statement of a "
                                 "`with R.dataflow():` block", stmt)
        elif isinstance(stmt, ast.Expr) and _is_r_call(stmt, "func_attr", self.ctx):
            raise self.ctx.error("R.func_attr must be a top-level statement of the function", stmt)
        elif isinstance(stmt, ast.Expr):
            self._bind("_", None, stmt.value, stmt)
        elif isinstance(stmt, ast.Return):
            raise self.ctx.error("return must be the last statement of the function", stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self._local_function(stmt)
        else:
            raise self.ctx.error(f"unsupported statement in a graph-level function: "
                                 f"{type(stmt).__name__}", stmt)

    def _is_class_alias(self, stmt) -> bool:
        """``cls = Module``, as TVM's printer starts a function that calls its module's
        functions through ``cls.f``; the name ``cls`` always means the enclosing module."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name) and stmt.targets[0].id == "cls"):
            return False
        if not (isinstance(stmt.value, ast.Name) and stmt.value.id in self.class_names):
            where = f"the module class {sorted(self.class_names)[0]!r}" if self.class_names else \
                "the enclosing @R.ir_module class (this function is free-standing)"
            raise self.ctx.error(f"`cls = ...` names {where}; `cls` cannot be bound to anything else",
                                 stmt)
        return True

    def _assignment(self, stmt) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            raise self.ctx.error("assign to a single name (`lv = ...`); index tuples with lv[i]", stmt)
        annotation = stmt.annotation if isinstance(stmt, ast.AnnAssign) else None
        if stmt.value is None:
            raise self.ctx.error("a binding needs a value", stmt)
        self._bind(targets[0].id, annotation, stmt.value, stmt)

    def _bind(self, name: str, annotation, value_node, stmt) -> rx.Var:
        if _is_r_call_expr(value_node, "match_cast", self.ctx):
            return self._match_cast(name, annotation, value_node, stmt)
        expr = self.values.expr(value_node)
        with self._located(stmt):
            value = self.bb.normalize(expr)
        sinfo = self._checked_annotation(name, annotation, value.struct_info, stmt)
        var = self._new_var(name, sinfo, stmt)
        self.bb.emit_normalized(rx.VarBinding(var, value))
        if isinstance(value, rx.ExternFunc):
            self.values.extern_functions[id(var)] = value
        return var

    def _match_cast(self, name, annotation, node: ast.Call, stmt) -> rx.Var:
        if len(node.args) != 2 or node.keywords:
            raise self.ctx.error("R.match_cast takes two arguments: R.match_cast(value, annotation)", node)
        expr = self.values.expr(node.args[0])
        with self._where(f"match_cast of {name!r}"):
            cast = self.values.annotations.parse(node.args[1], allow_declare=True)
        with self._located(stmt):
            value = self.bb.normalize_argument(expr)
            var = self._new_var(name, cast, stmt)
            binding = rx.MatchCast(var, value, cast)
            binding.span = self.ctx.span(stmt)
            self.bb.normalize_binding(binding)
        if annotation is not None:
            self._checked_annotation(name, annotation, cast, stmt)
        return var

    def _checked_annotation(self, name: str, annotation, deduced, stmt):
        if annotation is None:
            return deduced
        with self._where(f"annotation of {name!r}"):
            written = self.values.annotations.parse(annotation)
        verdict = is_base_of(written, deduced, self.bb.analyzer, fixed_vars=symbolic_vars_of(written))
        if verdict == NO:
            raise self.ctx.error(f"{name!r} is annotated {format_sinfo(written)} but its value is "
                                 f"{format_sinfo(deduced)}", annotation)
        if verdict == RUNTIME:
            raise self.ctx.error(
                f"{name!r} is annotated {format_sinfo(written)} but its value is {format_sinfo(deduced)}; "
                "only a runtime check can establish that: write "
                f"`{name} = R.match_cast(<value>, <annotation>)`", annotation)
        return written

    def _new_var(self, name: str, sinfo, stmt) -> rx.Var:
        dataflow = self.bb.in_dataflow_block() and id(stmt) not in self.output_stmts
        var = (rx.DataflowVar if dataflow else rx.Var)(name, sinfo)
        var.span = self.ctx.span(stmt)
        self.scope.define(name, var)
        return var

    output_stmts: frozenset = frozenset()

    def _local_function(self, node: ast.FunctionDef) -> None:
        if self.bb.in_dataflow_block():
            raise self.ctx.error("local functions are not allowed inside a dataflow block", node)
        func = FunctionParser(self.ctx, self.global_vars, self.class_names).parse(node, self.scope)
        with self._located(node):
            value = self.bb.normalize(func)
        var = self._new_var(node.name, value.struct_info, node)
        self.bb.emit_normalized(rx.VarBinding(var, value))

    # ------------------------------------------------------------ blocks
    def _dataflow(self, stmt: ast.With) -> None:
        if len(stmt.items) != 1 or stmt.items[0].optional_vars is not None \
                or not _is_r_call_expr(stmt.items[0].context_expr, "dataflow", self.ctx):
            raise self.ctx.error("the only `with` statement is `with R.dataflow():`", stmt)
        if len(self.scope.frames) > 1:
            raise self.ctx.error("dataflow blocks are only allowed at the top level of a function", stmt)
        body = [s for s in stmt.body if id(s) not in self.skip]
        if not body or not _is_r_call(body[-1], "output", self.ctx):
            raise self.ctx.error("a dataflow block must end with R.output(...) naming the variables "
                                 "that are visible after it", body[-1] if body else stmt)
        outputs = self._output_names(body[-1].value)
        last_assignment = {}
        for s in body[:-1]:
            if isinstance(s, (ast.Assign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                for t in targets:
                    if isinstance(t, ast.Name):
                        last_assignment[t.id] = s
        for name, node in outputs:
            if name not in last_assignment:
                raise self.ctx.error(f"R.output names {name!r}, which is not bound in this dataflow block",
                                     node)
        self.output_stmts = frozenset(id(last_assignment[name]) for name, _ in outputs)
        self.scope.push()
        try:
            with self.bb.dataflow():
                for s in body[:-1]:
                    if isinstance(s, (ast.If, ast.With, ast.Return)):
                        raise self.ctx.error(f"{type(s).__name__.lower()} statements are not allowed "
                                             "inside a dataflow block", s)
                    self._statement(s)
        finally:
            local = self.scope.pop()
            self.output_stmts = frozenset()
        for name, _ in outputs:
            self.scope.define(name, local[name])

    def _output_names(self, call: ast.Call) -> list:
        if call.keywords:
            raise self.ctx.error("R.output takes variable names only", call)
        out = []
        for arg in call.args:
            if not isinstance(arg, ast.Name):
                raise self.ctx.error(f"R.output takes variable names, got {ast.unparse(arg)}", arg)
            out.append((arg.id, arg))
        return out

    def _if(self, stmt: ast.If) -> None:
        if self.bb.in_dataflow_block():
            raise self.ctx.error("if statements are not allowed inside a dataflow block", stmt)
        cond = self.values.value(stmt.test)
        if isinstance(cond, E.PrimExpr):
            cond = rx.PrimValue(cond)
        if not isinstance(cond, rx.Expr):
            raise self.ctx.error("the condition must be a scalar value", stmt.test)
        if not stmt.orelse:
            raise self.ctx.error("an if statement needs an else branch; both branches assign the result",
                                 stmt)
        true_seq, name, annotation, last = self._branch(stmt.body, stmt)
        false_seq, other, other_annotation, other_last = self._branch(stmt.orelse, stmt)
        if name != other:
            raise self.ctx.error(f"both branches must end by assigning the same name; "
                                 f"got {name!r} and {other!r}", other_last)
        node = rx.If(cond, true_seq, false_seq)
        node.span = self.ctx.span(stmt)
        with self._located(stmt):
            value = self.bb.normalize(node)
        sinfo = self._checked_annotation(name, annotation or other_annotation, value.struct_info, last)
        var = self._new_var(name, sinfo, stmt)
        self.bb.emit_normalized(rx.VarBinding(var, value))

    def _branch(self, stmts: list, stmt: ast.If):
        stmts = [s for s in stmts if id(s) not in self.skip]
        last = stmts[-1] if stmts else stmt
        if isinstance(last, ast.Expr) and isinstance(last.value, ast.Call) \
                and not _is_r_call(last, "output", self.ctx):
            # `R.print(...)` ending both branches (TVM's sugar for `_ = R.print(...)`)
            targets = [ast.copy_location(ast.Name(id="_", ctx=ast.Store()), last)]
        elif not isinstance(last, (ast.Assign, ast.AnnAssign)):
            raise self.ctx.error("each branch must end by assigning the if's result (`y = ...`)", last)
        else:
            targets = last.targets if isinstance(last, ast.Assign) else [last.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            raise self.ctx.error("a branch result is assigned to a single name", last)
        self.scope.push()
        self.bb.begin_block(False)
        try:
            for s in stmts[:-1]:
                if isinstance(s, ast.With):
                    raise self.ctx.error("dataflow blocks are not allowed inside if branches", s)
                self._statement(s)
            if _is_r_call_expr(last.value, "match_cast", self.ctx):
                # the branch's value is the matched var (TVM allows the cast last)
                annotation = last.annotation if isinstance(last, ast.AnnAssign) else None
                body = self._match_cast(targets[0].id, annotation, last.value, last)
            else:
                # Bind a non-leaf result inside the branch's own block (the canonical form).
                with self._located(last):
                    body = self.bb.normalize_argument(self.values.expr(last.value))
        finally:
            block = self.bb.end_block()
            self.scope.pop()
        seq = rx.SeqExpr([block] if block.bindings else [], body)
        seq.span = self.ctx.span(last)
        annotation = last.annotation if isinstance(last, ast.AnnAssign) else None
        return seq, targets[0].id, annotation, last

    def _return(self, stmt: ast.Return, ret) -> None:
        if stmt.value is None:
            raise self.ctx.error("return needs a value", stmt)
        value = self.values.expr(stmt.value)
        with self._where("return value"), self._located(stmt):
            self.bb.emit_func_output(value, ret)

    def _check_well_formed(self, func: rx.Function, node: ast.FunctionDef) -> None:
        """What the builder cannot see binding by binding (an impure call inside a
        dataflow block, a symbolic var used before the match_cast that defines it)
        is a script error at the first offending binding."""
        from ..analysis.well_formed import located_problems
        problems = located_problems(func)
        if not problems:
            return
        message, span = problems[0]
        if span is None:
            raise self.ctx.error(message, node)
        filename, lineno, col, line = span
        context = ", ".join(self.ctx.where) if self.ctx.where else None
        raise ParseError(message, filename=filename, lineno=lineno, col=col, source_line=line,
                         context=context)

    # ------------------------------------------------------------ errors from deduction
    @contextlib.contextmanager
    def _located(self, node: ast.AST):
        """Deduction errors (ValueError subclasses) keep their type and gain the
        script location when the builder did not already add it."""
        try:
            yield
        except ParseError:
            raise
        except TypeError as err:  # a value of the wrong kind where the builder wants an expression
            raise self.ctx.error(str(err), node) from None
        except ValueError as err:
            where = self.ctx.describe(node)
            if where.split(": ", 1)[0] in str(err):
                raise
            message = f"{err}\n  at {where}"
            try:
                new = type(err)(message)
            except Exception:  # noqa: BLE001 - an error type with another constructor
                err.add_note(f"at {where}")
                raise err from None
            raise new from err


def decorator_purity(node: ast.FunctionDef, ctx: ParseContext) -> bool:
    """``pure=False`` in ``@R.function(pure=False)``; True otherwise."""
    return decorator_flag(node, ctx, "pure", True)


def decorator_flag(node: ast.FunctionDef, ctx: ParseContext, name: str, default: bool) -> bool:
    """The boolean keyword ``name`` of the function's decorator (``pure``, ``private``)."""
    for dec in node.decorator_list:
        if isinstance(dec, ast.Call):
            for kw in dec.keywords:
                if kw.arg == name:
                    if not (isinstance(kw.value, ast.Constant) and isinstance(kw.value.value, bool)):
                        raise ctx.error(f"{name} must be True or False", kw.value)
                    return kw.value.value
    return default


def _is_dtype_arg(call: ast.Call) -> bool:
    return len(call.args) == 1 and isinstance(call.args[0], ast.Constant) \
        and isinstance(call.args[0].value, str)


def _is_docstring(stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
        and isinstance(stmt.value.value, str)


def _is_r_call_expr(node, name: str, ctx: ParseContext) -> bool:
    return isinstance(node, ast.Call) and ctx.r_path(node.func) == name


def _is_r_call(stmt, name: str, ctx: ParseContext) -> bool:
    return isinstance(stmt, ast.Expr) and _is_r_call_expr(stmt.value, name, ctx)
