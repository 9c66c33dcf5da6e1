"""flatten_buffers: make every buffer one-dimensional.

Each access ``B[i, j, ...]`` becomes ``B_flat[elem_offset + i*s0 + j*s1 + ...]``
with B's strides (row-major products of the symbolic shape when B declares
none). An ``Allocate`` declares the flat buffer instead. A parameter keeps
its signature; its body accesses go through a flat buffer of the same name,
which the interpreter and code generators read as the parameter's storage.
Run after ``lower_blocks`` (blocks' regions are not flattened).
"""
from __future__ import annotations

from ..buffer import Buffer
from ..errors import IRError
from ..expr import BufferLoad, IntImm, PrimExpr
from ..function import PrimFunc
from ..functor import Mutator
from ..stmt import Allocate, BlockRealize, BufferStore


def row_major_strides(buf: Buffer) -> list[PrimExpr]:
    strides: list[PrimExpr] = []
    running: PrimExpr = IntImm(1, "int64")
    for extent in reversed(buf.shape):
        strides.append(running)
        running = running * extent
    return strides[::-1]


def flat_size(buf: Buffer) -> PrimExpr:
    if not buf.shape:
        return IntImm(1, "int64")
    if buf.strides:  # padded strides: the outermost stride spans every inner row
        return buf.strides[0] * buf.shape[0]
    size = buf.shape[0]
    for extent in buf.shape[1:]:
        size = size * extent
    return size


class _Flattener(Mutator):
    def __init__(self):
        super().__init__()
        self.flat: dict[int, Buffer] = {}
        self.keep: list[Buffer] = []  # keep originals alive while their ids are keys

    def flat_buffer(self, buf: Buffer) -> Buffer:
        found = self.flat.get(id(buf))
        if found is None:
            found = Buffer(buf.name, [flat_size(buf)], buf.dtype, scope=buf.scope)
            self.flat[id(buf)] = found
            self.keep.append(buf)
        return found

    def linear(self, buf: Buffer, indices) -> PrimExpr:
        if len(indices) != buf.ndim:
            raise IRError(f"access of {buf.name!r} with {len(indices)} indices, buffer has {buf.ndim} dims")
        strides = list(buf.strides) or row_major_strides(buf)
        index: PrimExpr = buf.elem_offset
        for i, s in zip(indices, strides):
            index = index + i * s
        return index

    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        return BufferLoad(self.flat_buffer(node.buffer), [self.linear(node.buffer, node.indices)])

    def visit_BufferStore(self, node: BufferStore):
        value = self.visit(node.value)
        indices = [self.visit(i) for i in node.indices]
        return BufferStore(self.flat_buffer(node.buffer), value, [self.linear(node.buffer, indices)])

    def visit_Allocate(self, node: Allocate):
        return Allocate(self.flat_buffer(node.buffer), self.visit(node.body))

    def visit_BlockRealize(self, node: BlockRealize):
        raise IRError("flatten_buffers runs on lowered code; run lower_blocks first")

    def visit_Buffer(self, node: Buffer):
        return node


def flatten_buffers(func: PrimFunc) -> PrimFunc:
    return func.with_body(_Flattener().visit(func.body))
