"""Blocks: ``with T.block(...)``, axes, reads/writes, init, and the paper's short form."""
from __future__ import annotations

import ast

from .. import expr as E
from ..buffer import Buffer
from ..functor import collect, substitute
from ..stmt import (Allocate, Block, BlockRealize, BufferStore, IterVar, LetStmt,
                    MatchBufferRegion, Range, Stmt, seq)
from .expr_parser import extent_between
from .region_infer import infer_regions
from .scope import BlockFrame

_AXIS_KINDS = {"axis.spatial": "S", "axis.S": "S", "axis.reduce": "R", "axis.R": "R",
               "axis.scan": "scan", "axis.opaque": "opaque"}


class BlockParserMixin:
    """Block-level parsing for FunctionParser (shares its scope, loops and frames)."""

    def parse_with(self, st: ast.With, frame: BlockFrame | None) -> Stmt | None:
        if len(st.items) != 1:
            raise self.error("use one context manager per with-statement", st)
        item = st.items[0]
        call, kind = item.context_expr, self.t_call(item.context_expr)
        if kind == "block":
            if item.optional_vars is not None:
                raise self.error("T.block() binds no name", item.optional_vars)
            return self.parse_block(st, call)
        if kind == "init":
            if frame is None or frame.is_root:
                raise self.error("T.init() must be directly inside a block", st)
            if frame.init is not None:
                raise self.error("a block has at most one T.init()", st)
            frame.init = self.nested_body(st.body)
            return None
        if kind == "Assert":   # TVM's frame form: the body runs after the check
            if item.optional_vars is not None:
                raise self.error("T.Assert binds no name", item.optional_vars)
            return seq(self.assert_call(call), self.nested_body(st.body))
        if kind == "attr" and item.optional_vars is None:
            return self.parse_attr(call, st.body, None)
        if kind == "launch_thread" and item.optional_vars is None:
            # `with T.launch_thread(tx, n):` after tx = T.env_thread(...): the body runs per thread
            return self.parse_launch_thread(None, call, st.body, None)
        if kind in ("LetStmt", "decl_buffer", "allocate", "launch_thread"):
            if not isinstance(item.optional_vars, ast.Name):
                raise self.error(f"write `with T.{kind}(...) as name:`", st)
            name = item.optional_vars.id
            if kind in ("decl_buffer", "allocate"):
                buf = self.buffer_from_call(name, call) if kind == "decl_buffer" else self.allocation(name, call)
                return Allocate(buf, self.scoped_body(st.body, None, name, buf))
            if kind == "launch_thread":
                return self.parse_launch_thread(name, call, st.body, None)
            self.exprs.expect_args(call, 1)
            value = self.exprs.expr(call.args[0])
            var = E.Var(name, value.dtype)
            return LetStmt(var, value, self.scoped_body(st.body, None, name, var))
        raise self.error(f"unsupported with-statement {ast.unparse(call)}", call)

    # ---------------------------------------------------------------- blocks
    def parse_block(self, st: ast.With, call: ast.Call) -> Stmt:
        name_node = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "name"), None)
        if len(call.args) > 1 or any(k.arg != "name" for k in call.keywords):
            raise self.error("T.block takes only a name", call)
        name = None if name_node is None else self.exprs.constant(name_node, "block name", (str,))
        has_axes = any((self.t_call(s.value) or "").startswith("axis.")
                       for s in st.body if isinstance(s, ast.Assign))
        at_top = len(self.frames) == 1 and not self.loops
        frame = BlockFrame()
        self.frames.append(frame)
        self.scope.push()
        outer_loops = list(self.loops)
        self.jump_targets.append("block")
        try:
            body = self.parse_body(st.body, frame)
        finally:
            self.jump_targets.pop()
        self.scope.pop()
        self.frames.pop()
        init = frame.init
        if name is None and not has_axes:
            body, init = self.infer_axes(frame, body, init, outer_loops)
        if name is None:
            name = self.fresh_block_name(body)
        reads, writes = frame.reads, frame.writes
        if name == "root" and not frame.iter_vars and at_top:
            reads, writes = reads or [], writes or []
        if reads is None or writes is None:
            inferred_reads, inferred_writes = infer_regions(body, init, frame.alloc_buffers, frame.match_buffers)
            reads = inferred_reads if reads is None else reads
            writes = inferred_writes if writes is None else writes
        block = Block(name, frame.iter_vars, reads, writes, body, init, frame.alloc_buffers,
                      frame.match_buffers, frame.annotations)
        return BlockRealize(frame.iter_values, frame.predicate, block)

    def fresh_block_name(self, body: Stmt) -> str:
        stores = collect(body, lambda n: isinstance(n, BufferStore))
        base = stores[0].buffer.name if stores else "block"
        name, k = base, 0
        while name in self.block_names:
            k += 1
            name = f"{base}_{k}"
        self.block_names.add(name)
        return name

    def infer_axes(self, frame: BlockFrame, body: Stmt, init, loops):
        """Short form: every enclosing loop var the block uses becomes an iter var;
        spatial if it indexes a store, reduce otherwise."""
        def var_ids(node):
            return {id(v) for v in collect(node, lambda n: isinstance(n, E.Var))} if node is not None else set()
        used = var_ids(body) | var_ids(init)
        for regions in (frame.reads or [], frame.writes or []):
            for r in regions:
                used |= var_ids(r)
        stored = set()
        for part in (body, init):
            if part is None:
                continue
            for store in collect(part, lambda n: isinstance(n, BufferStore)):
                for index in store.indices:
                    stored |= var_ids(index)
            # a store in a nested block indexes by that block's iter vars: what they are bound to
            # indexes it too (innermost blocks first)
            for realize in reversed(collect(part, lambda n: isinstance(n, BlockRealize))):
                for iv, value in zip(realize.block.iter_vars, realize.iter_values):
                    if id(iv.var) in stored:
                        stored |= var_ids(value)
        vmap = {}
        for loop in loops:
            if id(loop.var) not in used:
                continue
            var = E.Var("v" + loop.var.name, loop.var.dtype)
            frame.iter_vars.append(IterVar(var, loop.dom, "S" if id(loop.var) in stored else "R"))
            frame.iter_values.append(loop.var)
            vmap[loop.var] = var
        if frame.reads is not None:
            frame.reads = substitute(frame.reads, vmap)
        if frame.writes is not None:
            frame.writes = substitute(frame.writes, vmap)
        return substitute(body, vmap), substitute(init, vmap)

    def block_frame(self, frame: BlockFrame | None, what: str, node) -> BlockFrame:
        if frame is None or frame.is_root:
            raise self.error(f"{what} must be directly inside a `with T.block(...)`", node)
        return frame

    def parse_axes(self, targets: list, call: ast.Call, frame: BlockFrame | None) -> None:
        kind = self.t_call(call)
        frame = self.block_frame(frame, f"T.{kind}", call)
        for t in targets:
            if not isinstance(t, ast.Name):
                raise self.error("block iter vars must be plain names", t)
        if kind == "axis.remap":
            axes = self.remap_axes(targets, call)
        elif kind in _AXIS_KINDS:
            if len(targets) != 1:
                raise self.error(f"T.{kind} defines one iter var", call)
            self.exprs.expect_args(call, 2)
            axes = [(targets[0].id, _AXIS_KINDS[kind], *self.axis_dom(call.args[0], call.args[1]))]
        else:
            raise self.error(f"unknown function 'T.{kind}'", call)
        for name, iter_kind, dom, value in axes:
            var = E.Var(name, dom.extent.dtype)
            frame.iter_vars.append(IterVar(var, dom, iter_kind))
            frame.iter_values.append(value)
            self.scope.define(name, var)
        frame.has_axes = True

    def axis_dom(self, dom_node, value_node):
        value = self.exprs.expr(value_node)
        if isinstance(dom_node, ast.Tuple):
            if len(dom_node.elts) != 2:
                raise self.error("an axis domain is an extent or a (min, max) pair", dom_node)
            lo, hi = E._promote_pair(self.exprs.eval(dom_node.elts[0]), self.exprs.eval(dom_node.elts[1]))
            return Range(lo, extent_between(lo, hi)), value
        extent = self.exprs.eval(dom_node)
        extent = self.exprs.to_prim(extent, dom_node, value.dtype)
        return Range(E.const(0, extent.dtype), extent), value

    def remap_axes(self, targets, call: ast.Call):
        if len(call.args) != 2 or call.keywords:
            raise self.error("T.axis.remap takes a kinds string and a list of loop variables", call)
        kinds = self.exprs.constant(call.args[0], "T.axis.remap kinds", (str,))
        var_nodes = self.exprs.index_list(call.args[1]) if isinstance(call.args[1], ast.Tuple) else \
            (call.args[1].elts if isinstance(call.args[1], ast.List) else [call.args[1]])
        if not (len(kinds) == len(var_nodes) == len(targets)):
            raise self.error(f"T.axis.remap: {len(kinds)} kind(s) {kinds!r} and {len(var_nodes)} loop "
                             f"variable(s), but {len(targets)} name(s) assigned", call)
        axes = []
        for target, kind, node in zip(targets, kinds, var_nodes):
            if kind not in "SR":
                raise self.error(f"T.axis.remap kind must be 'S' or 'R', got {kind!r}", call.args[0])
            value = self.exprs.eval(node)
            loop = next((lp for lp in self.loops if lp.var is value), None)
            if loop is None:
                raise self.error(f"T.axis.remap binds loop variables; {ast.unparse(node)} is not one", node)
            axes.append((target.id, kind, loop.dom, loop.var))
        return axes

    def parse_block_meta(self, kind: str, call: ast.Call, frame: BlockFrame | None) -> None:
        frame = self.block_frame(frame, f"T.{kind}", call)
        if kind in ("reads", "writes"):
            nodes = call.args
            if len(nodes) == 1 and isinstance(nodes[0], (ast.List, ast.Tuple)):
                nodes = nodes[0].elts
            regions = [self.exprs.region(n) for n in nodes]
            if getattr(frame, kind) is not None:
                raise self.error(f"T.{kind} given twice", call)
            setattr(frame, kind, regions)
        elif kind == "where":
            self.exprs.expect_args(call, 1)
            predicate = self.exprs.expr(call.args[0])
            if predicate.dtype != "bool":
                raise self.error(f"T.where takes a boolean condition, got a {predicate.dtype} expression",
                                 call.args[0])
            frame.predicate = predicate
        else:  # block_attr
            self.exprs.expect_args(call, 1)
            value = self.exprs.python_value(call.args[0])
            if not isinstance(value, dict):
                raise self.error("T.block_attr takes a dict", call)
            frame.annotations.update(value)

    def parse_match_buffer(self, name: str, call: ast.Call, frame: BlockFrame | None) -> None:
        frame = self.block_frame(frame, "T.match_buffer", call)
        if not call.args:
            raise self.error("T.match_buffer(region, shape, dtype) needs a source region", call)
        source = self.exprs.region(call.args[0])
        if len(call.args) == 1 and not any(k.arg in ("shape", "dtype") for k in call.keywords):
            # TVM's implicit form: the region's extents and the source's dtype
            buf = Buffer(name, [r.extent for r in source.region], source.buffer.dtype)
        else:
            buf = self.buffer_from_call(name, call, first_arg=1)
        frame.match_buffers.append(MatchBufferRegion(buf, source))
        self.scope.define(name, buf)


__all__ = ["BlockParserMixin"]
