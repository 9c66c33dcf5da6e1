"""Parse one ``def`` (its AST) into a PrimFunc: signature, declarations, statements."""
from __future__ import annotations

import ast

import numpy as np

from .. import dtype as dt
from .. import expr as E
from .. import thread_sync
from ..buffer import Buffer, Pointer
from ..errors import ParseError
from ..function import PrimFunc
from ..stmt import (Allocate, AssertStmt, Block, BlockRealize, Break, BufferStore, Continue, Evaluate, For,
                    IfThenElse, LetStmt, Range, Stmt, While, seq)
from .block_parser import BlockParserMixin
from .diagnostics import MAX_NESTING, SourceInfo, deeper_than
from .expr_parser import MISSING, AliasView, ExprParser, LocalPointer, extent_between
from .namespace import DTYPE_NAMES, t_namespace_names
from .python_scope import evaluate_python
from .scope import BlockFrame, LoopInfo, Scope
from .subroutines import ModuleScope

INT_DTYPES = tuple(d for d in DTYPE_NAMES if dt.is_int(d))
_LOOP_KINDS = {"serial": "serial", "parallel": "parallel", "vectorized": "vectorized",
               "unroll": "unrolled", "thread_binding": "thread_binding"}
_AUG_OPS = {ast.Add: E.add, ast.Sub: E.sub, ast.Mult: E.mul, ast.Div: E.div,
            ast.FloorDiv: E.floordiv, ast.Mod: E.floormod}


def _t_call_name(node, t_names) -> str | None:
    """'block' for ``T.block(...)``, 'axis.remap' for ``T.axis.remap(...)``, else None."""
    if not isinstance(node, ast.Call):
        return None
    func = node.func
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name) and func.id in t_names and parts:
        name = ".".join(reversed(parts))
        return _TVM_RENAMES.get(name, name)
    return None


# Newer TVM spells some T forms differently (its ``tirx`` namespace); same IR here.
_TVM_RENAMES = {"sblock": "block", "sblock_attr": "block_attr", "sblock_alloc_buffer": "alloc_buffer"}


# Bare call statements TVM wraps in T.evaluate that mean something here (an external call).
_EFFECT_CALLS = ("call_extern", thread_sync.STORAGE_SYNC)
# Statements of TVM's schedule_to_module output before storage flattening (no meaning here).
_TE_ERA = ("realize", "prefetch")


def _attr_key(key):
    """Function attribute keys of TVM's renamed ``tirx`` namespace (``"tirx.noalias"``) are
    the ``tir.`` keys they were before the rename."""
    if isinstance(key, str) and key.startswith("tirx."):
        return "tir." + key[len("tirx."):]
    return key


