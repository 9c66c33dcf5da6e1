"""transform_layout: store a buffer in another layout (TVM's primitive, without padding).

``index_map`` maps an element's indices in the old layout to its indices in the new one
(``lambda i, j: (i // 16, j // 16, i % 16, j % 16)``). The buffer is replaced everywhere
(allocation or parameter), every load and store reads the mapped indices, and the blocks'
read/write regions are mapped (a point to its image, a box to the bounds of its image).
The new shape is the image's bounding box; it must hold exactly as many elements as the old
one and the map must be one-to-one on the buffer, checked by evaluating it at every index
for buffers up to 2**20 elements: a map that needs padding (TVM's ``pad_value``) is refused.
"""
from __future__ import annotations

import inspect

import numpy as np

from ..buffer import Buffer
from ..dispatch import handles
from ..errors import ScheduleError
from ..expr import (Add, BufferLoad, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, Var,
                    convert)
from ..function import PrimFunc
from ..functor import Mutator, substitute
from ..stmt import Block, BufferRegion, BufferStore, Range
from .region import _analyzer, relax
from .state import StmtIndex

_CHECKED_ELEMENTS = 1 << 20


def _map_of(index_map, ndim: int, dtype: str, where: str):
    """(params, results) of a Python callable or an object with ``params`` / ``results``."""
    if hasattr(index_map, "params") and hasattr(index_map, "results"):
        params, results = list(index_map.params), list(index_map.results)
    elif callable(index_map):
        names = [p.name for p in inspect.signature(index_map).parameters.values()
                 if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(names) != ndim:
            raise ScheduleError(f"{where}: the index map takes {len(names)} indices, the buffer has "
                                f"{ndim} dimensions")
        params = [Var(n, dtype) for n in names]
        results = index_map(*params)
        results = list(results) if isinstance(results, (list, tuple)) else [results]
    else:
        raise ScheduleError(f"{where}: index_map must be a function of the indices, got {index_map!r}")
    if len(params) != ndim:
        raise ScheduleError(f"{where}: the index map takes {len(params)} indices, the buffer has "
                            f"{ndim} dimensions")
    try:
        results = [convert(r) for r in results]
    except (TypeError, ValueError):
        raise ScheduleError(f"{where}: the index map must give integer expressions, got {results!r}") \
            from None
    return params, results


def _eval(e, env):
    if isinstance(e, Var):
        return env[id(e)]
    if isinstance(e, IntImm):
        return np.int64(e.value)
    ops = {Add: np.add, Sub: np.subtract, Mul: np.multiply, FloorDiv: np.floor_divide,
           FloorMod: np.mod, Min: np.minimum, Max: np.maximum}
    for cls, fn in ops.items():
        if isinstance(e, cls):
            return fn(_eval(e.a, env), _eval(e.b, env))
    raise ScheduleError(f"transform_layout: index map expression {e!r} is not supported "
                        "(use +, -, *, //, %, min, max of the indices and integers)")


def _check_one_to_one(params, results, shape, new_shape, where: str) -> None:
    if not all(isinstance(d, IntImm) for d in list(shape) + list(new_shape)):
        return          # symbolic shapes: the element count was compared symbolically
    old = [d.value for d in shape]
    size = int(np.prod(old, dtype=np.int64))
    if size > _CHECKED_ELEMENTS or size == 0:
        return
    grids = np.meshgrid(*[np.arange(n, dtype=np.int64) for n in old], indexing="ij")
    env = {id(p): g.ravel() for p, g in zip(params, grids)}
    images = [np.broadcast_to(_eval(r, env), (size,)) for r in results]
    flat = np.ravel_multi_index(images, [d.value for d in new_shape])
    if len(np.unique(flat)) != size:
        raise ScheduleError(f"{where}: the index map sends two elements to the same place")


class _Relayout(Mutator):
    def __init__(self, old: Buffer, new: Buffer, params, results, analyzer):
        super().__init__()
        self._old, self._new = old, new
        self._params, self._results = params, results
        self._analyzer = analyzer
        self._memo[old] = new

    def _apply(self, indices):
        mapping = dict(zip(self._params, indices))
        return [self._analyzer.simplify(substitute(r, mapping)) for r in self._results]

    @handles(BufferLoad)
    def _load(self, node):
        indices = [self.visit_value(i) for i in node.indices]
        if node.buffer is self._old:
            return BufferLoad(self._new, self._apply(indices))
        return self.generic_visit(node)

    @handles(BufferStore)
    def _store(self, node):
        if node.buffer is self._old:
            indices = [self.visit_value(i) for i in node.indices]
            return BufferStore(self._new, self.visit_value(node.value), self._apply(indices))
        return self.generic_visit(node)

    @handles(BufferRegion)
    def _region(self, node):
        if node.buffer is not self._old:
            return self.generic_visit(node)
        region = [Range(self.visit_value(r.min), self.visit_value(r.extent)) for r in node.region]
        if all(isinstance(r.extent, IntImm) and r.extent.value == 1 for r in region):
            return BufferRegion(self._new, [Range(i, 1) for i in self._apply([r.min for r in region])])
        # a box: the bounds of its image, the box's corners varying over fresh variables
        box_vars = [Var(f"b{d}", r.min.dtype) for d, r in enumerate(region)]
        dom = {v: Range(r.min, r.extent) for v, r in zip(box_vars, region)}
        out = []
        for e in self._apply(box_vars):
            lo, hi = relax(e, dom, self._analyzer)
            out.append(Range(lo, self._analyzer.simplify(hi - lo + 1)))
        return BufferRegion(self._new, out)


def transform_layout(func: PrimFunc, block_name: str, buffer, index_map) -> PrimFunc:
    index = StmtIndex(func)
    block: Block = index.realize(block_name).block
    where = f"transform_layout of block {block_name!r}"
    buf = _buffer_of(block, buffer, where)
    if buf.strides or buf.data is not None or not (isinstance(buf.elem_offset, IntImm)
                                                    and buf.elem_offset.value == 0):
        raise ScheduleError(f"{where}: buffer {buf.name!r} has strides, an offset or shares storage")
    if any(m.buffer is buf or m.source.buffer is buf
           for r in index.all_realizes() for m in r.block.match_buffers):
        raise ScheduleError(f"{where}: buffer {buf.name!r} is viewed through T.match_buffer")
    index_dtype = buf.shape[0].dtype if buf.shape and isinstance(buf.shape[0], PrimExpr) else "int64"
    params, results = _map_of(index_map, len(buf.shape), index_dtype, where)
    analyzer = _analyzer()
    dom = {p: Range(IntImm(0, d.dtype) if isinstance(d, PrimExpr) else 0, d)
           for p, d in zip(params, buf.shape)}
    new_shape = []
    for r in results:
        lo, hi = relax(r, dom, analyzer)
        if not analyzer.can_prove(lo >= 0):
            raise ScheduleError(f"{where}: the index map can give a negative index ({r!r})")
        new_shape.append(analyzer.simplify(hi + 1))
    old_size, new_size = convert(1), convert(1)
    for d in buf.shape:
        old_size = old_size * d
    for d in new_shape:
        new_size = new_size * d
    if not analyzer.can_prove_equal(old_size, new_size):
        raise ScheduleError(f"{where}: the new layout {[str(d) for d in new_shape]} does not hold "
                            f"exactly the {len(buf.shape)}-d buffer {buf.name!r}; maps needing "
                            "padding (TVM's pad_value) are not supported")
    _check_one_to_one(params, results, buf.shape, new_shape, where)
    new_buf = Buffer(buf.name, new_shape, buf.dtype, scope=buf.scope)
    return _Relayout(buf, new_buf, params, results, analyzer).visit(func)


def _buffer_of(block: Block, buffer, where: str) -> Buffer:
    """TVM's ways to name the buffer: ("read" | "write", index), its name, or the Buffer."""
    if isinstance(buffer, Buffer):
        return buffer
    if isinstance(buffer, (tuple, list)) and len(buffer) == 2 and buffer[0] in ("read", "write"):
        regions = block.reads if buffer[0] == "read" else block.writes
        if not isinstance(buffer[1], int) or not 0 <= buffer[1] < len(regions):
            raise ScheduleError(f"{where}: the block has {len(regions)} {buffer[0]} buffer(s); "
                                f"index {buffer[1]!r} is out of range")
        return regions[buffer[1]].buffer
    if isinstance(buffer, str):
        found = {r.buffer.name: r.buffer for r in list(block.reads) + list(block.writes)}
        if buffer not in found:
            raise ScheduleError(f"{where}: the block reads or writes no buffer named {buffer!r} "
                                f"(it uses {sorted(found)})")
        return found[buffer]
    raise ScheduleError(f"{where}: buffer must be ('read' | 'write', index), a name or a Buffer, "
                        f"got {buffer!r}")

