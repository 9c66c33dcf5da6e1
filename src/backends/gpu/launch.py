"""Launch dimensions of one stage, from its thread-bound loops.

Per axis, the block size is the largest ``threadIdx`` extent (it must be a
constant) and the grid the largest ``blockIdx`` extent (an expression over
the function's symbolic vars, evaluated by the runtime per call). A stage
without bound loops runs as one thread of one block.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.arith import Analyzer
from tensorir.functor import collect
from tensorir.stmt import For, Stmt
from tensorir.structural import structural_equal

from .bounds import constant_upper_bound
from .cross_thread_reduce import ThreadReduce
from .errors import GPULoweringError
from .function import BLOCK_AXES, THREAD_AXES

MAX_THREADS_PER_BLOCK = 1024


def bound_loops(stmt: Stmt) -> list[For]:
    return collect(stmt, lambda n: isinstance(n, For) and n.kind == "thread_binding")


def launch_dims(stmt: Stmt, sym_vars, where: str) -> tuple[tuple, tuple]:
    analyzer = Analyzer()
    extents: dict[str, list] = {}
    for loop in bound_loops(stmt):
        if loop.thread_tag not in THREAD_AXES + BLOCK_AXES:
            raise GPULoweringError(f"{where}: loop {loop.loop_var.name!r} is bound to the unknown thread "
                                   f"axis {loop.thread_tag!r}; use one of {BLOCK_AXES + THREAD_AXES}")
        extents.setdefault(loop.thread_tag, []).append(analyzer.simplify(loop.extent))
    block = []
    for tag in THREAD_AXES:
        sizes = []
        for size in extents.get(tag, [E.IntImm(1)]):
            # a clipped extent (a tile at the edge) runs under a guard in a block of its largest size
            bound = size.value if isinstance(size, E.IntImm) else constant_upper_bound(size, analyzer)
            if bound is None:
                raise GPULoweringError(f"{where}: a loop bound to {tag} has the symbolic extent {size!r} "
                                       "with no constant upper bound; thread counts must be constants "
                                       "(split the loop by a constant factor)")
            sizes.append(bound)
        block.append(max(1, max(sizes)))
    if block[0] * block[1] * block[2] > MAX_THREADS_PER_BLOCK:
        raise GPULoweringError(f"{where}: {block[0]} x {block[1]} x {block[2]} threads per block; "
                               f"at most {MAX_THREADS_PER_BLOCK} are allowed")
    known = {id(v) for v in sym_vars}
    grid = []
    for tag in BLOCK_AXES:
        sizes = extents.get(tag, [E.IntImm(1, "int64")])
        size = sizes[0]
        for other in sizes[1:]:
            if not structural_equal(size, other, map_free_vars=False):
                size = analyzer.simplify(E.max_(size, other))
        free = [v for v in collect(size, lambda n: isinstance(n, E.Var)) if id(v) not in known]
        if free:
            raise GPULoweringError(f"{where}: the number of blocks along {tag} depends on "
                                   f"{free[0].name!r}, which is not known before the launch")
        grid.append(size)
    return tuple(grid), tuple(block)


def scratch_dtype(dtype: str) -> str:
    """The type a cross-thread reduction combines in (float16 computes in float32, bool in int32)."""
    return {"float16": "float32", "bool": "int32"}.get(dtype, dtype)


def reduce_scratch(stmt: Stmt, block: tuple) -> dict[str, tuple[int, int]]:
    """dtype -> (elements, bytes per element) of the shared scratch the stage's ThreadReduces use."""
    threads = block[0] * block[1] * block[2]
    found = {}
    for node in collect(stmt, lambda n: isinstance(n, ThreadReduce)):
        dtype = scratch_dtype(node.value.dtype)
        found[dtype] = (threads, dt.itemsize(dtype))
    return found
