"""Warp memory (``scope="warp"``, TVM's input to LowerWarpMemory) as shared memory, one slab per warp.

A "warp" buffer is one copy per warp of 32 consecutive linear thread indices, its lanes
seeing each other's stores after ``T.tvm_storage_sync("warp")`` (the interpreter's
meaning, ``interpreter/block_threads``). Here it becomes a "shared" buffer with a leading
dimension of one slab per warp of the block, every access indexed by its thread's warp,
``(tx + X * (ty + Y * tz)) // 32``. A view of it (``T.Buffer(shape, data=w)``) gets the
same leading dimension; it must be a dense view of the whole slab. Refused with a
``GPULoweringError``: thread loops of one axis with different extents (the warp of a thread
would be ambiguous), an access outside a loop of a launched thread axis, views with strides
or an offset.
"""
from __future__ import annotations

import math

from tensorir import expr as E
from tensorir.buffer import Buffer
from tensorir.dispatch import handles
from tensorir.function import PrimFunc
from tensorir.functor import Mutator, collect
from tensorir.stmt import Allocate, BufferStore, For
from tensorir.structural import structural_equal
from tensorir.thread_sync import WARP_SIZE

from .errors import GPULoweringError
from .function import THREAD_AXES

WARP_SCOPE = "warp"


def _is_warp(buf) -> bool:
    return buf.storage.scope == WARP_SCOPE


class _Rewrite(Mutator):
    def __init__(self, name: str, dims: dict):
        super().__init__()
        self.name, self.dims = name, dims
        self.warps = max(1, -(-math.prod(dims.values()) // WARP_SIZE))
        self.loops: dict = {}      # tag -> the enclosing loop bound to it
        self.storages: dict = {}   # id(warp storage) -> its shared storage
        self.views: dict = {}      # id(buffer) -> its rewritten buffer

    @handles(E.PrimExpr)
    def visit_PrimExpr(self, node):
        if isinstance(node, E.BufferLoad) and _is_warp(node.buffer):
            return E.BufferLoad(self.buffer(node.buffer), [self.warp(), *(self.visit(i) for i in node.indices)])
        return self.generic_visit(node)

    @handles(For)
    def visit_For(self, loop: For):
        if loop.kind != "thread_binding" or loop.thread_tag not in THREAD_AXES:
            return self.generic_visit(loop)
        saved = self.loops.get(loop.thread_tag)
        self.loops[loop.thread_tag] = loop
        try:
            return self.generic_visit(loop)
        finally:
            self.loops[loop.thread_tag] = saved

    @handles(BufferStore)
    def visit_BufferStore(self, node: BufferStore):
        if not _is_warp(node.buffer):
            return self.generic_visit(node)
        return BufferStore(self.buffer(node.buffer), self.visit(node.value),
                           [self.warp(), *(self.visit(i) for i in node.indices)])

    @handles(Allocate)
    def visit_Allocate(self, node: Allocate):
        if not _is_warp(node.buffer):
            return self.generic_visit(node)
        return Allocate(self.buffer(node.buffer), self.visit(node.body))

    def buffer(self, buf: Buffer) -> Buffer:
        found = self.views.get(id(buf))
        if found is not None:
            return found
        storage = buf.storage
        shared = self.storages.get(id(storage))
        if shared is None:
            shared = Buffer(storage.name, (E.IntImm(self.warps, "int64"), *storage.shape), storage.dtype,
                            scope="shared")
            self.storages[id(storage)] = shared
            self.views[id(storage)] = shared
        if buf is storage:
            return shared
        if buf.strides or not E.is_const_int(buf.elem_offset, 0) or not structural_equal(
                _size(buf.shape), _size(storage.shape), map_free_vars=False):
            raise GPULoweringError(f"{self.name!r}: view {buf.name!r} of warp buffer {storage.name!r} is not a "
                                   "dense view of the whole buffer (strides, an offset or another size)")
        view = Buffer(buf.name, (E.IntImm(self.warps, "int64"), *buf.shape), buf.dtype, scope="shared",
                      data=shared)
        self.views[id(buf)] = view
        return view

    def warp(self) -> E.PrimExpr:
        linear: E.PrimExpr = E.IntImm(0, "int64")
        stride = 1
        for tag in THREAD_AXES:
            extent = self.dims.get(tag, 1)
            loop = self.loops.get(tag)
            if loop is None:
                if extent > 1:
                    raise GPULoweringError(f"{self.name!r}: a warp buffer is accessed outside the loop bound to "
                                           f"{tag} ({extent} threads): the accessing thread's warp is unknown")
                continue
            index = E.cast("int64", loop.loop_var)
            linear = E.add(linear, E.mul(index, E.IntImm(stride, "int64")))
            stride *= extent
        return E.floordiv(linear, E.IntImm(WARP_SIZE, "int64"))


def _size(shape) -> E.PrimExpr:
    out: E.PrimExpr = E.IntImm(1, "int64")
    for d in shape:
        out = E.mul(out, E.cast("int64", d))
    return out


def lower_warp_memory(name: str, func: PrimFunc) -> PrimFunc:
    if not collect(func.body, lambda n: isinstance(n, (BufferStore, E.BufferLoad, Allocate)) and
                   _is_warp(n.buffer)):
        return func
    dims: dict = {}
    for loop in collect(func.body, lambda n: isinstance(n, For) and n.kind == "thread_binding"
                        and n.thread_tag in THREAD_AXES):
        if not isinstance(loop.extent, E.IntImm):
            raise GPULoweringError(f"{name!r}: thread loop {loop.loop_var.name!r} has a symbolic extent")
        if dims.setdefault(loop.thread_tag, loop.extent.value) != loop.extent.value:
            raise GPULoweringError(f"{name!r}: warp buffers with loops of {loop.thread_tag} of different extents "
                                   f"({dims[loop.thread_tag]} and {loop.extent.value}): a thread's warp is ambiguous")
    return func.with_body(_Rewrite(name, dims).visit(func.body))
