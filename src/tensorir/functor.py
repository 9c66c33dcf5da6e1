"""Generic visitor and mutator over IR nodes (both levels).

Dispatch is by class (``dispatch.py``): mark a method ``@handles(For)`` to
handle ``For`` and its subclasses; anything without a handler is walked
field by field via ``_fields``.
"""
from __future__ import annotations

from typing import Callable, Iterator, Mapping

from .dispatch import ClassDispatch
from .node import Node


def iter_children(node: Node) -> Iterator[Node]:
    """The child nodes of ``node`` in field order (tuples, lists and dict values flattened)."""
    return iter(children(node))


def children(node: Node) -> list[Node]:
    """``iter_children`` as a list, built without generators (walks call this per node)."""
    out: list[Node] = []
    for field in node._fields:
        value = getattr(node, field)
        if isinstance(value, Node):
            out.append(value)
        elif isinstance(value, (tuple, list, dict)):
            _flatten_into(out, value)
    return out


def _flatten_into(out: list, value) -> None:
    for v in (value.values() if isinstance(value, dict) else value):
        if isinstance(v, Node):
            out.append(v)
        elif isinstance(v, (tuple, list, dict)):
            _flatten_into(out, v)


class Visitor(ClassDispatch):
    """Read-only walk. Add ``@handles(Class)`` methods; call ``generic_visit`` to recurse."""

    def visit(self, node):
        handler = self.default_handlers[type(node)]
        if handler is not None:
            return handler(self, node)
        return self.generic_visit(node)

    def generic_visit(self, node) -> None:
        for child in iter_children(node):
            self.visit(child)


class Mutator(ClassDispatch):
    """Rebuilding walk; unchanged subtrees are returned as the same objects.

    Results are memoised per node identity so that a Buffer or Var shared by
    many statements maps to one new object everywhere.
    """

    def __init__(self):
        self._memo: dict[Node, Node] = {}

    def visit(self, node):
        if node is None:
            return None
        done = self._memo.get(node)
        if done is not None:
            return done
        result = self._dispatch(node)
        self._memo[node] = result
        return result

    def _dispatch(self, node):
        handler = self.default_handlers[type(node)]
        if handler is not None:
            return handler(self, node)
        return self.generic_visit(node)

    def visit_value(self, value):
        if isinstance(value, Node):
            return self.visit(value)
        if isinstance(value, tuple):
            new = tuple(self.visit_value(v) for v in value)
            return value if all(a is b for a, b in zip(new, value)) else new
        if isinstance(value, list):
            new = [self.visit_value(v) for v in value]
            return value if all(a is b for a, b in zip(new, value)) else new
        if isinstance(value, dict):
            new = {k: self.visit_value(v) for k, v in value.items()}
            return value if all(new[k] is value[k] for k in value) else new
        return value

    def generic_visit(self, node):
        changes = {}
        for field in node._fields:
            old = getattr(node, field)
            new = self.visit_value(old)
            if new is not old:
                changes[field] = new
        return node.replace(**changes) if changes else node


class _Substituter(Mutator):
    def __init__(self, vmap: Mapping):
        super().__init__()
        self._memo.update(vmap)


def substitute(node, vmap: Mapping):
    """Replace Vars (or any nodes, by identity) per ``vmap`` everywhere in ``node``."""
    if not vmap:
        return node
    return _Substituter(vmap).visit_value(node)


def post_order(node: Node, fn: Callable[[Node], None]) -> None:
    """Call ``fn`` on every node below and including ``node``, children first."""
    stack: list[tuple[Node, bool]] = [(node, False)]
    while stack:
        cur, expanded = stack.pop()
        if expanded:
            fn(cur)
            continue
        stack.append((cur, True))
        for child in reversed(list(iter_children(cur))):
            stack.append((child, False))


def collect(node: Node, predicate: Callable[[Node], bool]) -> list[Node]:
    """All distinct nodes (by identity) under ``node`` satisfying ``predicate``, in walk order."""
    # Each distinct node is expanded once: IR trees share subtrees (buffers, vars,
    # whole index expressions), and re-walking every occurrence made collect
    # grow with the number of paths rather than the number of nodes. A node
    # popped again was finished already (the IR is acyclic), so the first-
    # occurrence post order, and hence the result, is the same as a full walk.
    # The stack holds nodes to expand and 1-tuples marking a node whose children are done
    # (no generators or pairs per node: collect is the compiler's most frequent walk).
    started: set[int] = set()
    out: list[Node] = []
    stack: list = [node]
    kids = children(node)   # a non-node fails here, as it always did
    push, pop, extend = stack.append, stack.pop, stack.extend
    while stack:
        cur = pop()
        if type(cur) is tuple:
            if predicate(cur[0]):
                out.append(cur[0])
            continue
        key = id(cur)
        if key in started:
            continue
        started.add(key)
        push((cur,))
        kids = children(cur) if cur is not node else kids
        kids.reverse()
        extend(kids)
    return out
