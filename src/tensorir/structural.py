"""Structural equality and hashing up to renaming of variables and buffers.

Binder nodes (classes with ``_binder = True``: loop-level Vars and Buffers,
graph-level Vars) are matched by a bijection built in walk order; their
names are ignored but their dtype, facts and shapes are compared.
"""
from __future__ import annotations

import numpy as np

from .node import Node


class StructuralMismatch(AssertionError):
    pass


def _is_binder(node) -> bool:
    return getattr(type(node), "_binder", False)


class _Equal:
    def __init__(self, map_free_vars: bool = True, ignore_block_names: bool = False):
        self.ignore_block_names = ignore_block_names
        self.lhs_to_rhs: dict[int, Node] = {}
        self.rhs_to_lhs: dict[int, Node] = {}
        self.map_free_vars = map_free_vars
        self.where = ""

    def fail(self, path: str, lhs, rhs) -> bool:
        if not self.where:
            self.where = f"at {path or '<root>'}:\n  lhs: {_short(lhs)}\n  rhs: {_short(rhs)}"
        return False

    def eq(self, a, b, path: str) -> bool:
        if a is b:
            return True
        if isinstance(a, Node) or isinstance(b, Node):
            if type(a) is not type(b):
                return self.fail(path, a, b)
            if _is_binder(a):
                return self.eq_binder(a, b, path)
            return self.eq_fields(a, b, path)
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
            if len(a) != len(b):
                return self.fail(path + f" (length {len(a)} vs {len(b)})", a, b)
            return all(self.eq(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)))
        if isinstance(a, dict) and isinstance(b, dict):
            if a.keys() != b.keys():
                return self.fail(path + " (keys)", sorted(map(str, a)), sorted(map(str, b)))
            return all(self.eq(a[k], b[k], f"{path}[{k!r}]") for k in a)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            same = (isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype == b.dtype
                    and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f"))
            return True if same else self.fail(path + " (constant data)", a, b)
        if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
            return True  # NaN literals
        if type(a) is not type(b) or a != b:
            return self.fail(path, a, b)
        return True

    def eq_fields(self, a: Node, b: Node, path: str) -> bool:
        skip_name = self.ignore_block_names and type(a).__name__ == "Block"
        for f in a._attrs:
            if skip_name and f == "name":
                continue
            if not self.eq(getattr(a, f), getattr(b, f), f"{path}.{f}"):
                return False
        for f in a._fields:
            if not self.eq(getattr(a, f), getattr(b, f), f"{path}.{f}"):
                return False
        return True

    def eq_binder(self, a: Node, b: Node, path: str) -> bool:
        mapped = self.lhs_to_rhs.get(id(a))
        if mapped is not None:
            return True if mapped is b else self.fail(path + " (variable mapped elsewhere)", a, b)
        if id(b) in self.rhs_to_lhs:
            return self.fail(path + " (variable mapped elsewhere)", a, b)
        if not self.map_free_vars:
            return self.fail(path + " (different free variables)", a, b)
        # Map first so that self-references (a buffer shape naming its own var) terminate.
        self.lhs_to_rhs[id(a)] = b
        self.rhs_to_lhs[id(b)] = a
        return self.eq_fields(a, b, path)


def _short(x) -> str:
    text = repr(x)
    return text if len(text) < 300 else text[:300] + " ..."


def structural_equal(a, b, map_free_vars: bool = True, ignore_block_names: bool = False) -> bool:
    """``ignore_block_names=True`` compares as TVM's structural equality does, which skips a
    block's name (a label: TVM's schedule primitives name new blocks differently across
    versions, e.g. ``B_o`` vs ``blockized_B``)."""
    return _Equal(map_free_vars, ignore_block_names).eq(a, b, "")


def assert_structural_equal(a, b, map_free_vars: bool = True,
                            ignore_block_names: bool = False) -> None:
    checker = _Equal(map_free_vars, ignore_block_names)
    if not checker.eq(a, b, ""):
        raise StructuralMismatch("structures differ " + checker.where)


def structural_hash(node) -> int:
    binders: dict[int, int] = {}

    def h(x):
        if isinstance(x, Node):
            if _is_binder(x):
                idx = binders.get(id(x))
                if idx is not None:
                    return hash(("ref", idx))
                binders[id(x)] = len(binders)
            parts = [type(x).__name__]
            parts.extend(h(getattr(x, f)) for f in x._attrs)
            parts.extend(h(getattr(x, f)) for f in x._fields)
            return hash(tuple(parts))
        if isinstance(x, (tuple, list)):
            return hash(tuple(h(v) for v in x))
        if isinstance(x, dict):
            return hash(tuple(sorted((str(k), h(v)) for k, v in x.items())))
        if isinstance(x, np.ndarray):
            return hash((x.dtype.str, x.shape, x.tobytes()))
        try:
            return hash(x)
        except TypeError:
            return hash(repr(x))

    return h(node)
