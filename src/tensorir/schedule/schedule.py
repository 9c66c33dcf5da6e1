"""The user-facing Schedule: handles, primitives, and the trace.

Every primitive builds a new PrimFunc and swaps it in only on success, so a
primitive that raises ``ScheduleError`` leaves the function unchanged and is
not recorded in the trace.
"""
from __future__ import annotations

from typing import Callable

from ..errors import ScheduleError
from ..expr import Var
from ..function import PrimFunc
from . import blockize as blockize_mod
from . import layout
from . import cache, compute_location, inline, loops, reduction, reverse_inline
from .checks import leaf_realizes, reads_buffer, writes_buffer
from .region import RegionError
from .state import BlockRV, LoopRV, StmtIndex
from .trace import Instruction, Trace


def _as_module(func_or_module) -> dict[str, PrimFunc]:
    if isinstance(func_or_module, PrimFunc):
        return {func_or_module.name: func_or_module}
    functions = getattr(func_or_module, "functions", func_or_module)
    if not hasattr(functions, "items"):
        raise TypeError("Schedule expects a PrimFunc, a {name: PrimFunc} dict, or an object with a "
                        f"'functions' mapping; got {type(func_or_module).__name__}")
    prims = {name: f for name, f in functions.items() if isinstance(f, PrimFunc)}
    if not prims:
        raise ValueError("Schedule: the module has no PrimFunc")
    return {str(getattr(name, "name_hint", name)): f for name, f in prims.items()}


