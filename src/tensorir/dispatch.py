"""Method dispatch keyed on classes: the one mechanism every walker uses.

A walker (visitor, mutator, printer, evaluator, code emitter, parser) derives
from ``ClassDispatch`` and marks each handler with the classes it handles::

    class Printer(ClassDispatch):
        @handles(tir.Add, tir.Sub)
        def arith(self, node): ...

    handler = Printer.handler_for(type(node))   # plain function, or None

Lookup walks the node class's MRO, so a handler registered for a base class
(``BinaryOp``) receives its subclasses unless a more specific one exists, and
never receives a class it does not name or derive from: the graph level's
``Call`` and the loop level's ``Call`` are unrelated classes, so a
``visit_Call`` written for one can never be handed the other (name-keyed
dispatch did exactly that).

A class may keep several independent tables (``table="stmt"``) when it walks
two kinds of node with different signatures. Subclasses inherit their bases'
handlers; redefining a handler method under the same name keeps the classes
its base registered for that name unless the new method is marked itself.
A method named ``visit_<Class>`` that no table mentions is an error at class
creation: it would be dead code under class-keyed dispatch.
"""
from __future__ import annotations

import re
from typing import Callable

DEFAULT_TABLE = "visit"
_MARK = "_dispatch_marks"
_LEGACY_NAME = re.compile(r"visit_[A-Z]")


def handles(*classes: type, table: str = DEFAULT_TABLE) -> Callable:
    """Mark a method as the handler of ``classes`` (and their subclasses) in ``table``."""
    if not classes:
        raise TypeError("handles() needs at least one class")
    for cls in classes:
        if not isinstance(cls, type):
            raise TypeError(f"handles() takes classes, got {cls!r}")

    def mark(method):
        marks = getattr(method, _MARK, None)
        if marks is None:
            marks = []
            setattr(method, _MARK, marks)
        marks.append((table, classes))
        return method
    return mark


class ClassDispatch:
    """Base of every class-keyed walker; see the module docstring."""

    # table -> {node class: method name}; built per subclass in __init_subclass__.
    _dispatch_names: dict[str, dict[type, str]] = {}
    _dispatch_tables: dict[str, "HandlerTable"] = {}
    # The default table, for hot loops: ``self.default_handlers[type(node)]`` (a miss gives None).
    default_handlers: "HandlerTable"

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        tables: dict[str, dict[type, str]] = {}
        for base in reversed(cls.__mro__[1:]):
            for table, entries in base.__dict__.get("_dispatch_names", {}).items():
                tables.setdefault(table, {}).update(entries)
        for name, attr in cls.__dict__.items():
            marks = getattr(_function_of(attr), _MARK, None)
            if not marks:
                continue
            if attr is not _function_of(attr):
                raise TypeError(f"{cls.__qualname__}.{name}: a handler must be a plain method "
                                f"(it is called as handler(self, node))")
            if getattr(attr, "__name__", name) != name:
                raise TypeError(f"{cls.__qualname__}.{name} is an alias of handler {attr.__name__}; "
                                f"list every class in its @handles(...) instead")
            for table_entries in tables.values():  # a re-marked override replaces the base's entry
                for node_cls in [c for c, n in table_entries.items() if n == name]:
                    del table_entries[node_cls]
            for table, classes in marks:
                entries = tables.setdefault(table, {})
                for node_cls in classes:
                    entries[node_cls] = name
        registered = {n for entries in tables.values() for n in entries.values()}
        for name in cls.__dict__:
            if _LEGACY_NAME.match(name) and name not in registered:
                raise TypeError(f"{cls.__qualname__}.{name} is not registered for any class; "
                                f"mark it with @handles(<the node class>) (dispatch is by class, "
                                f"not by method name)")
        cls._dispatch_names = tables
        cls._dispatch_tables = {table: HandlerTable(cls, entries) for table, entries in tables.items()}
        cls.default_handlers = cls.handlers(DEFAULT_TABLE)

    @classmethod
    def handlers(cls, table: str = DEFAULT_TABLE) -> "HandlerTable":
        """``{node class: function}`` for ``table`` (a miss gives None); hot loops keep it."""
        found = cls._dispatch_tables.get(table)
        if found is None:
            found = cls._dispatch_tables[table] = HandlerTable(cls, {})
        return found

    @classmethod
    def handler_for(cls, node_cls: type, table: str = DEFAULT_TABLE) -> Callable | None:
        """The function handling ``node_cls`` in ``table`` (call it as ``fn(self, node)``)."""
        return cls.handlers(table)[node_cls]


class HandlerTable(dict):
    """Node class -> handler function of one walker class, filled on first use of each class."""

    def __init__(self, owner: type, entries: dict[type, str]):
        super().__init__()
        self.owner = owner
        self.entries = entries

    def __missing__(self, node_cls: type):
        found = None
        for candidate in node_cls.__mro__:  # the most specific registered class wins
            name = self.entries.get(candidate)
            if name is not None:
                found = getattr(self.owner, name)
                break
        self[node_cls] = found
        return found


def _function_of(attr):
    """The function under a staticmethod/classmethod wrapper (to reject marked ones)."""
    return getattr(attr, "__func__", attr)


__all__ = ["ClassDispatch", "HandlerTable", "handles", "DEFAULT_TABLE"]
