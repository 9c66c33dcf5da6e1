"""PrimFunc: a loop-level function in destination-passing style."""
from __future__ import annotations

from typing import Mapping, Sequence

from .buffer import Buffer
from .expr import Var
from .node import Node
from .stmt import Block, BlockRealize, Stmt


class PrimFunc(Node):
    """A loop program. ``params`` holds Buffers (tensor arguments, inputs then
    outputs) and scalar Vars (e.g. symbolic sizes no buffer carries).

    Symbolic shape variables are defined by the first buffer shape that
    mentions them. Functions written with blocks have a root block
    (``Block`` named "root", no iter vars) as ``body`` that holds the
    function-level ``alloc_buffer``s; the printer shows it implicitly.
    ``name`` is not part of structural equality.
    """
    __slots__ = ("params", "body", "attrs", "name")
    _fields = ("params", "body")
    _attrs = ("attrs",)

    def __init__(self, params: Sequence[Buffer | Var], body: Stmt, attrs: Mapping | None = None,
                 name: str = "main"):
        self.params = tuple(params)
        self.body = body
        self.attrs = dict(attrs or {})
        self.name = name

    @property
    def buffer_params(self) -> list[Buffer]:
        return [p for p in self.params if isinstance(p, Buffer)]

    @property
    def scalar_params(self) -> list[Var]:
        return [p for p in self.params if isinstance(p, Var)]

    @property
    def root_block(self) -> Block | None:
        if isinstance(self.body, BlockRealize) and self.body.block.name == "root" \
                and not self.body.block.iter_vars:
            return self.body.block
        return None

    def with_body(self, body: Stmt) -> "PrimFunc":
        return self.replace(body=body)

    def with_attr(self, key: str, value) -> "PrimFunc":
        attrs = dict(self.attrs)
        attrs[key] = value
        return self.replace(attrs=attrs)

    def script(self) -> str:
        from .script.printer import print_prim_func
        return print_prim_func(self)

    def show(self) -> None:
        print(self.script())
