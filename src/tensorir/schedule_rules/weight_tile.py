"""Shrink a weight buffer computed tile by tile to one tile, private to each parallel task.

After ``compute_at`` puts the block decoding a weight under the loops that walk
its tiles, the buffer still has the whole weight's shape. Every tile starts at a
multiple of the tile size in each dimension, so indexing ``w[a, b]`` as
``tile[a % TK, b % TJ]`` keeps each access inside the current tile; the tile is
allocated in an opaque block directly under the parallel loop, so each thread
has its own (a stack array when small: backends/c/codegen.py ``Allocate``).
"""
from __future__ import annotations

from ..buffer import Buffer
from ..dispatch import handles
from ..expr import BufferLoad, floormod
from ..function import PrimFunc
from ..functor import Mutator
from ..stmt import Block, BlockRealize, BufferRegion, BufferStore, For, Range


class _TileIndexing(Mutator):
    def __init__(self, whole: Buffer, tile: Buffer, sizes: tuple[int, ...]):
        super().__init__()
        self.whole, self.tile, self.sizes = whole, tile, sizes

    def _indices(self, indices):
        return tuple(floormod(i, s) for i, s in zip(indices, self.sizes))

    @handles(BufferLoad)
    def visit_BufferLoad(self, node: BufferLoad):
        node = self.generic_visit(node)
        if node.buffer is not self.whole:
            return node
        return BufferLoad(self.tile, self._indices(node.indices))

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        node = self.generic_visit(node)
        if node.buffer is not self.whole:
            return node
        return BufferStore(self.tile, node.value, self._indices(node.indices))

    @handles(BufferRegion)
    def visit_BufferRegion(self, node: BufferRegion):
        node = self.generic_visit(node)
        if node.buffer is not self.whole:
            return node
        return BufferRegion(self.tile, [Range(floormod(r.min, s), r.extent) for r, s in zip(node.region, self.sizes)])

    @handles(Buffer)
    def visit_Buffer(self, node: Buffer):
        return node


def private_weight_tile(func: PrimFunc, whole: Buffer, sizes: tuple[int, ...], task_loop_var) -> PrimFunc:
    """``func`` with root-allocated ``whole`` replaced by a ``sizes`` tile allocated under the
    loop of ``task_loop_var`` (see the module docstring)."""
    tile = Buffer(f"{whole.name}_tile", sizes, whole.dtype, scope="local")
    root = func.root_block
    if whole not in root.alloc_buffers:
        raise ValueError(f"private_weight_tile: {whole.name!r} is not allocated at the root")
    body = _TileIndexing(whole, tile, sizes).visit(func.body)

    class _Place(Mutator):
        @handles(For)
        def visit_For(self, node: For):
            if node.loop_var is not task_loop_var:
                return self.generic_visit(node)
            scope = Block("weight_tile", [], [], [], node.body, alloc_buffers=[tile])
            return node.replace(body=BlockRealize([], True, scope))

        @handles(Block)
        def visit_Block(self, node: Block):
            node = self.generic_visit(node)
            if node.name == "root":
                return node.replace(alloc_buffers=tuple(b for b in node.alloc_buffers if b is not whole))
            return node

        @handles(Buffer)
        def visit_Buffer(self, node: Buffer):
            return node

    return func.with_body(_Place().visit(body))
