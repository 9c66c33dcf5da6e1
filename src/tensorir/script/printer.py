"""Print PrimFuncs (and any loop-level node) in the canonical explicit script form.

The output re-parses to a structurally equal function, and printing is a
fixpoint: ``print_prim_func(from_source(print_prim_func(f))) == print_prim_func(f)``.
"""
from __future__ import annotations

from .. import expr as E
from ..buffer import Buffer, Pointer
from ..dispatch import ClassDispatch, handles
from ..function import PrimFunc
from ..functor import collect
from ..node import Node
from ..stmt import (Allocate, Block, BlockRealize, Break, BufferRegion, BufferStore, Continue, Evaluate, For,
                    IfThenElse, IterVar, LetStmt, MatchBufferRegion, Range, SeqStmt, Stmt, While,
                    AssertStmt, is_true)
from ..structural import structural_equal
from ..thread_sync import ALLREDUCE, STORAGE_SYNC, CommReducer, ThreadAllreduce
from .expr_printer import ExprPrinter, Namer, format_expr, py_literal
from .literals import is_identifier, string_literal

_LOOP_FUNCS = {"serial": "T.serial", "parallel": "T.parallel", "vectorized": "T.vectorized",
               "unrolled": "T.unroll", "thread_binding": "T.thread_binding"}
HEADER = "# from tensorir import T"
_AXIS_FUNCS = {"S": "T.axis.spatial", "R": "T.axis.reduce", "scan": "T.axis.scan", "opaque": "T.axis.opaque"}


def _same(a, b) -> bool:
    return structural_equal(a, b, map_free_vars=False)


def _is_var(node) -> bool:
    return isinstance(node, E.Var)


