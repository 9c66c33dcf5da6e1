"""Navigation and rewriting helpers over one PrimFunc body.

Schedule primitives are pure functions ``PrimFunc -> PrimFunc``; this module
gives them parent links (``StmtIndex``), statement replacement that keeps
``SeqStmt``s flat, and fresh unique names. Handles are resolved here too:
a block is found by its (unique) name, a loop by the identity of its loop
variable, so a handle stays valid as long as the thing it names exists.
"""
from __future__ import annotations

from typing import Iterable, Mapping

from ..buffer import Buffer
from ..dispatch import handles
from ..errors import ScheduleError
from ..expr import PrimExpr, Var
from ..function import PrimFunc
from ..functor import Mutator, collect
from ..stmt import (Allocate, Block, BlockRealize, For, IfThenElse, LetStmt, SeqStmt, Stmt, has_loop_jumps,
                    While, seq)


class BlockRV:
    """Opaque handle to a block; stays valid while a block of that name exists."""
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"b{self.index}"


class LoopRV:
    """Opaque handle to a loop; stays valid while that loop (its variable) exists."""
    __slots__ = ("index",)

    def __init__(self, index: int):
        self.index = index

    def __repr__(self) -> str:
        return f"l{self.index}"


def _stmt_children(node: Stmt) -> list[Stmt]:
    if isinstance(node, SeqStmt):
        return list(node.seq)
    if isinstance(node, (For, LetStmt, Allocate, While)):
        return [node.body]
    if isinstance(node, IfThenElse):
        return [s for s in (node.then_case, node.else_case) if s is not None]
    if isinstance(node, BlockRealize):
        return [node.block]
    if isinstance(node, Block):
        return [s for s in (node.init, node.body) if s is not None]
    return []


class StmtIndex:
    """Parent links and lookup tables (blocks by name, loops by variable) for one function."""

    def __init__(self, func: PrimFunc):
        self.func = func
        self.parent: dict[int, Stmt | None] = {}
        self.realize_by_name: dict[str, BlockRealize] = {}
        self.loop_by_var: dict[int, For] = {}
        self.order: dict[int, int] = {}  # pre-order position of every statement
        stack: list[tuple[Stmt, Stmt | None]] = [(func.body, None)]
        while stack:
            node, parent = stack.pop()
            self.parent[id(node)] = parent
            self.order[id(node)] = len(self.order)
            if isinstance(node, BlockRealize):
                self.realize_by_name[node.block.name] = node
            elif isinstance(node, For):
                self.loop_by_var[id(node.loop_var)] = node
            for child in reversed(_stmt_children(node)):
                stack.append((child, node))

    # ------------------------------------------------------------- lookup
    def realize(self, name: str) -> BlockRealize:
        found = self.realize_by_name.get(name)
        if found is None:
            raise ScheduleError(f"no block named {name!r} in function {self.func.name!r}")
        self.require_outside_while(found, f"block {name!r}")
        return found

    def under_while(self, node: Stmt) -> bool:
        return any(isinstance(a, While) for a in self.ancestors(node))

    def require_outside_while(self, node: Stmt, what: str) -> None:
        """Schedules reason about loops with known trip counts: what a data-dependent ``while``
        encloses is left as written."""
        if self.under_while(node):
            raise ScheduleError(f"{what} of function {self.func.name!r} sits inside a while loop; "
                                "schedule primitives do not transform code under a while")
        if has_loop_jumps(self.func.body):
            raise ScheduleError(f"function {self.func.name!r} has loop jumps (break/continue): schedule "
                                "primitives do not transform it (a split or reorder would move a jump)")

    def loop(self, var: Var) -> For:
        found = self.loop_by_var.get(id(var))
        if found is None:
            raise ScheduleError(f"loop {var.name!r} no longer exists in function {self.func.name!r} "
                                "(an earlier primitive replaced it)")
        self.require_outside_while(found, f"loop {var.name!r}")
        return found

    def ancestors(self, node: Stmt) -> list[Stmt]:
        """Statements enclosing ``node``, outermost first."""
        out = []
        cur = self.parent.get(id(node))
        while cur is not None:
            out.append(cur)
            cur = self.parent.get(id(cur))
        return out[::-1]

    def is_ancestor(self, outer: Stmt, inner: Stmt) -> bool:
        return any(a is outer for a in self.ancestors(inner))

    def scope_block(self, node: Stmt) -> Block | None:
        """The nearest enclosing Block (the block whose body holds ``node``)."""
        for anc in reversed(self.ancestors(node)):
            if isinstance(anc, Block):
                return anc
        return None

    def loops_of(self, node: Stmt) -> list[For]:
        """Loops between the enclosing scope block and ``node``, outermost first."""
        loops: list[For] = []
        for anc in reversed(self.ancestors(node)):
            if isinstance(anc, Block):
                break
            if isinstance(anc, For):
                loops.append(anc)
        return loops[::-1]

    def child_realizes(self, node: Stmt) -> list[BlockRealize]:
        """Block realizes under ``node`` not nested inside another block, in program order."""
        found: list[BlockRealize] = []
        stack = list(reversed(_stmt_children(node.block if isinstance(node, BlockRealize) else node)))
        while stack:
            cur = stack.pop()
            if isinstance(cur, BlockRealize):
                found.append(cur)
                continue
            stack.extend(reversed(_stmt_children(cur)))
        return found

    def all_realizes(self) -> list[BlockRealize]:
        return sorted(self.realize_by_name.values(), key=lambda r: self.order[id(r)])

    def top_level_stmt(self, node: Stmt) -> Stmt:
        """The child of the scope block's body (an element of its SeqStmt) that contains ``node``."""
        chain = self.ancestors(node) + [node]
        for i in range(len(chain) - 1, -1, -1):
            if isinstance(chain[i], Block):
                rest = chain[i + 1:]
                if rest and isinstance(rest[0], SeqStmt):
                    return rest[1]
                return rest[0]
        return chain[0]

    def exclusive_nest_root(self, realize: BlockRealize) -> Stmt:
        """The outermost statement above ``realize`` that holds nothing but its loop nest."""
        root: Stmt = realize
        for anc in reversed(self.ancestors(realize)):
            if isinstance(anc, For) and anc.body is root:
                root = anc
            else:
                break
        return root


