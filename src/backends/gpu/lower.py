"""lower_for_gpu: a scheduled PrimFunc -> a GPUFunction (kernels, launch dimensions, workspaces).

Steps:
1. cross-thread reductions become per-thread partials + ``ThreadReduce``
   (cross_thread_reduce.py), at block level;
2. the target-neutral lowering of tensorir.transform (predicates -> ifs,
   blocks -> plain statements);
3. the root block's statements are the stages; each stage is one launch (a
   grid-wide sync between stages). A stage without bound loops runs on one
   thread (slow, always correct);
4. root buffers in "global" scope are workspaces (allocated by the runtime,
   shared between stages); "shared"/"local" ones belong to the one stage
   that uses them and are compacted to a block's / a thread's part
   (compact.py), as are buffers allocated inside a stage;
5. buffers are flattened and indices simplified (tensorir.transform);
6. launch dimensions (launch.py): per axis, the grid is the largest
   ``blockIdx`` extent (symbolic), the block the largest ``threadIdx``
   extent (a constant); a loop shorter than its axis is guarded in the kernel.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir.function import PrimFunc
from tensorir.dispatch import handles
from tensorir.expr import BufferLoad, PrimExpr, Var
from tensorir.functor import Mutator, collect, substitute
from tensorir.stmt import Allocate, AssertStmt, Block, BufferStore, For, SeqStmt, Stmt
from tensorir.transform.flatten_buffers import flat_size, flatten_buffers
from tensorir.transform.hoist_init import hoist_inits
from tensorir.transform.lower_blocks import lower_blocks
from tensorir.transform.lower_predicates import lower_predicates
from tensorir.transform.scalarize_vectors import scalarize_vectors
from tensorir.transform.simplify_indices import simplify_indices

from ..kernel_signature import kernel_sym_vars
from .allreduce import lower_allreduces
from .compact import compact
from .cross_thread_reduce import ThreadReduce, lower_cross_thread_reductions
from .errors import GPULoweringError
from .function import THREAD_AXES, DeviceKernel, GPUFunction, Workspace
from .launch import launch_dims, reduce_scratch
from .thread_vars import unify_thread_vars
from ..source_names import sanitize
from .uncache import copy_source, read_source_instead
from .warp_memory import lower_warp_memory


def _peel_allocations(body: Stmt) -> tuple[list, Stmt]:
    allocs = []
    while isinstance(body, Allocate):
        allocs.append(body.buffer)
        body = body.body
    return allocs, body


def _accessed(stmt: Stmt) -> set[int]:
    """ids of the buffers ``stmt`` loads or stores."""
    return {id(n.buffer) for n in collect(stmt, lambda n: isinstance(n, (BufferLoad, BufferStore)))}


class _InnerAllocations(Mutator):
    """Compact every Allocate inside a stage (innermost first). A block's own temporary in
    "global" scope is one per thread inside threadIdx loops ("local"), else one per block
    ("shared")."""

    def __init__(self, where: str):
        super().__init__()
        self.where = where
        self.thread_loops = 0
        self.enclosing: list[For] = []   # the threadIdx loops around the statement visited

    @handles(PrimExpr)
    def visit_PrimExpr(self, node):
        return node

    @handles(For)
    def visit_For(self, node: For):
        inside = node.kind == "thread_binding" and node.thread_tag in THREAD_AXES
        self.thread_loops += inside
        if inside:
            self.enclosing.append(node)
        try:
            return self.generic_visit(node)
        finally:
            self.thread_loops -= inside
            if inside:
                self.enclosing.pop()

    @handles(Allocate)
    def visit_Allocate(self, node: Allocate):
        body = self.visit(node.body)
        buf = node.buffer
        if buf.scope not in ("shared", "local"):
            buf = buf.replace(scope="local" if self.thread_loops else "shared")
            body = substitute(body, {node.buffer: buf})
        if buf.scope != "shared" or not self.enclosing:
            new, body = compact(buf, body, self.where)
            return Allocate(new, body)
        # one copy per block, though allocated inside thread loops: the compaction sees those loops
        # vary (compacted without them, each thread's part was taken for the block's)
        wrapped = body
        for loop in reversed(self.enclosing):
            wrapped = loop.replace(body=wrapped)
        new, wrapped = compact(buf, wrapped, self.where)
        for _ in self.enclosing:
            wrapped = wrapped.body
        return Allocate(new, wrapped)


def _static_shared(func: PrimFunc) -> PrimFunc:
    """Dynamic shared memory (TVM's "shared.dyn", dlight's matmul tiles) as "shared": every shared
    buffer is compacted to a constant size per block and declared in the kernel, so the two are one."""
    found = {}
    for node in collect(func.body, lambda n: isinstance(n, (Allocate, Block))):
        for buf in ([node.buffer] if isinstance(node, Allocate) else node.alloc_buffers):
            if buf.scope == "shared.dyn" and id(buf) not in found:
                found[id(buf)] = buf
    if not found:
        return func
    return func.with_body(substitute(func.body, {b: b.replace(scope="shared") for b in found.values()}))


def _has_work(stmt: Stmt) -> bool:
    # an assert is work: a stage holding only a check still has to make it
    return bool(collect(stmt, lambda n: isinstance(n, (BufferStore, ThreadReduce, AssertStmt))))


def lower_for_gpu(name: str, func: PrimFunc) -> GPUFunction:
    """Kernels for ``func``, a scheduled PrimFunc (see the module doc)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"lower_for_gpu expects a PrimFunc, got {type(func).__name__}")
    sym_vars = kernel_sym_vars(func)
    threaded = lower_cross_thread_reductions(lower_allreduces(name, unify_thread_vars(_static_shared(func))))
    # inits go before their reduction loops while the split predicates still sit on the blocks
    # (lower_predicates wraps them in ifs the hoisting cannot see past): a reduction over an
    # extent that is 0 at run time then still writes its identity
    threaded = threaded.with_body(hoist_inits(threaded.body))
    lowered = lower_warp_memory(name, lower_blocks(lower_predicates(threaded)))
    root_allocs, body = _peel_allocations(lowered.body)
    stages = list(body.seq) if isinstance(body, SeqStmt) else [body]
    stages = [s for s in stages if _has_work(s)]
    workspaces = []
    accessed = [_accessed(s) for s in stages]
    for buf in root_allocs:
        users = [i for i, ids in enumerate(accessed) if id(buf) in ids]
        if buf.scope == "global":
            if users:
                workspaces.append(buf)
            continue
        if len(users) > 1:
            raise GPULoweringError(
                f"{name}: {buf.scope} buffer {buf.name!r} is used by {len(users)} separate launches "
                "(stages not under one blockIdx loop); its contents do not survive a launch")
        if users:
            i = users[0]
            try:
                new, stage = compact(buf, stages[i], f"{name}")
            except GPULoweringError:
                source = copy_source(buf, stages[i])
                if source is None:
                    raise
                stages[i] = read_source_instead(buf, source, stages[i])
                continue
            stages[i] = Allocate(new, stage)
    known = {id(v) for v in sym_vars}
    ws_records = []
    for buf in workspaces:
        size = flat_size(buf)
        free = [v for v in collect(size, lambda n: isinstance(n, Var)) if id(v) not in known]
        if free:
            raise GPULoweringError(f"{name}: workspace {buf.name!r} has a size over {free[0].name!r}, "
                                   "which is not a parameter's dimension or a scalar parameter")
        ws_records.append(Workspace(sanitize(buf.name), buf.dtype, size, buf))
    kernels = []
    symbol_base = sanitize(name)
    for index, stage in enumerate(stages):
        stage = _InnerAllocations(name).visit(stage)
        flat = scalarize_vectors(simplify_indices(flatten_buffers(lowered.with_body(stage)))).body
        grid, block = launch_dims(flat, sym_vars, name)
        shared = _shared_buffers(flat)
        shared_bytes = sum(int(flat_size(b).value) * dt.itemsize(b.dtype) for b in shared)
        shared_bytes += sum(n * size for n, size in reduce_scratch(flat, block).values())
        kernels.append(DeviceKernel(f"{symbol_base}_k{index}", grid, block, shared_bytes, flat, shared))
    return GPUFunction(name, list(func.buffer_params), sym_vars, ws_records, kernels)


def _shared_buffers(stmt: Stmt) -> list:
    return [a.buffer for a in collect(stmt, lambda n: isinstance(n, Allocate) and n.buffer.scope == "shared")]


__all__ = ["lower_for_gpu", "GPULoweringError"]