class StmtPrinter(ClassDispatch):
    def __init__(self, namer: Namer | None = None, step: str = "    "):
        self.name = namer or Namer()
        self.exprs = ExprPrinter(self.name)
        self.step = step
        self.loops: dict[int, For] = {}  # enclosing loops by loop-var id (for T.axis.remap)
        self.views_of: dict[int, list[Buffer]] = {}  # storage buffer id -> views still to declare

    def e(self, expr, dtype: str | None = None) -> str:
        return self.exprs.fmt(expr, dtype)

    # ---------------------------------------------------------------- pieces
    def shape(self, dims, as_strings: bool = False) -> str:
        parts = []
        for d in dims:
            text = self.e(d)
            bare = E.is_const_int(d) and d.dtype == "int64"
            parts.append(string_literal(text) if as_strings and not bare else text)
        return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"

    def buffer_args(self, buf: Buffer, signature: bool = False) -> str:
        args = [self.shape(buf.shape, signature), f'"{buf.dtype}"']
        if buf.strides:
            args.append("strides=" + self.shape(buf.strides, signature))
        if not (E.is_const_int(buf.elem_offset, 0) and buf.elem_offset.dtype == "int64"):
            offset = self.e(buf.elem_offset)
            args.append(f"elem_offset={string_literal(offset)}" if signature else f"elem_offset={offset}")
        if buf.scope != "global":
            args.append(f"scope={string_literal(buf.scope)}")
        if isinstance(buf.data, Pointer):
            args.append(f"data={self.name(buf.data)}")
        elif buf.data is not None:
            args.append(f"data={self.name(buf.data)}.data")
        return ", ".join(args)

    def view_decls(self, storage: Buffer, indent: str) -> list[str]:
        """``v = T.Buffer(..., data=storage.data)`` for the views of ``storage``, once each,
        right where ``storage`` is declared (so the parser finds it in scope)."""
        views = self.views_of.pop(id(storage), [])
        return [f"{indent}{self.name(v)} = T.Buffer({self.buffer_args(v)})" for v in views]

    def range_end(self, r: Range) -> str:
        """``min + extent`` in the form the parser's extent_between reads back exactly."""
        if E.is_const_int(r.min, 0):
            return self.e(r.extent)
        return self.e(E.add(r.min, r.extent))

    def region(self, region: BufferRegion) -> str:
        parts = []
        for r in region.region:
            if E.is_const_int(r.extent, 1) and r.extent.dtype == "int64":
                parts.append(self.e(r.min))
            else:
                parts.append(f"{self.e(r.min)}:{self.range_end(r)}")
        return f"{self.name(region.buffer)}[{', '.join(parts) if parts else '()'}]"

    # ---------------------------------------------------------------- statements
    def stmt(self, node: Stmt, indent: str, last: bool = True) -> list[str]:
        """Lines for ``node``; ``last`` is False when statements follow it in a sequence
        (then a let or allocation must use the scoped ``with`` form)."""
        method = self.handler_for(type(node))
        if method is None:
            raise TypeError(f"cannot print statement {type(node).__name__}")
        return method(self, node, indent, last)

    def body(self, node: Stmt, indent: str) -> list[str]:
        return self.stmt(node, indent, True)

    @handles(SeqStmt)
    def stmt_SeqStmt(self, node: SeqStmt, indent, last):
        lines = []
        for i, s in enumerate(node.seq):
            lines += self.stmt(s, indent, last and i == len(node.seq) - 1)
        return lines or [indent + "pass"]

    @handles(BufferStore)
    def stmt_BufferStore(self, node: BufferStore, indent, last):
        target = self.exprs.load(node.buffer, node.indices)
        # A bare literal adopts the buffer's dtype when parsed; a value of another dtype prints typed.
        if node.value.dtype == node.buffer.dtype:
            return [f"{indent}{target} = {self.e(node.value, node.buffer.dtype)}"]
        text = self.e(node.value)
        if isinstance(node.value, (E.IntImm, E.FloatImm)) and not text.startswith("T."):
            text = f"T.{node.value.dtype}({text})"
        return [f"{indent}{target} = {text}"]

    @handles(Evaluate)
    def stmt_Evaluate(self, node: Evaluate, indent, last):
        value = node.value
        if isinstance(value, E.Call) and value.op == E.RET and len(value.args) == 1:
            return [f"{indent}return {self.e(value.args[0], value.dtype)}"]
        if isinstance(value, E.CallFunc) or (isinstance(value, E.Call) and value.op == STORAGE_SYNC):
            return [f"{indent}{self.e(value)}"]   # a call for its effects (another prim_func, a barrier)
        return [f"{indent}T.evaluate({self.e(value)})"]

    @handles(ThreadAllreduce)
    def stmt_ThreadAllreduce(self, node: ThreadAllreduce, indent, last):
        reducer = node.reducer
        params = ", ".join(self.name(v) for v in reducer.lhs + reducer.rhs)
        results = [self.e(r) for r in reducer.results]
        body = results[0] if len(results) == 1 else f"({', '.join(results)})"
        idents = ", ".join(self.e(i) for i in reducer.identities)
        args = [f"T.uint32({len(node.sources)})", *(self.e(s) for s in node.sources), self.e(node.condition),
                *(self.e(r) for r in node.results), *(self.e(t) for t in node.threads)]
        inner = indent + self.step
        return [f"{indent}with T.attr(T.comm_reducer(lambda {params}: {body}, [{idents}]), \"reduce_scope\", "
                f"T.reinterpret(\"handle\", T.uint64(0))):",
                f"{inner}T.{ALLREDUCE}({', '.join(args)})"]

    @handles(IfThenElse)
    def stmt_IfThenElse(self, node: IfThenElse, indent, last):
        lines = [f"{indent}if {self.e(node.condition)}:"] + self.body(node.then_case, indent + self.step)
        if node.else_case is not None:
            lines += [f"{indent}else:"] + self.body(node.else_case, indent + self.step)
        return lines

    @handles(While)
    def stmt_While(self, node: While, indent, last):
        return [f"{indent}while {self.e(node.condition)}:"] + self.body(node.body, indent + self.step)

    @handles(Break)
    def stmt_Break(self, node, indent, last):
        return [f"{indent}break"]

    @handles(Continue)
    def stmt_Continue(self, node, indent, last):
        return [f"{indent}continue"]

    @handles(AssertStmt)
    def stmt_AssertStmt(self, node: AssertStmt, indent, last):
        return [f"{indent}assert {self.e(node.condition)}, {string_literal(node.message)}"]

    @handles(LetStmt)
    def stmt_LetStmt(self, node: LetStmt, indent, last):
        value = self.e(node.value)
        name = self.name(node.var)
        if last:
            return [f"{indent}{name} = {value}"] + self.body(node.body, indent)
        return [f"{indent}with T.LetStmt({value}) as {name}:"] + self.body(node.body, indent + self.step)

    @handles(Allocate)
    def stmt_Allocate(self, node: Allocate, indent, last):
        decl = f"T.decl_buffer({self.buffer_args(node.buffer)})"
        name = self.name(node.buffer)
        if last:
            return [f"{indent}{name} = {decl}"] + self.view_decls(node.buffer, indent) \
                + self.body(node.body, indent)
        inner = indent + self.step
        return [f"{indent}with {decl} as {name}:"] + self.view_decls(node.buffer, inner) \
            + self.body(node.body, inner)

    @handles(For)
    def stmt_For(self, node: For, indent, last):
        chain = [node]
        while self._plain_serial(chain[-1]) and self._plain_serial(chain[-1].body) and not (
                {id(v) for v in collect(chain[-1].body.extent, _is_var)} & {id(f.loop_var) for f in chain}):
            chain.append(chain[-1].body)
        for f in chain:
            self.loops[id(f.loop_var)] = f
        names = ", ".join(self.name(f.loop_var) for f in chain)
        if len(chain) > 1:
            head = f"for {names} in T.grid({', '.join(self.e(f.extent) for f in chain)}):"
        else:
            head = f"for {names} in {self.loop_iter(node)}:"
        lines = [indent + head] + self.body(chain[-1].body, indent + self.step)
        for f in chain:
            del self.loops[id(f.loop_var)]
        return lines

    @staticmethod
    def _plain_serial(node) -> bool:
        return isinstance(node, For) and node.kind == "serial" and not node.annotations \
            and E.is_const_int(node.min, 0) and node.min.dtype == node.extent.dtype

    def loop_iter(self, node: For) -> str:
        starts_at_zero = E.is_const_int(node.min, 0) and node.min.dtype == node.extent.dtype
        bounds = self.e(node.extent) if starts_at_zero else \
            f"{self.e(node.min)}, {self.range_end(Range(node.min, node.extent))}"
        if node.kind == "serial" and not node.annotations:
            return f"range({bounds})"
        extra = ""
        if node.thread_tag is not None:
            extra += f", thread={string_literal(node.thread_tag)}"
        if node.annotations:
            extra += f", annotations={py_literal(node.annotations)}"
        return f"{_LOOP_FUNCS[node.kind]}({bounds}{extra})"

    @handles(BlockRealize)
    def stmt_BlockRealize(self, node: BlockRealize, indent, last):
        block = node.block
        inner = indent + self.step
        lines = [f"{indent}with T.block({string_literal(block.name)}):"]
        lines += [inner + line for line in self.axes(node)]
        if not is_true(node.predicate):
            lines.append(f"{inner}T.where({self.e(node.predicate)})")
        lines.append(f"{inner}T.reads({', '.join(self.region(r) for r in block.reads)})")
        lines.append(f"{inner}T.writes({', '.join(self.region(r) for r in block.writes)})")
        if block.annotations:
            lines.append(f"{inner}T.block_attr({py_literal(block.annotations)})")
        lines += self.block_buffers(block, inner)
        if block.init is not None:
            lines += [f"{inner}with T.init():"] + self.body(block.init, inner + self.step)
        return lines + self.body(block.body, inner)

    def block_buffers(self, block: Block, indent: str) -> list[str]:
        lines = []
        for b in block.alloc_buffers:
            lines.append(f"{indent}{self.name(b)} = T.alloc_buffer({self.buffer_args(b)})")
            lines += self.view_decls(b, indent)
        for m in block.match_buffers:
            src = self.region(m.source)
            lines.append(f"{indent}{self.name(m.buffer)} = T.match_buffer({src}, {self.buffer_args(m.buffer)})")
            lines += self.view_decls(m.buffer, indent)
        return lines

    def axes(self, node: BlockRealize) -> list[str]:
        ivs, values = node.block.iter_vars, node.iter_values
        if ivs and self._remappable(ivs, values):
            names = ", ".join(self.name(iv.var) for iv in ivs)
            kinds = "".join(iv.kind for iv in ivs)
            loops = ", ".join(self.name(v) for v in values)
            return [f'{names} = T.axis.remap("{kinds}", [{loops}])']
        lines = []
        for iv, value in zip(ivs, values):
            fn = _AXIS_FUNCS[iv.kind]
            dom = iv.dom
            if E.is_const_int(dom.min, 0) and dom.min.dtype == dom.extent.dtype:
                dom_text = self.e(dom.extent, value.dtype)
            else:
                dom_text = f"({self.e(dom.min)}, {self.range_end(dom)})"
            lines.append(f"{self.name(iv.var)} = {fn}({dom_text}, {self.e(value)})")
        return lines

    def _remappable(self, ivs: tuple[IterVar, ...], values) -> bool:
        seen = set()
        for iv, value in zip(ivs, values):
            loop = self.loops.get(id(value)) if isinstance(value, E.Var) else None
            if loop is None or id(value) in seen or iv.var.dtype != value.dtype or iv.kind not in "SR":
                return False
            seen.add(id(value))
            if not (_same(iv.dom.min, loop.min) and _same(iv.dom.extent, loop.extent)):
                return False
        return True

    # ---------------------------------------------------------------- functions
    def function(self, func: PrimFunc, name: str | None, indent: str, decorator: str,
                 header: bool) -> str:
        inner = indent + self.step
        params = []
        for p in func.params:
            if isinstance(p, Pointer):
                params.append(f'{self.name(p)}: T.handle("{p.dtype}")')
            elif isinstance(p, Buffer):
                params.append(f"{self.name(p)}: T.Buffer({self.buffer_args(p, signature=True)})")
            else:
                params.append(f"{self.name(p)}: T.{p.dtype}")
        lines = [indent + HEADER, ""] if header else []
        result = f" -> T.{func.ret_dtype}" if func.ret_dtype is not None else ""
        lines += [f"{indent}{decorator}",
                  f"{indent}def {function_name(name or func.name)}({', '.join(params)}){result}:"]
        lines += [inner + line for line in self.declarations(func)]
        if func.attrs:
            lines.append(f"{inner}T.func_attr({py_literal(func.attrs)})")
        lines += self.top_level_views(func, inner)
        root = func.root_block
        if root is not None and self._implicit_root(func.body):
            lines += self.block_buffers(root, inner)
            lines += self.body(root.body, inner)
        else:
            lines += self.body(func.body, inner)
        return "\n".join(lines)

    def top_level_views(self, func: PrimFunc, indent: str) -> list[str]:
        """Declarations of the views of parameters (and of storage declared nowhere in the
        body, which then fails to parse with a clear error rather than printing silently)."""
        views = [b for b in collect(func.body, lambda n: isinstance(n, Buffer)) if b.data is not None]
        for v in views:
            self.views_of.setdefault(id(v.data), []).append(v)
        in_body = {id(n.buffer) for n in collect(func.body, lambda n: isinstance(n, Allocate))}
        for block in collect(func.body, lambda n: isinstance(n, Block)):
            in_body |= {id(b) for b in block.alloc_buffers}
            in_body |= {id(m.buffer) for m in block.match_buffers}
        lines = []
        for storage in dict.fromkeys(v.data for v in views):
            if id(storage) not in in_body:
                lines += self.view_decls(storage, indent)
        return lines

    @staticmethod
    def _implicit_root(realize: BlockRealize) -> bool:
        """The root block can stay implicit when the parser would re-create it as is."""
        block = realize.block
        if block.reads or block.writes or block.match_buffers or block.annotations or block.init \
                or not is_true(realize.predicate):
            return False
        return bool(block.alloc_buffers) or bool(collect(block.body, lambda n: isinstance(n, BlockRealize)))

    def declarations(self, func: PrimFunc) -> list[str]:
        """``n = T.int64(...)`` for every symbolic var (params only when they carry facts)."""
        bound: set[int] = set()
        for node in collect(func.body, lambda n: isinstance(n, (For, LetStmt, IterVar, CommReducer))):
            if isinstance(node, CommReducer):   # a reducer's lambda binds its parameters
                bound.update(id(v) for v in node.lhs + node.rhs)
            else:
                bound.add(id(node.loop_var if isinstance(node, For) else node.var))
        scalars = {id(p) for p in func.params if isinstance(p, E.Var)}
        order: list[E.Var] = []
        seen: set[int] = set()
        for part in (func.params, func.body):
            for v in collect(part, _is_var) if not isinstance(part, tuple) else \
                    [v for p in part for v in collect(p, _is_var)]:
                if id(v) not in seen and id(v) not in bound:
                    seen.add(id(v))
                    order.append(v)
        lines = []
        for v in order:
            if id(v) in scalars and (v.lower, v.upper, v.multiple_of) == (None, None, None):
                continue
            facts = [] if v.lower == 0 else [f"lower={v.lower!r}"]
            facts += [f"{k}={getattr(v, k)!r}" for k in ("upper", "multiple_of") if getattr(v, k) is not None]
            lines.append(f"{self.name(v)} = T.{v.dtype}({', '.join(facts)})")
        return lines


