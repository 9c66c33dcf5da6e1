"""Precondition helpers shared by the schedule primitives.

Each ``require_*`` raises ``ScheduleError`` naming the block or loop and the
reason; the others answer questions primitives ask about bindings and
buffer use.
"""
from __future__ import annotations

from ..buffer import Buffer
from ..errors import ScheduleError
from ..expr import PrimExpr, Var
from ..function import PrimFunc
from ..functor import collect
from ..stmt import Block, BlockRealize, For, Stmt, is_true
from .state import StmtIndex


def var_ids(node) -> set[int]:
    return {id(v) for v in collect(node, lambda n: isinstance(n, Var))}


def binding_loop_vars(realize: BlockRealize) -> tuple[set[int], set[int]]:
    """(ids of loop vars used by spatial bindings, ids used by reduce bindings)."""
    spatial: set[int] = set()
    reduce: set[int] = set()
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        (spatial if iv.kind == "S" else reduce).update(var_ids(value))
    return spatial, reduce


def is_param_buffer(func: PrimFunc, buffer: Buffer) -> bool:
    return any(p is buffer for p in func.buffer_params)


def writes_buffer(block: Block, buffer: Buffer) -> bool:
    return any(r.buffer is buffer for r in block.writes)


def reads_buffer(block: Block, buffer: Buffer) -> bool:
    return any(r.buffer is buffer for r in block.reads)


def writers_of(realizes, buffer: Buffer) -> list[BlockRealize]:
    return [r for r in realizes if writes_buffer(r.block, buffer)]


def readers_of(realizes, buffer: Buffer) -> list[BlockRealize]:
    return [r for r in realizes if reads_buffer(r.block, buffer)]


def leaf_realizes(index: StmtIndex, node: Stmt) -> list[BlockRealize]:
    """Block realizes under ``node`` at any depth (nested blocks included)."""
    out, todo = [], index.child_realizes(node)
    while todo:
        r = todo.pop(0)
        out.append(r)
        todo[:0] = index.child_realizes(r)
    return out


def stmt_realizes(index: StmtIndex, stmt: Stmt) -> list[BlockRealize]:
    """Block realizes in a statement of a scope, the statement itself included when it is one
    (a block with no loops around it, e.g. the copy of a 0-d buffer)."""
    own = [stmt] if isinstance(stmt, BlockRealize) else []
    return own + leaf_realizes(index, stmt)


def require_not_root(func: PrimFunc, realize: BlockRealize, primitive: str) -> None:
    if func.root_block is realize.block:
        raise ScheduleError(f"{primitive}: cannot apply to the root block")


def require_allocated(func: PrimFunc, buffer: Buffer, block_name: str, primitive: str) -> None:
    if is_param_buffer(func, buffer):
        raise ScheduleError(f"{primitive}: block {block_name!r}: buffer {buffer.name!r} is a function "
                            "parameter; only buffers allocated in the function qualify")


def require_buffer_index(block: Block, index: int, kind: str, primitive: str):
    regions = block.reads if kind == "read" else block.writes
    if not isinstance(index, int) or not 0 <= index < len(regions):
        raise ScheduleError(f"{primitive}: block {block.name!r} has {len(regions)} {kind} buffer(s); "
                            f"index {index!r} is out of range")
    return regions[index].buffer


def trivial_write_dims(block: Block, buffer: Buffer) -> list[Var] | None:
    """If the block writes ``buffer[v0, v1, ...]`` for distinct spatial iter vars, those vars by dim."""
    regions = [r for r in block.writes if r.buffer is buffer]
    if len(regions) != 1:
        return None
    spatial = {id(iv.var) for iv in block.iter_vars if iv.kind == "S"}
    dims: list[Var] = []
    for r in regions[0].region:
        if not (isinstance(r.min, Var) and id(r.min) in spatial and _is_one(r.extent)):
            return None
        if any(d is r.min for d in dims):
            return None
        dims.append(r.min)
    return dims


def tiled_write_dims(block: Block, buffer: Buffer) -> list[tuple[Var, int, PrimExpr]] | None:
    """If the block writes ``buffer[c0 * v0 + d0 : c0 * v0 + d0 + c0, ...]`` for distinct spatial
    iter vars ``v`` and constants ``c >= 1`` (``c = 1``: the point ``v + d``; ``c > 1``: the tile an
    outer block of blockize writes), ``(v, c, d)`` by dim."""
    from ..expr import Add, IntImm, Mul
    regions = [r for r in block.writes if r.buffer is buffer]
    if len(regions) != 1:
        return None
    spatial = {id(iv.var) for iv in block.iter_vars if iv.kind == "S"}
    dims: list[tuple[Var, int, PrimExpr]] = []
    for r in regions[0].region:
        if not isinstance(r.extent, IntImm) or r.extent.value < 1:
            return None
        base, offset = r.min, IntImm(0, r.min.dtype)
        if isinstance(base, Add) and not var_ids(base.b) & spatial:
            base, offset = base.a, base.b
        coef = 1
        if isinstance(base, Mul) and isinstance(base.b, IntImm):
            base, coef = base.a, base.b.value
        if not (isinstance(base, Var) and id(base) in spatial and coef == r.extent.value) \
                or any(d is base for d, _, _ in dims):
            return None
        dims.append((base, coef, offset))
    return dims


def _is_one(e: PrimExpr) -> bool:
    from ..expr import is_const_int
    return is_const_int(e, 1)


def loop_binds_reduce(realizes, loop: For) -> bool:
    return any(id(loop.loop_var) in binding_loop_vars(r)[1] for r in realizes)


def require_trivial_predicate(realize: BlockRealize, primitive: str) -> None:
    if not is_true(realize.predicate):
        raise ScheduleError(f"{primitive}: block {realize.block.name!r} has a predicate "
                            f"({realize.predicate!r}) this primitive cannot carry")


def require_reduction_within(index: StmtIndex, realize: BlockRealize, loops: list[For], where: str) -> None:
    """The block's reduce iter vars must follow only ``loops`` (not loops further out, nor the
    iter vars of an enclosing block, as after blockize): a reduction split out of the block
    (its init, an rfactor stage) is placed among ``loops`` and would restart per outer step."""
    inside = {id(lp.loop_var) for lp in loops}
    outer: dict[int, Var] = {}
    for anc in index.ancestors(realize):
        if isinstance(anc, For):
            outer[id(anc.loop_var)] = anc.loop_var
        elif isinstance(anc, Block):
            outer.update((id(iv.var), iv.var) for iv in anc.iter_vars)
    for iv, value in zip(realize.block.iter_vars, realize.iter_values):
        if iv.kind != "R":
            continue
        driver = next((outer[i] for i in var_ids(value) if i in outer and i not in inside), None)
        if driver is not None:
            raise ScheduleError(f"{where}: reduction iter var {iv.var.name!r} of block "
                                f"{realize.block.name!r} follows {driver.name!r} outside the loops "
                                "this primitive rewrites, so the reduction would restart on each of "
                                "its steps")