# ----------------------------------------------------------------- rewriting
class _Replacer(Mutator):
    """Replace statements by identity; a replacement of None deletes the statement."""

    def __init__(self, mapping: Mapping[Stmt, Stmt | None]):
        super().__init__()
        self.mapping = {id(k): v for k, v in mapping.items()}
        self.keys = {id(k): k for k in mapping}  # keep keys alive while ids are in use

    def visit(self, node):
        if node is not None and id(node) in self.mapping:
            return self.mapping[id(node)]
        return super().visit(node)

    @handles(SeqStmt)
    def visit_SeqStmt(self, node: SeqStmt):
        items = [self.visit(s) for s in node.seq]
        if all(a is b for a, b in zip(items, node.seq)):
            return node
        return seq(*[s for s in items if s is not None]) if any(s is not None for s in items) else None

    @handles(PrimExpr)
    def visit_PrimExpr(self, node):  # expressions never contain statements
        return node

    @handles(Buffer)
    def visit_Buffer(self, node):
        return node


def replace_stmts(func: PrimFunc, mapping: Mapping[Stmt, Stmt | None]) -> PrimFunc:
    body = _Replacer(mapping).visit(func.body)
    if body is None:
        raise ScheduleError("a primitive would leave the function empty")
    return func.with_body(body)


# ----------------------------------------------------------------- names
def used_names(func: PrimFunc) -> set[str]:
    """Every var, block, param and buffer name in ``func`` (one walk over it).

    Remembered for the last few functions: a rule applies several primitives
    to the same function, each asking for its names (callers get a copy)."""
    cached = _USED_NAMES.get(id(func))
    if cached is not None and cached[0] is func:
        return set(cached[1])
    named = collect(func, lambda n: isinstance(n, (Var, Block, Buffer)))
    names = frozenset({n.name for n in named} | {p.name for p in func.params})
    if len(_USED_NAMES) >= _USED_NAMES_KEPT:
        _USED_NAMES.pop(next(iter(_USED_NAMES)))
    _USED_NAMES[id(func)] = (func, names)  # holding func keeps its id from being reused
    return set(names)


_USED_NAMES_KEPT = 8
_USED_NAMES: dict[int, tuple[PrimFunc, frozenset]] = {}


class NameSupply:
    """Hands out names not yet used in a function."""

    def __init__(self, taken: Iterable[str]):
        self.taken = set(taken)

    def fresh(self, hint: str) -> str:
        name, k = hint, 0
        while name in self.taken:
            k += 1
            name = f"{hint}_{k}"
        self.taken.add(name)
        return name

    def var(self, hint: str, dtype: str = "int64") -> Var:
        return Var(self.fresh(hint), dtype)


def root_block_of(func: PrimFunc, what: str) -> Block:
    root = func.root_block
    if root is None:
        raise ScheduleError(f"{what}: function {func.name!r} has no root block to allocate in")
    return root


def add_root_alloc(func: PrimFunc, buffer) -> PrimFunc:
    root = root_block_of(func, "allocating " + buffer.name)
    new_root = root.replace(alloc_buffers=root.alloc_buffers + (buffer,))
    return func.with_body(func.body.replace(block=new_root))