class Schedule:
    def __init__(self, func_or_module, func_name: str | None = None):
        self._mod = _as_module(func_or_module)
        if func_name is None:
            if len(self._mod) == 1:
                func_name = next(iter(self._mod))
            elif "main" in self._mod:
                func_name = "main"
            else:
                raise ValueError(f"Schedule: the module has several PrimFuncs {sorted(self._mod)}; "
                                 "pass func_name")
        self.work_on(func_name)
        self.trace = Trace()
        self._blocks: dict[BlockRV, str] = {}
        self._loops: dict[LoopRV, Var] = {}
        self._counter = 0

    # ------------------------------------------------------------- state
    @property
    def mod(self) -> dict[str, PrimFunc]:
        return dict(self._mod)

    @property
    def func(self) -> PrimFunc:
        return self._mod[self._name]

    def work_on(self, func_name: str) -> None:
        if func_name not in self._mod:
            raise ValueError(f"Schedule: no PrimFunc named {func_name!r}; have {sorted(self._mod)}")
        self._name = func_name

    def _new_block_rv(self, name: str) -> BlockRV:
        rv = BlockRV(self._counter)
        self._counter += 1
        self._blocks[rv] = name
        return rv

    def _new_loop_rv(self, var: Var) -> LoopRV:
        rv = LoopRV(self._counter)
        self._counter += 1
        self._loops[rv] = var
        return rv

    def _block_name(self, block) -> str:
        if isinstance(block, str):
            return block
        if isinstance(block, BlockRV) and block in self._blocks:
            return self._blocks[block]
        raise ScheduleError(f"expected a block handle from this schedule, got {block!r}")

    def _loop_var(self, loop) -> Var:
        if isinstance(loop, LoopRV) and loop in self._loops:
            return self._loops[loop]
        raise ScheduleError(f"expected a loop handle from this schedule, got {loop!r}")

    def _apply(self, kind: str, inputs: list, run: Callable[[PrimFunc], tuple[PrimFunc, list]]):
        try:
            new_func, outputs = run(self.func)
        except RegionError as err:
            raise ScheduleError(f"{kind}: {err}") from None
        self._mod[self._name] = new_func
        self.trace.append(Instruction(kind, inputs, outputs))
        return outputs

    def _record_lookup(self, kind: str, inputs: list, outputs: list) -> None:
        self.trace.append(Instruction(kind, inputs, outputs))

    # ------------------------------------------------------------- lookup
    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block ``name``; ``func_name`` (TVM's keyword) first makes that PrimFunc the one
        this schedule works on, as ``work_on`` does."""
        if func_name is not None:
            self.work_on(func_name)
        StmtIndex(self.func).realize(name)
        rv = self._new_block_rv(name)
        self._record_lookup("get_block", [name] if func_name is None else [name, func_name], [rv])
        return rv

    def get_sblock(self, name: str, func_name: str | None = None) -> BlockRV:
        """Newer TVM's name of ``get_block`` (its blocks are written ``T.sblock``)."""
        return self.get_block(name, func_name)

    def get(self, rv):
        """The IR node a handle names now: the ``Block`` of a BlockRV, the ``For`` of a LoopRV."""
        index = StmtIndex(self.func)
        if isinstance(rv, LoopRV):
            return index.loop(self._loop_var(rv))
        return index.realize(self._block_name(rv)).block

    def get_loops(self, block) -> list[LoopRV]:
        index = StmtIndex(self.func)
        realize = index.realize(self._block_name(block))
        rvs = [self._new_loop_rv(lp.loop_var) for lp in index.loops_of(realize)]
        self._record_lookup("get_loops", [block], rvs)
        return rvs

    def get_child_blocks(self, block_or_loop) -> list[BlockRV]:
        index = StmtIndex(self.func)
        node = index.loop(self._loop_var(block_or_loop)) if isinstance(block_or_loop, LoopRV) \
            else index.realize(self._block_name(block_or_loop))
        rvs = [self._new_block_rv(r.block.name) for r in index.child_realizes(node)]
        self._record_lookup("get_child_blocks", [block_or_loop], rvs)
        return rvs

    def _neighbours(self, block, kind: str) -> list[BlockRV]:
        index = StmtIndex(self.func)
        realize = index.realize(self._block_name(block))
        scope = index.scope_block(realize)
        scope_realize = index.parent[id(scope)]
        found = []
        for other in leaf_realizes(index, scope_realize):
            if other is realize:
                continue
            if kind == "get_producers":
                hit = any(writes_buffer(other.block, r.buffer) for r in realize.block.reads)
            else:
                hit = any(reads_buffer(other.block, w.buffer) for w in realize.block.writes)
            if hit:
                found.append(self._new_block_rv(other.block.name))
        self._record_lookup(kind, [block], found)
        return found

    def get_producers(self, block) -> list[BlockRV]:
        return self._neighbours(block, "get_producers")

    def get_consumers(self, block) -> list[BlockRV]:
        return self._neighbours(block, "get_consumers")

    # ------------------------------------------------------------- loops
    def split(self, loop, factors, disable_predication: bool = False) -> list[LoopRV]:
        """Split ``loop`` by ``factors`` (one may be None). ``disable_predication=True`` asks
        for no guard predicate; it is accepted only where the factors provably divide the
        extent exactly, since an unguarded split would run past the loop's end."""
        var = self._loop_var(loop)
        factors = list(factors)

        def run(func):
            new_func, new_vars = loops.split(func, var, factors, disable_predication)
            return new_func, [self._new_loop_rv(v) for v in new_vars]
        inputs = [loop, factors] + ([True] if disable_predication else [])
        return self._apply("split", inputs, run)

    def add_unit_loop(self, block_or_loop) -> LoopRV:
        """A new loop of extent 1 directly around the block or loop."""
        target = self._target(block_or_loop)

        def run(func):
            new_func, var = loops.add_unit_loop(func, target)
            return new_func, [self._new_loop_rv(var)]
        return self._apply("add_unit_loop", [block_or_loop], run)[0]

    def fuse(self, *loop_rvs) -> LoopRV:
        loop_vars = [self._loop_var(lp) for lp in loop_rvs]

        def run(func):
            new_func, var = loops.fuse(func, loop_vars)
            return new_func, [self._new_loop_rv(var)]
        return self._apply("fuse", list(loop_rvs), run)[0]

    def reorder(self, *loop_rvs) -> None:
        loop_vars = [self._loop_var(lp) for lp in loop_rvs]
        self._apply("reorder", list(loop_rvs), lambda f: (loops.reorder(f, loop_vars), []))

    def _set_kind(self, name: str, loop, kind: str, tag=None, extra=()):
        var = self._loop_var(loop)
        self._apply(name, [loop, *extra], lambda f: (loops.set_kind(f, var, kind, tag), []))

    def parallel(self, loop) -> None:
        self._set_kind("parallel", loop, "parallel")

    def vectorize(self, loop) -> None:
        self._set_kind("vectorize", loop, "vectorized")

    def unroll(self, loop) -> None:
        self._set_kind("unroll", loop, "unrolled")

    def bind(self, loop, thread_axis: str) -> None:
        self._set_kind("bind", loop, "thread_binding", thread_axis, (thread_axis,))

    def _target(self, block_or_loop):
        if isinstance(block_or_loop, LoopRV):
            return self._loop_var(block_or_loop)
        return self._block_name(block_or_loop)

    def annotate(self, block_or_loop, key: str, value) -> None:
        target = self._target(block_or_loop)
        self._apply("annotate", [block_or_loop, key, value],
                    lambda f: (loops.annotate(f, target, key, value), []))

    def unannotate(self, block_or_loop, key: str) -> None:
        target = self._target(block_or_loop)
        self._apply("unannotate", [block_or_loop, key], lambda f: (loops.unannotate(f, target, key), []))

    # ------------------------------------------------------------- compute location
    def compute_at(self, block, loop) -> None:
        name, var = self._block_name(block), self._loop_var(loop)
        self._apply("compute_at", [block, loop], lambda f: (compute_location.compute_at(f, name, var), []))

    def reverse_compute_at(self, block, loop) -> None:
        name, var = self._block_name(block), self._loop_var(loop)
        self._apply("reverse_compute_at", [block, loop],
                    lambda f: (compute_location.reverse_compute_at(f, name, var), []))

    def compute_inline(self, block) -> None:
        name = self._block_name(block)
        self._apply("compute_inline", [block], lambda f: (inline.compute_inline(f, name), []))

    def reverse_compute_inline(self, block) -> None:
        name = self._block_name(block)
        self._apply("reverse_compute_inline", [block],
                    lambda f: (reverse_inline.reverse_compute_inline(f, name), []))

    # ------------------------------------------------------------- buffers
    def _new_block_result(self, kind, inputs, fn):
        def run(func):
            new_func, name = fn(func)
            return new_func, [self._new_block_rv(name)]
        return self._apply(kind, inputs, run)[0]

    def cache_read(self, block, read_buffer_index: int, storage_scope: str) -> BlockRV:
        name = self._block_name(block)
        return self._new_block_result("cache_read", [block, read_buffer_index, storage_scope],
                                      lambda f: cache.cache_read(f, name, read_buffer_index, storage_scope))

    def cache_write(self, block, write_buffer_index: int, storage_scope: str) -> BlockRV:
        name = self._block_name(block)
        return self._new_block_result("cache_write", [block, write_buffer_index, storage_scope],
                                      lambda f: cache.cache_write(f, name, write_buffer_index,
                                                                  storage_scope))

    def set_scope(self, block, buffer_index: int, storage_scope: str) -> None:
        name = self._block_name(block)
        self._apply("set_scope", [block, buffer_index, storage_scope],
                    lambda f: (cache.set_scope(f, name, buffer_index, storage_scope), []))

    def storage_align(self, block, buffer_index: int, axis: int, factor: int, offset: int) -> None:
        name = self._block_name(block)
        self._apply("storage_align", [block, buffer_index, axis, factor, offset],
                    lambda f: (cache.storage_align(f, name, buffer_index, axis, factor, offset), []))

    def transform_layout(self, block, buffer, index_map, pad_value=None) -> None:
        """TVM's ``transform_layout(block, ("write", 0) | ("read", i) | name, index_map)``:
        store the buffer in the layout ``index_map`` gives (a function of the old indices).
        Maps that need padding (``pad_value``) are refused."""
        if pad_value is not None:
            raise ScheduleError("transform_layout: pad_value (a layout with padding) is not "
                                "supported; use a map that holds the buffer exactly")
        name = self._block_name(block)
        self._apply("transform_layout", [block, buffer, index_map],
                    lambda f: (layout.transform_layout(f, name, buffer, index_map), []))

    # ------------------------------------------------------------- reductions, blockize
    def decompose_reduction(self, block, loop) -> BlockRV:
        name, var = self._block_name(block), self._loop_var(loop)
        return self._new_block_result("decompose_reduction", [block, loop],
                                      lambda f: reduction.decompose_reduction(f, name, var))

    def rfactor(self, loop, factor_axis: int) -> BlockRV:
        var = self._loop_var(loop)
        return self._new_block_result("rfactor", [loop, factor_axis],
                                      lambda f: reduction.rfactor(f, var, factor_axis))

    def blockize(self, loop, preserve_unit_iters: bool = True) -> BlockRV:
        """TVM's blockize of ``loop``; ``preserve_unit_iters=False`` binds outer iter vars over
        unit-extent loops to 0 instead of the loop."""
        var = self._loop_var(loop)
        inputs = [loop] + ([False] if not preserve_unit_iters else [])
        return self._new_block_result("blockize", inputs,
                                      lambda f: blockize_mod.blockize(f, var, preserve_unit_iters))