def function_name(name) -> str:
    """The name a ``def`` line can carry: ``name`` itself when it is an identifier (a
    function's name is not part of its structure, so another spelling is harmless)."""
    if is_identifier(name):
        return name
    cleaned = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in str(name or ""))
    cleaned = cleaned if cleaned and not cleaned[0].isdigit() else "f_" + cleaned
    return cleaned if is_identifier(cleaned) else cleaned + "_"


def print_prim_func(func: PrimFunc, name: str | None = None, indent: int = 0,
                    decorator: str = "@T.prim_func", header: bool | None = None) -> str:
    """Script text of ``func``; ``indent`` (spaces) nests it in an ``@ir_module`` class,
    where the ``# from tensorir import T`` header line is left out by default."""
    printer = StmtPrinter()
    for p in func.params:  # parameters get first pick of names
        printer.name(p)
    return printer.function(func, name, " " * indent, decorator, indent == 0 if header is None else header)


def format_node(node) -> str:
    """Short script text for any loop-level node (used by ``Node.__repr__``)."""
    if isinstance(node, PrimFunc):
        return print_prim_func(node)
    printer = StmtPrinter()
    if isinstance(node, E.PrimExpr):
        return printer.e(node)
    if isinstance(node, Stmt):
        return "\n".join(printer.stmt(node, ""))
    if isinstance(node, Buffer):
        return f"{printer.name(node)} = T.Buffer({printer.buffer_args(node)})"
    if isinstance(node, BufferRegion):
        return printer.region(node)
    if isinstance(node, Range):
        return f"Range({printer.e(node.min)}, {printer.range_end(node)})"
    if isinstance(node, IterVar):
        return f"IterVar({printer.name(node.var)}, {format_node(node.dom)}, {node.kind!r})"
    if isinstance(node, MatchBufferRegion):
        return f"{printer.name(node.buffer)} = T.match_buffer({printer.region(node.source)}, ...)"
    if isinstance(node, Node):
        raise TypeError(f"no script form for {type(node).__name__}")
    return repr(node)


__all__ = ["print_prim_func", "format_expr", "format_node"]