def _plain_literals(value):
    """Typed literals in function attributes as Python values (``T.bool(True)`` is ``True``,
    as TVM's printer writes ``tir.noalias``)."""
    if isinstance(value, dict):
        return {k: _plain_literals(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_plain_literals(v) for v in value)
    if isinstance(value, E.IntImm):
        return bool(value.value) if value.dtype == "bool" else value.value
    if isinstance(value, (E.FloatImm, E.StringImm)):
        return value.value
    return value


class EnvThread:
    """What ``tx = T.env_thread("threadIdx.x")`` binds until ``T.launch_thread(tx, n)``."""

    def __init__(self, name: str, tag: str):
        self.name, self.tag = name, tag


class FunctionParser(BlockParserMixin):
    def __init__(self, func_def: ast.FunctionDef, source: SourceInfo, py_globals: dict | None,
                 module: ModuleScope | None = None):
        self.func_def = func_def
        self.source = source
        py_globals = dict(py_globals or {})
        self.t_names = t_namespace_names(py_globals)
        self.scope = Scope(py_globals)
        self.param_name: str | None = None
        self.exprs = ExprParser(source, self.scope.lookup, self.context, self.t_names)
        self.exprs.python = lambda node: evaluate_python(
            node, py_globals, self.scope.bound, self.t_names, source.filename, self.error)
        self.exprs.module = module
        self.final_return = None  # the function's last statement when it is its `return v`
        self.jump_targets: list[str] = []  # enclosing loop kinds ("while", "block" across a block)
        self.flat_views: dict[int, Buffer] = {}  # storage id -> its 1-D view (pointer locals read it)
        self.ret_dtype: str | None = None
        self.loops: list[LoopInfo] = []
        self.frames: list[BlockFrame] = []
        self.attrs: dict = {}
        self.block_names = self.explicit_block_names()
        self.allocations: set[int] = set()  # ids of T.allocate storage (T.Buffer(data=x) views it)
        self.reduce_scopes: list = []  # reducers of the enclosing reduce_scope attributes

    # ---------------------------------------------------------------- helpers
    def context(self) -> str:
        where = f"in function {self.func_def.name!r}"
        return where + (f", parameter {self.param_name!r}" if self.param_name else "")

    def error(self, message: str, node) -> ParseError:
        return self.exprs.error(message, node)

    def t_call(self, node) -> str | None:
        return _t_call_name(node, self.t_names)

    def explicit_block_names(self) -> set[str]:
        names = set()
        for node in ast.walk(self.func_def):
            if self.t_call(node) == "block" and node.args and isinstance(node.args[0], ast.Constant):
                names.add(node.args[0].value)
        return names

    def has_blocks(self) -> bool:
        return any(self.t_call(n) == "block" for n in ast.walk(self.func_def))

    # ---------------------------------------------------------------- function
    def parse(self) -> PrimFunc:
        fd = self.func_def
        if fd.args.vararg or fd.args.kwarg or fd.args.kwonlyargs or fd.args.posonlyargs:
            raise self.error("prim_func parameters must be plain positional parameters", fd)
        body_stmts = list(fd.body)
        if body_stmts and isinstance(body_stmts[0], ast.Expr) and isinstance(body_stmts[0].value, ast.Constant) \
                and isinstance(body_stmts[0].value.value, str):
            body_stmts = body_stmts[1:]  # docstring
        if fd.returns is not None and not (isinstance(fd.returns, ast.Constant) and fd.returns.value is None):
            self.ret_dtype = self.scalar_annotation(fd.returns)
            if self.ret_dtype in (None, "handle"):
                raise self.error(f"a prim_func returns a scalar (-> T.int32) or nothing (it writes its "
                                 f"output buffers); got -> {ast.unparse(fd.returns)}", fd.returns)
        if body_stmts and self.return_value(body_stmts[-1]) is not None:
            self.final_return = body_stmts[-1]
        elif self.ret_dtype is not None:
            early = next((n for n in ast.walk(fd) if isinstance(n, ast.stmt) and n is not fd
                          and self.return_value(n) is not None), None)
            if early is not None:
                self.parse_return(early)  # raises: not the last statement
            raise self.error(f"{fd.name!r} is annotated -> T.{self.ret_dtype} but does not end with "
                             "`return value` (or T.ret(value))", fd.returns)
        self.declared = self.prescan_declarations(body_stmts)
        for name, (var, _node) in self.declared.items():
            self.scope.define(name, var)
        params = self.parse_params(fd.args.args)
        self.matched_handles: dict[int, Buffer] = {}  # handle param id -> its T.match_buffer
        root = BlockFrame(is_root=True)
        self.frames.append(root)
        body = self.parse_body(body_stmts, root)
        self.frames.pop()
        body = self.wrap_root(body, root)
        params = [self.matched_handles.get(id(p), p) for p in params]
        return PrimFunc(params, body, self.attrs, name=fd.name)

    def wrap_root(self, body: Stmt, root: BlockFrame) -> Stmt:
        if isinstance(body, BlockRealize) and body.block.name == "root" and not body.block.iter_vars:
            if root.alloc_buffers:  # explicit root block plus top-level allocations
                block = body.block
                return body.replace(block=block.replace(
                    alloc_buffers=tuple(root.alloc_buffers) + block.alloc_buffers))
            return body
        if not (self.has_blocks() or root.alloc_buffers):
            return body
        return BlockRealize([], None, Block("root", [], [], [], body, alloc_buffers=root.alloc_buffers))

    def prescan_declarations(self, stmts) -> dict[str, tuple[E.Var, ast.AST]]:
        """Top-level ``n = T.int64(...)`` lines, read before the signature so that
        names used in signature strings carry the declared dtype and facts."""
        out = {}
        for st in stmts:
            for decl in self.declarations_in(st) or ():
                out[decl.name] = (decl, st)
        return out

    def declarations_in(self, st) -> list[E.Var] | None:
        """The vars ``n = T.int64()`` or ``n, m = T.int64(), T.int64()`` declares (None if
        ``st`` is no declaration)."""
        if not (isinstance(st, ast.Assign) and len(st.targets) == 1):
            return None
        target, value = st.targets[0], st.value
        if isinstance(target, ast.Name):
            pairs = [(target, value)]
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) \
                and len(target.elts) == len(value.elts) and all(isinstance(t, ast.Name) for t in target.elts):
            pairs = list(zip(target.elts, value.elts))
        else:
            return None
        if not all(self.declared_dtype(v) for _t, v in pairs):
            return None
        return [self.declaration(t.id, v) for t, v in pairs]

    def declared_dtype(self, call) -> str | None:
        """``T.int64(facts...)`` or the older ``T.var("int64")``."""
        name = self.t_call(call)
        if name == "var" and len(call.args) == 1 and isinstance(call.args[0], ast.Constant):
            return call.args[0].value if isinstance(call.args[0].value, str) else None
        return name if name in DTYPE_NAMES and not call.args else None

    def declaration(self, name: str, call: ast.Call) -> E.Var:
        dtype = self.declared_dtype(call)
        if dtype not in INT_DTYPES:
            raise self.error(f"symbolic variables must have an integer dtype, not {dtype}", call)
        facts = {"lower": 0, "upper": None, "multiple_of": None}
        for kw in call.keywords:
            if kw.arg == "is_size_var":  # TVM's printer marks shape vars; they are non-negative here anyway
                self.exprs.constant(kw.value, "is_size_var", (bool,))
                continue
            if kw.arg not in facts:
                raise self.error(f"unknown fact {kw.arg!r}; use lower=, upper= or multiple_of=", kw.value)
            value = self.exprs.constant(kw.value, kw.arg, (int, type(None)))
            facts[kw.arg] = value
        return E.Var(name, dtype, **facts)

    # ---------------------------------------------------------------- signature
    def parse_params(self, args: list[ast.arg]) -> list:
        scalars, seen = {}, set()
        for arg in args:  # scalar params first: signature strings may name them
            self.param_name = arg.arg
            if arg.arg in seen:
                raise self.error(f"duplicate parameter {arg.arg!r}", arg)
            seen.add(arg.arg)
            if arg.annotation is None:
                raise self.error("parameter needs an annotation: T.Buffer(shape, dtype), T.handle "
                                 "or a scalar type such as T.int64", arg)
            dtype = self.scalar_annotation(arg.annotation)
            if dtype is not None:
                declared = self.declared.get(arg.arg)
                var = declared[0] if declared else E.Var(arg.arg, dtype)
                if var.dtype != dtype:
                    raise self.error(f"declared as {var.dtype} in the body but annotated {dtype}", arg)
                scalars[arg.arg] = var
                self.scope.define(arg.arg, var)
        self.handle_params = [v for v in scalars.values() if v.dtype == "handle"]
        params = []
        for arg in args:
            self.param_name = arg.arg
            if arg.arg in scalars:
                params.append(scalars[arg.arg])
                continue
            annotation = self.subscript_buffer(arg.annotation)
            if self.t_call(annotation) == "handle":
                pointer = Pointer(arg.arg, self.pointer_dtype(annotation))
                self.scope.define(arg.arg, pointer)
                params.append(pointer)
                continue
            if self.t_call(annotation) != "Buffer":
                raise self.error(f"unsupported parameter annotation {ast.unparse(arg.annotation)}; "
                                 "use T.Buffer(shape, dtype) or a scalar type such as T.int64",
                                 arg.annotation)
            buf = self.buffer_from_call(arg.arg, annotation, declare=True)
            self.scope.define(arg.arg, buf)
            params.append(buf)
        self.param_name = None
        return params

    def pointer_dtype(self, call: ast.Call) -> str:
        """``T.handle("float32")`` (optionally with the storage scope "global")."""
        if call.keywords or not 1 <= len(call.args) <= 2:
            raise self.error('a typed pointer is written T.handle("float32")', call)
        dtype = self.exprs.dtype(call.args[0])
        if len(call.args) == 2 and self.exprs.constant(call.args[1], "storage scope", (str,)) != "global":
            raise self.error("a pointer parameter's storage scope must be \"global\"", call.args[1])
        if dtype in ("handle", "void") or dt.lanes(dtype) != 1:
            raise self.error(f"a pointer parameter points to scalars of a number type, got {dtype}", call)
        return dtype

    def return_value(self, st) -> ast.expr | None:
        """The value node of ``return v``, ``T.ret(v)`` or ``T.evaluate(T.ret(v))``, else None."""
        if isinstance(st, ast.Return):
            return st.value if st.value is not None else ast.copy_location(ast.Constant(None), st)
        if isinstance(st, ast.Expr):
            call = st.value
            if self.t_call(call) == "evaluate" and len(call.args) == 1:
                call = call.args[0]
            if self.t_call(call) == "ret":
                if len(call.args) != 1 or call.keywords:
                    raise self.error("T.ret takes one value", call)
                return call.args[0]
        return None

    def parse_return(self, st) -> Stmt:
        value_node = self.return_value(st)
        if st is not self.final_return:
            raise self.error("a return is supported only as the last statement of a prim_func's top "
                             "level (one result; early returns from loops or branches are not)", st)
        if isinstance(value_node, ast.Constant) and value_node.value is None:
            raise self.error("a prim_func's return needs a value (write nothing to return nothing)", st)
        value = self.exprs.expr(value_node, self.ret_dtype)
        if self.ret_dtype is not None and value.dtype != self.ret_dtype:
            raise self.error(f"the function is annotated -> T.{self.ret_dtype} but returns a {value.dtype} "
                             f"value; convert it with T.{self.ret_dtype}(...)", value_node)
        if dt.lanes(value.dtype) != 1 or value.dtype in ("handle", "void"):
            raise self.error(f"a prim_func returns one number, got a {value.dtype} value", value_node)
        return Evaluate(E.ret(value))

    def subscript_buffer(self, node):
        """TVM's older ``T.Buffer[(128,), "float32"]``: the same as ``T.Buffer((128,), "float32")``."""
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and isinstance(node.value.value, ast.Name) and node.value.value.id in self.t_names \
                and node.value.attr == "Buffer":
            items = node.slice.elts if isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2 \
                and isinstance(node.slice.elts[1], ast.Constant) else [node.slice]
            return ast.copy_location(ast.Call(func=node.value, args=list(items), keywords=[]), node)
        return node

    def vector_annotation(self, node) -> str | None:
        """``T.float32x4`` (a vector local's type, as TVM prints it), or None."""
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in self.t_names and node.attr not in DTYPE_NAMES:
            try:
                dtype = dt.normalize(node.attr)
            except ValueError:
                return None
            return dtype if dt.lanes(dtype) > 1 else None
        return None

    def scalar_annotation(self, node) -> str | None:
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in self.t_names:
            if node.attr in DTYPE_NAMES or node.attr == "handle":
                return node.attr
            if node.attr == "boolean":  # TVM's other name of T.bool
                return "bool"
            if node.attr != "Buffer":
                raise self.error(f"unknown type 'T.{node.attr}'", node)
        return None

    # ---------------------------------------------------------------- buffers
    def buffer_from_call(self, name: str, call: ast.Call, declare: bool = False,
                         first_arg: int = 0, view: bool = False) -> Buffer:
        """T.Buffer / T.alloc_buffer / T.decl_buffer / T.match_buffer arguments
        (``view``: a T.Buffer in the body, which needs ``data=x.data``)."""
        pos = call.args[first_arg:]
        kw = {k.arg: k.value for k in call.keywords}
        known = {"shape", "dtype", "strides", "elem_offset", "scope", "align", "offset_factor"}
        if view:
            known.add("data")
            if "data" not in kw:
                raise self.error(f"T.Buffer in a function body declares a view of another buffer's "
                                 f"storage: write {name} = T.Buffer(shape, dtype, data=x.data)", call)
        for k in call.keywords:
            if k.arg == "axis_separators":
                raise self.error(f"{ast.unparse(call.func)}(axis_separators=...) is not supported: "
                                 "buffers here are flat (axis separators describe N-d physical "
                                 "memory such as textures)", k.value)
            if k.arg not in known:
                raise self.error(f"unknown argument {k.arg!r} of {ast.unparse(call.func)}", k.value)
        if len(pos) > 2:
            raise self.error(f"{ast.unparse(call.func)} takes shape and dtype positionally; "
                             "give the rest as keywords", call)
        shape_node = pos[0] if pos else kw.get("shape")
        if shape_node is None:
            raise self.error(f"{ast.unparse(call.func)} needs a shape", call)
        dtype_node = pos[1] if len(pos) > 1 else kw.get("dtype")
        dtype = self.exprs.dtype(dtype_node) if dtype_node is not None else "float32"
        shape = self.dims(shape_node, declare)
        strides = self.dims(kw["strides"], declare) if "strides" in kw else ()
        if strides and len(strides) != len(shape):
            raise self.error(f"{name!r} has {len(shape)} dimension(s) but strides= gives {len(strides)}: "
                             "one stride per dimension (or none, for row-major)", kw["strides"])
        offset = self.dim(kw["elem_offset"], declare) if "elem_offset" in kw else 0
        scope = self.exprs.constant(kw["scope"], "scope", (str,)) if "scope" in kw else "global"
        if view and isinstance(kw["data"], ast.Name) and isinstance(self.scope.lookup(kw["data"].id), LocalPointer):
            return self.alias_view(name, self.scope.lookup(kw["data"].id), shape, dtype, strides, offset, call)
        data = self.storage_of(kw["data"]) if view else None
        return Buffer(name, shape, dtype, strides=strides, elem_offset=offset, scope=scope, data=data)

    def alias_view(self, name, pointer: LocalPointer, shape, dtype, strides, offset, node) -> AliasView:
        from ..transform.inline_subroutines import _plus, _size, _strides
        if dtype != pointer.dtype or dtype != pointer.storage.dtype:
            raise self.error(f"buffer {name!r} reads {pointer.storage.dtype} storage through the "
                             f"{pointer.dtype} pointer {pointer.name!r} as {dtype}; the dtypes must agree", node)
        storage = pointer.storage
        flat = self.flat_views.get(id(storage))
        if flat is None:
            flat = Buffer(f"{storage.name}_flat", [_size(storage)], storage.dtype, data=storage,
                          scope=storage.scope)
            self.flat_views[id(storage)] = flat
        shaped = Buffer(name, shape, dtype, strides=strides)
        base = _plus(pointer.base, E.cast("int64", offset)) if not E.is_const_int(offset, 0) else pointer.base
        return AliasView(name, flat, base, shape, _strides(shaped))

    def local_pointer(self, name: str, dtype_call: ast.Call, value_node) -> None:
        """``p: T.handle("float32") = T.address_of(A[i, 0])`` (or ``A.data``): see LocalPointer."""
        from ..transform.inline_subroutines import _flat_position
        dtype = self.pointer_dtype(dtype_call)
        saved, self.exprs.handles_allowed = self.exprs.handles_allowed, True
        try:
            value = self.exprs.eval(value_node)
        finally:
            self.exprs.handles_allowed = saved
        if not (isinstance(value, E.Call) and value.op == E.ADDRESS_OF):
            raise self.error(f"a pointer local {name!r} takes T.address_of(A[i]) or A.data", value_node)
        load = value.args[0]
        storage = load.buffer.storage
        if isinstance(storage, Pointer):
            raise self.error(f"a pointer local {name!r} into pointer parameter {storage.name!r} is not "
                             "supported; declare the buffer over the parameter itself", value_node)
        if storage.dtype != dtype:
            raise self.error(f"{name!r} is a {dtype} pointer but points into {storage.dtype} buffer "
                             f"{load.buffer.name!r}", value_node)
        try:
            base = _flat_position(load.buffer, load.indices)
        except Exception as err:  # noqa: BLE001 - a strided or offset storage
            raise self.error(str(err), value_node) from None
        self.scope.define(name, LocalPointer(name, dtype, storage, base, value))

    def storage_of(self, node) -> Buffer:
        """The buffer named by ``data=x.data`` (x: a parameter or an allocated buffer in scope),
        or ``data=x`` for storage ``x = T.allocate(...)`` made."""
        if isinstance(node, ast.Name) and (id(self.scope.lookup(node.id)) in self.allocations
                                           or isinstance(self.scope.lookup(node.id), Pointer)):
            return self.scope.lookup(node.id)  # T.allocate storage, or a pointer parameter
        if not (isinstance(node, ast.Attribute) and node.attr == "data" and isinstance(node.value, ast.Name)):
            raise self.error(f"data= takes the storage of a buffer, written x.data; got {ast.unparse(node)}",
                             node)
        found = self.scope.lookup(node.value.id)
        if found is MISSING:
            raise self.error(f"undefined buffer {node.value.id!r} in data=", node.value)
        if not isinstance(found, Buffer):
            raise self.error(f"{node.value.id!r} is not a buffer, so it has no .data", node.value)
        return found

    def dims(self, node, declare: bool) -> list[E.PrimExpr]:
        elts = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        return [self.dim(e, declare) for e in elts]

    def dim(self, node, declare: bool) -> E.PrimExpr:
        """A shape entry: literal, expression, or string ("n" declares n, "n * 4" uses it)."""
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            return self.int_expr(node)
        text = node.value.strip()
        if declare and text.isidentifier() and self.scope.lookup(text) is MISSING:
            var = E.size_var(text)
            self.scope.define(text, var)
            return var
        try:
            tree = ast.parse(text, mode="eval").body
        except SyntaxError:
            raise self.error(f"invalid shape expression {node.value!r}", node) from None
        except (RecursionError, MemoryError):
            tree = None
        if tree is None or deeper_than(tree, MAX_NESTING) is not None:
            raise self.error(f"shape expression nested more than {MAX_NESTING} levels deep", node)
        for sub in ast.walk(tree):  # report problems at the string itself
            ast.copy_location(sub, node)
        saved, self.exprs.undefined_message = self.exprs.undefined_message, "undefined symbolic variable {!r}"
        try:
            return self.int_expr(tree)
        finally:
            self.exprs.undefined_message = saved

    def int_expr(self, node) -> E.PrimExpr:
        value = self.exprs.expr(node)
        if not dt.is_int(value.dtype):
            raise self.error(f"expected an integer expression, got dtype {value.dtype}", node)
        return value

    # ---------------------------------------------------------------- statements
    def parse_body(self, stmts: list[ast.stmt], frame: BlockFrame | None = None) -> Stmt:
        """Statements in order; ``frame`` is set when they sit directly in a block."""
        out: list[Stmt] = []
        for i, st in enumerate(stmts):
            rest = stmts[i + 1:]
            decls = self.declarations_in(st)
            if decls is not None:
                for var in decls:
                    known = self.declared.get(var.name)
                    self.scope.define(var.name, known[0] if known and known[1] is st else var)
                continue
            scoped = MISSING
            if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
                scoped = self.parse_named_assign(st, rest, frame)
            elif isinstance(st, ast.AnnAssign):
                scoped = self.parse_ann_assign(st, rest, frame)
            elif isinstance(st, ast.Expr) and self.t_call(st.value) == "launch_thread":
                scoped = self.parse_launch_thread(None, st.value, rest, frame)
            elif isinstance(st, ast.Expr) and self.t_call(st.value) == "attr":
                scoped = self.parse_attr(st.value, rest, frame)
            elif isinstance(st, ast.Expr) and self.t_call(st.value) == "Bind":
                scoped = self.parse_bind(st.value, rest, frame)
            if scoped is not MISSING:
                if scoped is not None:
                    out.append(scoped)
                    break
                continue
            result = self.parse_stmt(st, frame)
            if result is not None:
                out.append(result)
        if not out:
            return Evaluate(0)
        return seq(*out)

    def parse_stmt(self, st: ast.stmt, frame: BlockFrame | None) -> Stmt | None:
        try:
            return self._parse_stmt(st, frame)
        except (TypeError, ValueError, OverflowError) as err:
            # An IR constructor refused what the statement built (e.g. a non-boolean T.where):
            # a script mistake, reported at the statement that wrote it.
            raise self.error(str(err), st) from None

    def _parse_stmt(self, st: ast.stmt, frame: BlockFrame | None) -> Stmt | None:
        if isinstance(st, ast.For):
            return self.parse_for(st)
        if isinstance(st, ast.With):
            return self.parse_with(st, frame)
        if isinstance(st, ast.If):
            return self.parse_if(st)
        if isinstance(st, ast.While):
            return self.parse_while(st)
        if isinstance(st, ast.Assert):
            return self.parse_assert(st.test, st.msg, st)
        if isinstance(st, ast.Assign):
            return self.parse_assign(st, frame)
        if isinstance(st, ast.AugAssign):
            return self.parse_aug_assign(st)
        if isinstance(st, ast.Return) or self.return_value(st) is not None:
            return self.parse_return(st)
        if isinstance(st, ast.Expr):
            return self.parse_expr_stmt(st, frame)
        if isinstance(st, ast.Pass):
            return None
        if isinstance(st, (ast.Break, ast.Continue)):
            return self.parse_jump(st)
        raise self.error(f"unsupported statement {type(st).__name__} in a prim_func", st)

    def parse_jump(self, st) -> Stmt:
        """``break`` / ``continue`` (TVM's loop jumps) of the innermost serial for or while loop."""
        word = type(st).__name__.lower()
        target = self.jump_targets[-1] if self.jump_targets else None
        if target is None:
            raise self.error(f"{word} outside a loop", st)
        if target == "block":
            raise self.error(f"{word} cannot leave a block (T.block / T.sblock): a block's body runs "
                             "whole; put the loop inside the block", st)
        if target not in ("serial", "while"):
            article = "an" if target == "unrolled" else "a"
            kind = target.replace("_binding", "")
            raise self.error(f"{word} in {article} {kind} loop: a loop jump is supported in serial for loops "
                             "and while loops only (the iterations of a parallel, vectorized, unrolled "
                             "or thread loop do not run one after another)", st)
        return Break() if word == "break" else Continue()

    def parse_named_assign(self, st: ast.Assign, rest, frame) -> Stmt | None:
        """``name = ...``: a declaration, buffer, axis or a scalar let (which scopes ``rest``)."""
        name, value = st.targets[0].id, st.value
        kind = self.t_call(value)
        if kind == "Buffer":
            self.scope.define(name, self.buffer_from_call(name, value, view=True))
            return None
        if kind == "alloc_buffer":
            buf = self.buffer_from_call(name, value)
            self.frames[-1].alloc_buffers.append(buf)
            self.scope.define(name, buf)
            return None
        if kind == "match_buffer":
            if self.matches_handle(value):
                self.match_handle(name, value, frame)
            else:
                self.parse_match_buffer(name, value, frame)
            return None
        if kind == "allocate":
            buf = self.allocation(name, value)
            return Allocate(buf, self.scoped_body(rest, frame, name, buf))
        if kind == "allocate_const":
            buf, stores = self.const_allocation(name, value)
            return Allocate(buf, seq(*stores, self.scoped_body(rest, frame, name, buf)))
        if kind == "env_thread":
            self.exprs.expect_args(value, 1)
            self.scope.define(name, EnvThread(name, self.exprs.constant(value.args[0], "thread tag", (str,))))
            return None
        if kind == "launch_thread":
            return self.parse_launch_thread(name, value, rest, frame)
        if kind is not None and kind.startswith("axis."):
            self.parse_axes([st.targets[0]], value, frame)
            return None
        if kind == "decl_buffer":
            if any(k.arg == "data" for k in value.keywords):
                # a view of storage T.allocate made (or of another buffer's .data): no new memory
                self.scope.define(name, self.buffer_from_call(name, value, view=True))
                return None
            buf = self.buffer_from_call(name, value)
            return Allocate(buf, self.scoped_body(rest, frame, name, buf))
        if kind == "bind" and len(value.args) == 2 and not value.keywords and self.t_call(value.args[1]) == "handle":
            # `p = T.bind(T.address_of(A[0, 0]), T.handle("float32"))`: a pointer local
            self.local_pointer(name, value.args[1], value.args[0])
            return None
        if kind == "bind" and len(value.args) == 1 and not value.keywords:
            # newer TVM's `x = T.bind(value)`: the scalar let the plain assignment makes
            let_value = self.exprs.expr(value.args[0])
            var = E.Var(name, let_value.dtype)
            return LetStmt(var, let_value, self.scoped_body(rest, frame, name, var))
        if kind == "meta_var":
            # TVM substitutes a meta_var's value where the name is used: no let binding
            self.exprs.expect_args(value, 1)
            self.scope.define(name, self.exprs.expr(value.args[0]))
            return None
        if isinstance(value, ast.Call) and self.t_call(value) is None and isinstance(value.func, ast.Name) \
                and value.func.id == "range":
            raise self.error("range(...) is only valid as a for-loop iterator", value)
        let_value = self.exprs.expr(value)
        var = E.Var(name, let_value.dtype)
        return LetStmt(var, let_value, self.scoped_body(rest, frame, name, var))

    def parse_ann_assign(self, st: ast.AnnAssign, rest, frame) -> Stmt | None:
        """``x: T.int32 = value``: a scalar let whose dtype is written (a buffer annotation
        on ``A: T.Buffer(...) = T.match_buffer(...)`` / ``T.alloc_buffer`` is accepted too)."""
        if not isinstance(st.target, ast.Name) or st.value is None:
            raise self.error("an annotated assignment in a prim_func binds one name to a value: "
                             "x: T.int32 = ...", st)
        if self.t_call(st.annotation) == "Buffer":
            plain = ast.copy_location(ast.Assign(targets=[st.target], value=st.value), st)
            return self.parse_named_assign(plain, rest, frame)
        annotation = st.annotation
        if isinstance(annotation, ast.Subscript) and isinstance(annotation.value, ast.Attribute) \
                and isinstance(annotation.value.value, ast.Name) \
                and annotation.value.value.id in self.t_names and annotation.value.attr == "let":
            annotation = annotation.slice  # TVM's x: T.let[T.int32] = ...: the same scalar let
        if self.t_call(annotation) == "handle":
            self.local_pointer(st.target.id, annotation, st.value)
            return None
        dtype = self.vector_annotation(annotation) or self.scalar_annotation(annotation)
        if dtype is None or dtype == "handle":
            raise self.error(f"unsupported annotation {ast.unparse(st.annotation)} on a local; "
                             "use a scalar type such as T.int32", st.annotation)
        value = self.exprs.expr(st.value, dtype if dt.lanes(dtype) == 1 else None)
        if value.dtype != dtype:
            hint = f"convert it with T.{dtype}(...)" if dt.lanes(dtype) == 1 else \
                f"a scalar makes a vector with T.Broadcast(value, {dt.lanes(dtype)})"
            raise self.error(f"{st.target.id!r} is annotated {dtype} but the value is {value.dtype}; {hint}",
                             st.value)
        var = E.Var(st.target.id, dtype)
        return LetStmt(var, value, self.scoped_body(rest, frame, st.target.id, var))

    def matches_handle(self, call: ast.Call) -> bool:
        first = call.args[0] if call.args else None
        if not isinstance(first, ast.Name):
            return False
        found = self.scope.lookup(first.id)
        return isinstance(found, E.Var) and found.dtype == "handle"

    def match_handle(self, name: str, call: ast.Call, frame) -> None:
        """``A = T.match_buffer(a, shape, dtype, ...)`` on a ``T.handle`` parameter: the
        parameter becomes the buffer ``A`` (the function takes a tensor there)."""
        handle = self.scope.lookup(call.args[0].id)
        # Top level, before any let: the parameter's shape may only use the function's own vars.
        if frame is None or not frame.is_root or self.loops or len(self.frames) != 1 \
                or len(self.scope.frames) != 1:
            raise self.error("T.match_buffer of a T.handle parameter belongs at the top level of "
                             "the function body, ahead of any let binding", call)
        if not any(p is handle for p in self.handle_params):
            raise self.error(f"{call.args[0].id!r} is not a T.handle parameter of this function", call.args[0])
        if id(handle) in self.matched_handles:
            raise self.error(f"parameter {call.args[0].id!r} is matched by a buffer twice", call)
        for k in call.keywords:  # TVM's layout hints: accepted, and checked for their type
            if k.arg in ("offset_factor", "align"):
                self.exprs.constant(k.value, k.arg, (int,))
            elif k.arg == "buffer_type":
                if self.exprs.constant(k.value, k.arg, (str,)) not in ("default", "auto"):
                    raise self.error('buffer_type is "default" or "auto"', k.value)
        call = ast.copy_location(ast.Call(func=call.func, args=call.args, keywords=[
            k for k in call.keywords if k.arg != "buffer_type"]), call)
        buf = self.buffer_from_call(name, call, declare=True, first_arg=1)
        self.matched_handles[id(handle)] = buf
        self.scope.define(name, buf)

    def allocation(self, name: str, call: ast.Call) -> Buffer:
        """``x = T.allocate(extents, dtype, scope)``: flat storage that ``T.Buffer(..., data=x)``
        views; the IR holds it as an allocated buffer (printed as ``T.decl_buffer``)."""
        kw = {k.arg: k.value for k in call.keywords}
        names = ("extents", "dtype", "scope")
        for k in call.keywords:
            if k.arg not in names:
                raise self.error(f"unknown argument {k.arg!r} of T.allocate", k.value)
        if len(call.args) > 3:
            raise self.error("T.allocate takes extents, dtype and scope", call)
        given = dict(zip(names, call.args)) | kw
        if "extents" not in given or "dtype" not in given:
            raise self.error("T.allocate needs extents and a dtype: T.allocate([128], \"float32\", \"global\")",
                             call)
        scope = self.exprs.constant(given["scope"], "scope", (str,)) if "scope" in given else "global"
        buf = Buffer(name, self.dims(given["extents"], False), self.exprs.dtype(given["dtype"]), scope=scope)
        self.allocations.add(id(buf))
        return buf

    MAX_CONST_ELEMENTS = 4096

    def const_allocation(self, name: str, call: ast.Call):
        """``x = T.allocate_const([1, 2, 3, 4], "int32", extents=[4])``: storage holding those
        values (row-major), read through ``T.decl_buffer(..., data=x)``. Held as an allocation
        filled by one store per element before the statements after it (printed so): constants
        a kernel embeds are small; larger ones belong at the graph level (``R.const``)."""
        kw = {k.arg: k.value for k in call.keywords}
        names = ("data", "dtype", "extents")
        for k in call.keywords:
            if k.arg not in names:
                raise self.error(f"unknown argument {k.arg!r} of T.allocate_const", k.value)
        given = dict(zip(names, call.args)) | kw
        if len(call.args) > 3 or set(names) - set(given):
            raise self.error("T.allocate_const takes data, dtype and extents: "
                             "T.allocate_const([1, 2], \"int32\", [2])", call)
        dtype = self.exprs.dtype(given["dtype"])
        data = self.exprs.python_value(given["data"])
        if not isinstance(data, (list, tuple)) or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                          for v in data):
            raise self.error("T.allocate_const's data is a flat list of numbers", given["data"])
        shape = self.dims(given["extents"], False)
        if not all(E.is_const_int(d) for d in shape):
            raise self.error("T.allocate_const's extents are constants", given["extents"])
        extents = [d.value for d in shape]
        count = int(np.prod(extents)) if extents else 1
        if count != len(data):
            raise self.error(f"T.allocate_const has {len(data)} values for extents {extents} "
                             f"({count} elements)", call)
        if count > self.MAX_CONST_ELEMENTS:
            raise self.error(f"T.allocate_const of {count} elements: constants over "
                             f"{self.MAX_CONST_ELEMENTS} elements belong at the graph level (R.const)", call)
        buf = Buffer(name, shape, dtype)
        self.allocations.add(id(buf))
        stores = []
        for flat, v in enumerate(data):
            index = np.unravel_index(flat, extents) if extents else ()
            try:
                value = E.const(v, dtype)
            except ValueError as err:
                raise self.error(f"T.allocate_const: {err}", given["data"]) from None
            stores.append(BufferStore(buf, value, [E.const(int(i), d.dtype) for i, d in zip(index, shape)]))
        return buf, stores

    def parse_launch_thread(self, name: str | None, call: ast.Call, rest, frame) -> Stmt:
        """``bx = T.launch_thread("blockIdx.x", 4)`` or ``T.launch_thread(tx, 32)`` after
        ``tx = T.env_thread("threadIdx.x")``: the rest of the body runs once per thread, i.e.
        a thread-bound loop (printed as ``T.thread_binding``)."""
        self.exprs.expect_args(call, 2)
        first = call.args[0]
        env = self.scope.lookup(first.id) if isinstance(first, ast.Name) else MISSING
        if isinstance(env, EnvThread):
            if name is not None:
                raise self.error("T.launch_thread of an env_thread binds no new name", call)
            name, tag = env.name, env.tag
        else:
            if name is None:
                raise self.error("write `v = T.launch_thread(\"threadIdx.x\", extent)` or launch "
                                 "an env_thread: T.launch_thread(tx, extent)", call)
            tag = self.exprs.constant(first, "thread tag", (str,))
        extent = self.int_expr(call.args[1])
        var = E.Var(name, extent.dtype)
        self.loops.append(LoopInfo(var, Range(E.const(0, extent.dtype), extent)))
        self.jump_targets.append("thread_binding")
        body = self.scoped_body(rest, frame, name, var)
        self.jump_targets.pop()
        self.loops.pop()
        return For(var, E.const(0, extent.dtype), extent, "thread_binding", body, thread_tag=tag)

    def parse_attr(self, call: ast.Call, stmts, frame) -> Stmt:
        """TVM's attribute statement, ``T.attr(node, key, value)`` over the statements after it
        (or ``with T.attr(...):`` over its body), for the keys with a meaning here:
        ``"thread_extent"`` on ``T.iter_var(v, T.Range(0, n), "ThreadIndex", tag)`` (or on an
        env_thread) launches ``n`` threads, i.e. a ``T.thread_binding`` loop over what follows;
        a ``"pragma_*"`` hint over exactly one loop is kept as that loop's annotation (where
        TVM's schedules write such hints; nothing here reads them, the loop runs as written)."""
        if len(call.args) != 3 or call.keywords:
            raise self.error("T.attr takes (node, key, value)", call)
        node, key_node, value_node = call.args
        key = self.exprs.constant(key_node, "attribute key", (str,))
        if key == "thread_extent":
            return self.attr_thread_extent(node, value_node, stmts, frame)
        if key == "reduce_scope":   # the reducer of the T.tvm_thread_allreduce calls it encloses
            self.reduce_scopes.append(self.comm_reducer(node))
            try:
                return self.attr_body(stmts, frame)
            finally:
                self.reduce_scopes.pop()
        if key == "volatile_scope":   # TVM's hint that a buffer is read by other threads: it always is here
            return self.attr_body(stmts, frame)
        if key.startswith("pragma_"):
            value = self.exprs.python_value(value_node)
            if self.t_call(node) in DTYPE_NAMES or isinstance(node, ast.Constant):
                self.exprs.eval(node)
            else:
                raise self.error(f"a {key} attribute's node is written T.int32(0) here", node)
            body = self.nested_body(stmts)
            if not isinstance(body, For):
                raise self.error(f"a {key} attribute must enclose exactly one loop (it is kept as that "
                                 "loop's annotation)", call)
            return body.replace(annotations={**body.annotations, key: value})
        raise self.error(f"T.attr with key {key!r} is not supported; the keys read here are "
                         "\"thread_extent\", \"reduce_scope\", \"volatile_scope\" and \"pragma_*\"", key_node)

    def attr_body(self, stmts, frame) -> Stmt:
        self.scope.push()
        try:
            return self.parse_body(stmts, frame)
        finally:
            self.scope.pop()

    def comm_reducer(self, node) -> thread_sync.CommReducer:
        """``T.comm_reducer(lambda x0.., y0..: result(s), [identities])``."""
        if self.t_call(node) != "comm_reducer" or len(node.args) != 2 or node.keywords:
            raise self.error("a reduce_scope attribute's node is T.comm_reducer(lambda x, y: ..., [identity])",
                             node)
        fn, idents = node.args
        if not isinstance(fn, ast.Lambda) or not isinstance(idents, (ast.List, ast.Tuple)) \
                or fn.args.vararg or fn.args.kwarg or fn.args.kwonlyargs or fn.args.defaults:
            raise self.error("T.comm_reducer takes a lambda of plain parameters and a list of identities", node)
        # a bare integer is TVM's int32 (the printer writes an int32 identity so)
        identities = [E.const(v, "int32") if isinstance(v := self.exprs.python_value(e), int) and not
                      isinstance(v, bool) else self.exprs.expr(e) for e in idents.elts]
        params = [a.arg for a in fn.args.posonlyargs + fn.args.args]
        n = len(identities)
        if n == 0 or len(params) != 2 * n:
            raise self.error(f"T.comm_reducer: {n} identities need a lambda of {2 * n} parameters, "
                             f"got {len(params)}", fn)
        lhs = [E.Var(p, i.dtype) for p, i in zip(params[:n], identities)]
        rhs = [E.Var(p, i.dtype) for p, i in zip(params[n:], identities)]
        self.scope.push()
        try:
            for var in lhs + rhs:
                self.scope.define(var.name, var)
            parts = fn.body.elts if isinstance(fn.body, ast.Tuple) else [fn.body]
            results = [self.exprs.expr(p) for p in parts]
        finally:
            self.scope.pop()
        try:
            return thread_sync.CommReducer(lhs, rhs, results, identities)
        except ValueError as err:
            raise self.error(str(err), node) from None

    def thread_allreduce(self, call: ast.Call) -> Stmt:
        """``T.tvm_thread_allreduce(T.uint32(n), sources.., condition, results.., threads..)``."""
        if not self.reduce_scopes:
            raise self.error(f"T.{thread_sync.ALLREDUCE} must be inside T.attr(T.comm_reducer(...), "
                             "\"reduce_scope\", ...), which gives its reducer", call)
        reducer = self.reduce_scopes[-1]
        n = len(reducer.identities)
        args = call.args
        for k in call.keywords:   # TVM's printer adds the call's type, dtype="handle"
            if k.arg != "dtype" or self.exprs.python_value(k.value) != "handle":
                raise self.error(f"T.{thread_sync.ALLREDUCE} takes no keyword {k.arg}= (only dtype=\"handle\")",
                                 k.value)
        if len(args) < 2 * n + 3:
            raise self.error(f"T.{thread_sync.ALLREDUCE} takes (T.uint32({n}), {n} source(s), a condition, "
                             f"{n} result element(s), thread index variables)", call)
        count = self.exprs.expr(args[0])
        if not (isinstance(count, E.IntImm) and count.value == n):
            raise self.error(f"T.{thread_sync.ALLREDUCE}: the value count must be {n}, its reducer's", args[0])
        sources = [self.exprs.expr(a) for a in args[1:1 + n]]
        condition = self.exprs.expr(args[1 + n])
        results = [self.exprs.expr(a) for a in args[2 + n:2 + 2 * n]]
        threads = [self.exprs.expr(a) for a in args[2 + 2 * n:]]
        bound = {id(info.var) for info in self.loops}
        for var, node in zip(threads, args[2 + 2 * n:]):
            if not isinstance(var, E.Var) or id(var) not in bound:
                raise self.error(f"T.{thread_sync.ALLREDUCE}: {ast.unparse(node)} is not an enclosing "
                                 "thread index (T.launch_thread)", node)
        try:
            node = thread_sync.ThreadAllreduce(reducer, sources, condition, results, threads)
        except (TypeError, ValueError) as err:
            raise self.error(str(err), call) from None
        node.span = self.exprs.where(call)
        return node

    def attr_thread_extent(self, node, value_node, stmts, frame) -> Stmt:
        env = self.scope.lookup(node.id) if isinstance(node, ast.Name) else MISSING
        if isinstance(env, EnvThread):
            name, tag = env.name, env.tag
            dtype = None
        elif self.t_call(node) == "iter_var" and len(node.args) == 4 and isinstance(node.args[0], ast.Name):
            var_node, dom, kind_node, tag_node = node.args
            name = var_node.id
            declared = self.scope.lookup(name)
            dtype = declared.dtype if isinstance(declared, E.Var) else None
            if self.exprs.constant(kind_node, "iter_var kind", (str,)) != "ThreadIndex":
                raise self.error("a thread_extent attribute's iter_var is a \"ThreadIndex\"", kind_node)
            tag = self.exprs.constant(tag_node, "thread tag", (str,))
            if self.t_call(dom) != "Range" or len(dom.args) != 2 \
                    or not E.is_const_int(self.exprs.to_prim(self.exprs.eval(dom.args[0]), dom.args[0]), 0):
                raise self.error("a thread's range is written T.Range(0, extent)", dom)
        else:
            raise self.error("a thread_extent attribute names its thread with "
                             "T.iter_var(v, T.Range(0, n), \"ThreadIndex\", \"threadIdx.x\")", node)
        extent = self.int_expr(value_node)
        if dtype is not None:
            extent = E.cast(dtype, extent)
        var = E.Var(name, extent.dtype)
        self.loops.append(LoopInfo(var, Range(E.const(0, extent.dtype), extent)))
        self.jump_targets.append("thread_binding")
        body = self.scoped_body(stmts, frame, name, var)
        self.jump_targets.pop()
        self.loops.pop()
        return For(var, E.const(0, extent.dtype), extent, "thread_binding", body, thread_tag=tag)

    def scoped_body(self, stmts, frame, name, value) -> Stmt:
        self.scope.push()
        self.scope.define(name, value)
        body = self.parse_body(stmts, frame)
        self.scope.pop()
        return body

    def parse_assign(self, st: ast.Assign, frame) -> Stmt | None:
        if len(st.targets) != 1:
            raise self.error("chained assignment is not supported", st)
        target = st.targets[0]
        if isinstance(target, ast.Subscript):
            buf = self.store_buffer(target)
            indices = self.exprs.access_indices(self.exprs.index_list(target.slice))
            if isinstance(buf, AliasView):
                self.check_rank(buf, indices, target)
                buf, indices = buf.flat, buf.position(indices)
            self.check_rank(buf, indices, target)
            self.check_ramps(buf, indices, target)
            return BufferStore(buf, self.exprs.expr(st.value, buf.dtype), indices)
        if isinstance(target, ast.Tuple) and (self.t_call(st.value) or "").startswith("axis."):
            self.parse_axes(target.elts, st.value, frame)
            return None
        raise self.error(f"unsupported assignment target {ast.unparse(target)}", target)

    def store_buffer(self, target: ast.Subscript) -> Buffer:
        node = target.value
        value = self.scope.lookup(node.id) if isinstance(node, ast.Name) else MISSING
        if value is MISSING:
            raise self.error(f"store to undeclared buffer {ast.unparse(node)!r}", node)
        if isinstance(value, AliasView):
            return value
        if not isinstance(value, Buffer):
            raise self.error(f"{ast.unparse(node)!r} is not a buffer", node)
        if isinstance(value, Pointer):
            raise self.error(f"{value.name!r} is a pointer: write through a buffer over it, "
                             f"T.decl_buffer(shape, {value.dtype!r}, data={value.name})", node)
        return value

    def check_rank(self, buf: Buffer, indices, node) -> None:
        if len(indices) != buf.ndim:
            raise self.error(f"buffer {buf.name!r} has {buf.ndim} dimension(s), "
                             f"indexed with {len(indices)}", node)

    def check_ramps(self, buf: Buffer, indices, node) -> None:
        """A constant ``T.Ramp`` index must stay inside a constant dimension (found here, at the
        line, rather than as an out-of-bounds access when the function runs)."""
        for dim, (index, extent) in enumerate(zip(indices, buf.shape)):
            if not (isinstance(index, E.Ramp) and isinstance(index.base, E.IntImm)
                    and isinstance(index.stride, E.IntImm) and isinstance(extent, E.IntImm)):
                continue
            ends = (index.base.value, index.base.value + index.stride.value * (index.lanes - 1))
            if min(ends) < 0 or max(ends) >= extent.value:
                raise self.error(f"T.Ramp({index.base.value}, {index.stride.value}, {index.lanes}) reaches "
                                 f"elements {min(ends)} .. {max(ends)} of dimension {dim} of buffer "
                                 f"{buf.name!r}, whose extent is {extent.value}", node)

    def parse_aug_assign(self, st: ast.AugAssign) -> Stmt:
        if not isinstance(st.target, ast.Subscript) or type(st.op) not in _AUG_OPS:
            raise self.error("augmented assignment is only supported as a buffer update B[i] += e", st)
        buf = self.store_buffer(st.target)
        indices = self.exprs.access_indices(self.exprs.index_list(st.target.slice))
        if isinstance(buf, AliasView):
            self.check_rank(buf, indices, st.target)
            buf, indices = buf.flat, buf.position(indices)
        self.check_rank(buf, indices, st.target)
        self.check_ramps(buf, indices, st.target)
        value = _AUG_OPS[type(st.op)](E.BufferLoad(buf, indices), self.exprs.eval(st.value))
        return BufferStore(buf, value, indices)

    def parse_expr_stmt(self, st: ast.Expr, frame) -> Stmt | None:
        kind = self.t_call(st.value)
        call = st.value
        if kind == "evaluate":
            self.exprs.expect_args(call, 1)
            if self.t_call(call.args[0]) == "assume":
                self.assumption(call.args[0])
                return None
            if self.t_call(call.args[0]) == thread_sync.ALLREDUCE:   # T.evaluate(T.tvm_thread_allreduce(..))
                return self.thread_allreduce(call.args[0])
            return Evaluate(self.exprs.expr(call.args[0]))
        if kind == "func_attr":
            if frame is None or not frame.is_root:
                raise self.error("T.func_attr must be at the top level of the function", st)
            self.exprs.expect_args(call, 1)
            value = _plain_literals(self.exprs.python_value(call.args[0]))
            if not isinstance(value, dict):
                raise self.error("T.func_attr takes a dict", call)
            self.attrs.update({_attr_key(k): v for k, v in value.items()})
            return None
        if kind == "Assert":
            return self.assert_call(call)
        if kind == thread_sync.ALLREDUCE:
            return self.thread_allreduce(call)
        if kind in ("reads", "writes", "where", "block_attr"):
            self.parse_block_meta(kind, call, frame)
            return None
        if kind == "assume":
            self.assumption(call)
            return None
        if kind in _EFFECT_CALLS:
            # TVM evaluates a bare call statement; only calls with an effect mean anything here
            return Evaluate(self.exprs.expr(call))
        if self.calls_subroutine(st.value):
            # a call of another prim_func: TVM evaluates the statement for the call's effects
            return Evaluate(self.exprs.expr(st.value))
        if isinstance(st.value, ast.Constant) and isinstance(st.value.value, str):
            return None  # a comment-like string
        if kind in _TE_ERA:
            raise self.error(f"T.{kind} is TVM's pre-TensorIR (TE-lowering) form and is not "
                             "supported: allocate with T.alloc_buffer / T.decl_buffer", st)
        raise self.error(f"expression statement {ast.unparse(st.value)} has no effect; "
                         "use T.evaluate(...) to keep it", st)

    def calls_subroutine(self, node) -> bool:
        module = self.exprs.module
        if module is None:
            return False
        missing = lambda n: self.scope.lookup(n) is MISSING  # noqa: E731
        return any(isinstance(sub, ast.Call) and module.callee(sub.func, missing) is not None
                   for sub in ast.walk(node))

    def assumption(self, call: ast.Call) -> None:
        """``T.assume(cond)``: a fact TVM's simplifier may use. It has no effect on what the
        function computes, so it is checked (a boolean expression) and not kept."""
        self.exprs.expect_args(call, 1)
        cond = self.exprs.expr(call.args[0])
        if cond.dtype != "bool":
            raise self.error(f"T.assume takes a boolean condition, got dtype {cond.dtype}",
                             call.args[0])

    def parse_bind(self, call: ast.Call, rest, frame) -> Stmt:
        """``T.Bind(value, var=j)`` after ``j = T.int32()``: ``j`` is ``value`` for the rest of
        the body (TVM's explicit let statement)."""
        kw = {k.arg: k.value for k in call.keywords}
        if any(k.arg != "var" for k in call.keywords) or len(call.args) + len(kw) != 2 \
                or not call.args:
            raise self.error("write T.Bind(value, var=name) with name declared as name = T.int32()",
                             call)
        var_node = kw.get("var", call.args[1] if len(call.args) > 1 else None)
        var = self.scope.lookup(var_node.id) if isinstance(var_node, ast.Name) else MISSING
        if not isinstance(var, E.Var):
            raise self.error(f"T.Bind binds a declared variable (name = T.int32()), got "
                             f"{ast.unparse(var_node)}", var_node)
        value = self.exprs.expr(call.args[0], var.dtype)
        if value.dtype != var.dtype:
            raise self.error(f"T.Bind: {var.name!r} is {var.dtype} but the value is {value.dtype}",
                             call.args[0])
        # a plain let variable: the declaration's size-var facts (lower bound 0) do not apply
        bound = E.Var(var.name, var.dtype)
        return LetStmt(bound, value, self.scoped_body(rest, frame, var_node.id, bound))

    def branch_condition(self, node: ast.expr) -> E.PrimExpr:
        """An ``if``/``while`` condition: a boolean, or one integer meaning ``!= 0`` as in C
        (TVM's script takes ``if n:`` with ``n: T.int32``; it reads back as ``if n != 0:``)."""
        cond = self.exprs.expr(node)
        if dt.is_int(cond.dtype) and dt.lanes(cond.dtype) == 1:
            return E.NE(cond, E.const(0, cond.dtype))
        if cond.dtype != "bool":
            raise self.error(f"a condition must be one boolean or integer, got {cond.dtype}", node)
        return cond

    def parse_if(self, st: ast.If) -> Stmt:
        cond = self.branch_condition(st.test)
        then = self.nested_body(st.body)
        other = self.nested_body(st.orelse) if st.orelse else None
        return IfThenElse(cond, then, other)

    def parse_while(self, st: ast.While) -> Stmt:
        """``while cond:`` (tir.While): the condition is read again before each iteration."""
        if st.orelse:
            raise self.error("while-else is not supported", st)
        cond = self.branch_condition(st.test)
        self.jump_targets.append("while")
        try:
            return While(cond, self.nested_body(st.body))
        finally:
            self.jump_targets.pop()

    def parse_assert(self, test, msg, node) -> Stmt:
        """``assert cond, "message"`` / ``T.Assert(cond, "message")`` (tir.AssertStmt)."""
        cond = self.exprs.expr(test)
        if cond.dtype != "bool":
            raise self.error(f"an assert condition must be one boolean, got {cond.dtype}", test)
        if isinstance(msg, ast.Tuple) and len(msg.elts) == 2 and isinstance(msg.elts[1], (ast.List, ast.Tuple)):
            # newer TVM: assert cond, ("ValueError", ["part", "part"]): an error kind and a message
            # in parts; the parts joined are the message (a failure here is KernelAssertionError
            # whatever the kind, which is checked to be a name)
            kind = self.exprs.constant(msg.elts[0], "an assert's error kind", (str,))
            if not kind.isidentifier():
                raise self.error(f"an assert's error kind is a name such as \"ValueError\", got {kind!r}",
                                 msg.elts[0])
            message = "".join(self.exprs.constant(p, "a part of an assert's message", (str,))
                              for p in msg.elts[1].elts)
            return AssertStmt(cond, message)
        message = "" if msg is None else self.exprs.constant(msg, "an assert's message", (str,))
        return AssertStmt(cond, message)

    def assert_call(self, call: ast.Call) -> Stmt:
        if call.keywords or len(call.args) != 2:
            raise self.error("T.Assert takes a condition and a message string", call)
        return self.parse_assert(call.args[0], call.args[1], call)

    def nested_body(self, stmts) -> Stmt:
        self.scope.push()
        body = self.parse_body(stmts)
        self.scope.pop()
        return body

    # ---------------------------------------------------------------- loops
    def parse_for(self, st: ast.For) -> Stmt:
        if st.orelse:
            raise self.error("for-else is not supported", st)
        call = st.iter
        kind = self.t_call(call)
        if kind == "grid":
            targets = st.target.elts if isinstance(st.target, ast.Tuple) else [st.target]
            extents = self.grid_extents(call)
            if call.keywords or len(targets) != len(extents):
                raise self.error(f"T.grid has {len(extents)} extent(s) but the loop binds "
                                 f"{len(targets)} variable(s)", st)
            loops = []
            for target, (arg, value) in zip(targets, extents):
                self.require_loop_name(target)
                ext = self.exprs.to_prim(value, arg)
                if not dt.is_int(ext.dtype):
                    raise self.error(f"expected an integer expression, got dtype {ext.dtype}", arg)
                loops.append((target, E.const(0, ext.dtype), ext, "serial", None, {}, None))
        elif kind in _LOOP_KINDS or (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                                     and call.func.id == "range" and kind is None):
            loops = [self.loop_header(st.target, call, _LOOP_KINDS.get(kind, "serial"))]
        else:
            raise self.error(f"unsupported loop iterator {ast.unparse(call)}; use range, T.grid, "
                             "T.serial, T.parallel, T.vectorized, T.unroll or T.thread_binding", call)
        return self.build_loops(loops, st.body)

    def grid_extents(self, call: ast.Call) -> list:
        """(node, value) per extent of ``T.grid``; ``*A.shape`` spreads a buffer's shape."""
        out = []
        for arg in call.args:
            if isinstance(arg, ast.Starred):
                values = self.exprs.eval(arg.value)
                if not isinstance(values, (list, tuple)):
                    raise self.error(f"*{ast.unparse(arg.value)} must be a tuple of extents such as A.shape",
                                     arg)
                out += [(arg, v) for v in values]
            else:
                out.append((arg, self.exprs.eval(arg)))
        return out

    def require_loop_name(self, target) -> None:
        if not isinstance(target, ast.Name):
            raise self.error(f"loop targets must be names, got {ast.unparse(target)}", target)

    def loop_header(self, target, call: ast.Call, kind: str):
        if isinstance(target, (ast.Tuple, ast.List)):
            raise self.error("this loop binds exactly one variable", target)
        self.require_loop_name(target)
        kw = {k.arg: k.value for k in call.keywords}
        allowed = {"annotations"} | ({"thread"} if kind == "thread_binding" else {"step"})
        for k in call.keywords:
            if k.arg not in allowed:
                raise self.error(f"unknown argument {k.arg!r} of {ast.unparse(call.func)}", k.value)
        args = list(call.args)
        if kind == "thread_binding" and args and isinstance(args[-1], ast.Constant) \
                and isinstance(args[-1].value, str):
            # TVM's T.thread_binding(128, "threadIdx.x"): the thread axis positionally
            if "thread" in kw:
                raise self.error("T.thread_binding names its thread axis twice", call)
            kw["thread"] = args.pop()
        step_node = kw.get("step")
        if len(args) == 3 and kind != "thread_binding":
            if step_node is not None:
                raise self.error(f"{ast.unparse(call.func)} gives its step twice", call)
            step_node = args.pop()
        if len(args) not in (1, 2):
            raise self.error(f"{ast.unparse(call.func)} takes an extent, (min, max) or (min, max, step)", call)
        raw = [self.exprs.eval(a) for a in args]
        for node, v in zip(args, raw):
            if not dt.is_int(self.exprs.to_prim(v, node).dtype):
                raise self.error(f"loop bounds must be integers, got {ast.unparse(node)}", node)
        if len(raw) == 1:
            ext = self.exprs.to_prim(raw[0], args[0])
            lo = E.const(0, ext.dtype)
        else:
            lo, hi = E._promote_pair(*raw)
            ext = extent_between(lo, hi)
        step = None
        if step_node is not None:
            step, ext = self.loop_step(step_node, ext)
        thread = None
        if kind == "thread_binding":
            if "thread" not in kw:
                raise self.error("T.thread_binding needs thread=\"threadIdx.x\" (or another axis)", call)
            thread = self.exprs.constant(kw["thread"], "thread", (str,))
        annotations = self.exprs.python_value(kw["annotations"]) if "annotations" in kw else {}
        if not isinstance(annotations, dict):
            raise self.error("annotations must be a dict", kw["annotations"])
        return target, lo, ext, kind, thread, annotations, step

    def loop_step(self, node: ast.expr, ext: E.PrimExpr):
        """``for i in range(lo, hi, s)``: the loop counts k over max(ceil((hi - lo) / s), 0)
        trips and the body reads i as lo + k * s (TVM's CanonicalizeLoop form). ``s`` is a nonzero
        constant (negative counts down: ``range(7, -1, -1)``) or a run-time integer, whose sign
        decides the count as Python's ``range`` does (a zero step stops the function with an
        error before the loop). Returns the step (None for 1) and the trip count."""
        zero = E.const(0, ext.dtype)
        value = self.exprs.eval(node)
        if isinstance(value, bool) or not (isinstance(value, int) or isinstance(value, E.PrimExpr)
                                           and dt.is_int(value.dtype) and dt.lanes(value.dtype) == 1):
            raise self.error(f"a loop step must be an integer, got {ast.unparse(node)}", node)
        if isinstance(value, E.IntImm):
            value = value.value
        if isinstance(value, int):
            if value == 0:
                raise self.error("a loop step must not be zero", node)
            if value == 1:
                return None, ext
            if value > 0:
                return E.const(value, ext.dtype), E.max_(E.ceildiv(ext, E.const(value, ext.dtype)), zero)
            return E.const(value, ext.dtype), E.max_(E.ceildiv(E.sub(zero, ext), E.const(-value, ext.dtype)), zero)
        step = E.cast(ext.dtype, value) if value.dtype != ext.dtype else value
        # ceil(ext / s) = -floor(-ext / s) for either sign of s
        return step, E.max_(E.sub(zero, E.floordiv(E.sub(zero, ext), step)), zero)

    def build_loops(self, loops, body_stmts) -> Stmt:
        self.scope.push()
        made = []
        for target, lo, ext, kind, thread, loop_annotations, step in loops:
            if step is not None:  # counts from 0; the name reads lo + k * step
                var = E.Var(target.id, ext.dtype)
                self.scope.define(target.id, E.add(lo, E.mul(var, step)))
                self.loops.append(LoopInfo(var, Range(E.const(0, ext.dtype), ext)))
                made.append((var, E.const(0, ext.dtype), ext, kind, thread, loop_annotations))
                continue
            var = E.Var(target.id, ext.dtype)
            self.scope.define(target.id, var)
            self.loops.append(LoopInfo(var, Range(lo, ext)))
            made.append((var, lo, ext, kind, thread, loop_annotations))
        self.jump_targets.append(made[-1][3])
        try:
            body = self.parse_body(body_stmts)
        finally:
            self.jump_targets.pop()
        for (var, lo, ext, kind, thread, loop_annotations), (*_, step) in zip(reversed(made), reversed(loops)):
            self.loops.pop()
            body = For(var, lo, ext, kind, body, thread_tag=thread, annotations=loop_annotations)
            if step is not None and not isinstance(step, E.IntImm):
                body = seq(AssertStmt(E.NE(step, E.const(0, step.dtype)),
                                      f"the step of loop {var.name!r} is zero"), body)
        self.scope.pop()
        return body
