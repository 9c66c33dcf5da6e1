"""PrimFunc: a loop-level function in destination-passing style."""
from __future__ import annotations

from typing import Mapping, Sequence

from .buffer import Buffer, Pointer
from .expr import RET, Call, Var
from .node import Node
from .stmt import Allocate, Block, BlockRealize, Evaluate, LetStmt, SeqStmt, Stmt


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
    def pointer_params(self) -> list[Pointer]:
        """Typed pointer parameters (``T.handle("float32")``): the function is a subroutine."""
        return [p for p in self.params if isinstance(p, Pointer)]

    @property
    def result(self):
        """The value the function returns (``return v`` / ``T.ret(v)``, its last statement), or
        None when it returns nothing (it writes its output buffers)."""
        ret = trailing_ret(self.body)
        return ret.args[0] if ret is not None else None

    @property
    def ret_dtype(self) -> str | None:
        result = self.result
        return result.dtype if result is not None else None

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


def trailing_ret(body: Stmt) -> Call | None:
    """The ``T.ret`` call a function body ends with (the parser allows one only there: after the
    last statement of the function's top level, inside its lets, allocations and root block)."""
    node = body
    while True:
        if isinstance(node, SeqStmt) and node.seq:
            node = node.seq[-1]
        elif isinstance(node, (LetStmt, Allocate)):
            node = node.body
        elif isinstance(node, BlockRealize) and node.block.name == "root" and not node.block.iter_vars:
            node = node.block.body
        elif isinstance(node, Evaluate) and isinstance(node.value, Call) and node.value.op == RET:
            return node.value
        else:
            return None
