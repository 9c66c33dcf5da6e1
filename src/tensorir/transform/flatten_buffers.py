"""flatten_buffers: make every buffer one-dimensional.

Each access ``B[i, j, ...]`` becomes ``B_flat[elem_offset + i*s0 + j*s1 + ...]``
with B's strides (row-major products of the symbolic shape when B declares
none). An ``Allocate`` declares the flat buffer instead (the flat buffer is
the allocation). Any other buffer (a parameter, or a view) keeps its
declaration; its body accesses go through a flat view ``B_flat`` with
``data=`` B's storage (``Buffer.data``), so aliasing is explicit in the IR.
A parameter that is already flat (1-D, dense, offset 0) is used as is.
Run after ``lower_blocks`` (blocks' regions are not flattened).
"""
from __future__ import annotations

from ..buffer import Buffer
from ..dispatch import handles
from ..errors import IRError
from ..expr import BufferLoad, IntImm, PrimExpr, is_const_int
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


def _already_flat(buf: Buffer) -> bool:
    """A 1-D dense storage owner (a view must still be re-pointed at the flattened storage)."""
    return buf.data is None and buf.ndim == 1 and not buf.strides and is_const_int(buf.elem_offset, 0)


class _Flattener(Mutator):
    def __init__(self):
        super().__init__()
        self.flat: dict[int, Buffer] = {}
        self.keep: list[Buffer] = []  # keep originals alive while their ids are keys
        self.allocated: set[int] = set()

    def flat_buffer(self, buf: Buffer) -> Buffer:
        found = self.flat.get(id(buf))
        if found is None:
            if id(buf) in self.allocated:  # the allocation itself becomes flat
                found = Buffer(buf.name, [flat_size(buf)], buf.dtype, scope=buf.scope)
            elif _already_flat(buf):
                found = buf
            else:  # a view of the storage the original (itself maybe a view) lives in
                found = Buffer(buf.name + "_flat", [flat_size(buf)], buf.dtype, scope=buf.scope,
                               elem_offset=buf.elem_offset,
                               data=self.flat_buffer(buf.storage) if buf.data is not None else buf)
            self.flat[id(buf)] = found
            self.keep.append(buf)
        return found

    def access(self, buf: Buffer, indices) -> tuple[Buffer, PrimExpr]:
        """The flat buffer and index for ``buf[indices]``. A flat view keeps ``buf``'s
        elem_offset (so its shape covers exactly ``buf``'s elements); otherwise the
        offset moves into the index."""
        if len(indices) != buf.ndim:
            raise IRError(f"access of {buf.name!r} with {len(indices)} indices, buffer has {buf.ndim} dims")
        flat = self.flat_buffer(buf)
        strides = list(buf.strides) or row_major_strides(buf)
        index: PrimExpr = IntImm(0, "int64") if flat.data is not None else buf.elem_offset
        for i, s in zip(indices, strides):
            index = index + i * s
        return flat, index

    @handles(BufferLoad)
    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        flat, index = self.access(node.buffer, node.indices)
        return BufferLoad(flat, [index])

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        value = self.visit(node.value)
        flat, index = self.access(node.buffer, [self.visit(i) for i in node.indices])
        return BufferStore(flat, value, [index])

    @handles(Allocate)
    def visit_Allocate(self, node: Allocate):
        self.allocated.add(id(node.buffer))
        return Allocate(self.flat_buffer(node.buffer), self.visit(node.body))

    @handles(BlockRealize)
    def visit_BlockRealize(self, node: BlockRealize):
        raise IRError("flatten_buffers runs on lowered code; run lower_blocks first")

    @handles(Buffer)
    def visit_Buffer(self, node: Buffer):
        return node


def flatten_buffers(func: PrimFunc) -> PrimFunc:
    return func.with_body(_Flattener().visit(func.body))
