"""The threads of a GPU block, taking turns between their synchronizations.

A ``threadIdx`` loop whose body holds a barrier (``T.tvm_storage_sync``), a warp
shuffle, ``T.tvm_warp_activemask`` or ``T.tvm_thread_allreduce``
(``tensorir.thread_sync``) cannot run one thread after another: a thread would
read what the others have not written yet. Here every thread of the block (each
combination of the ``threadIdx`` loops inside that loop) runs as its own
executor, one at a time, until it reaches a synchronization or its end (the
statements on the way to a synchronization run as generators that yield at it;
every other statement runs as the ordinary executor runs it). When all have
stopped, the synchronizations whose participants are all there complete, and
those threads go on:

* a barrier completes when every thread of the block waits at the same one;
* a shuffle, per warp (32 consecutive linear thread indices, x fastest), when
  every running thread of the warp is at it. Lanes follow CUDA's
  ``__shfl_sync`` rules: the lane index taken within the caller's ``width``
  segment, an up/down shift leaving the segment returns the caller's own value.
  Reading a lane that is not taking part (not in the caller's mask, not running,
  past the block's last thread), a caller outside its own mask, a width that is
  not a power of two up to 32, or a warp size other than 32 is undefined in CUDA
  and an ``InterpretError`` here;
* ``T.tvm_storage_sync("warp")``, per warp, when every running thread of the
  warp waits at it;
* ``activemask``: the lanes of the warp at it;
* an allreduce when every thread of the block is at it: each group (equal
  indices on the axes not reduced) combines its threads' values in linear
  order with the reducer (a thread whose condition is false contributes the
  identity).

A synchronization inside an expression (a shuffle in a ``T.if_then_else`` branch)
is made before the expression is evaluated, whichever branch it takes.

Anything else (threads of a block stopped at different barriers, some finished
while others wait) is a divergent synchronization, undefined on a GPU, and an
``InterpretError``. Memory: "shared" allocations made inside the threads are
one per block (the k-th allocation of a buffer is the same storage in every
thread), "warp" ones one per warp (TVM's warp memory, before LowerWarpMemory:
its lanes see each other's stores after a ``T.tvm_storage_sync("warp")``);
"local" buffers are each thread's own, including those allocated before the
threads started.
"""
from __future__ import annotations

import itertools

from .. import expr as E
from .. import stmt as S
from .. import thread_sync as TS
from ..functor import collect
from .errors import InterpretError
from .evaluator import as_dtype, scalar
from .executor import Executor, _Jump
from .storage import BufferView

THREAD_TAGS = ("threadIdx.x", "threadIdx.y", "threadIdx.z")
SHARED_SCOPES = ("shared", "shared.dyn")
WARP_SCOPE = "warp"


def is_thread_loop(loop) -> bool:
    return isinstance(loop, S.For) and loop.kind == "thread_binding" and loop.thread_tag in THREAD_TAGS


def synchronizes(stmt) -> bool:
    """Whether ``stmt`` holds an operation between threads."""
    return bool(collect(stmt, lambda n: isinstance(n, TS.ThreadAllreduce) or TS.is_sync_call(n)))


class _Thread:
    def __init__(self, index: dict, linear: int):
        self.index = index          # tag -> this thread's index
        self.linear = linear
        self.lane, self.warp = linear % TS.WARP_SIZE, linear // TS.WARP_SIZE
        self.steps = None           # the generator running this thread
        self.request = None         # (kind, node, payload) while waiting
        self.reply = None
        self.finished = False


def run_block_threads(ex, loop) -> None:
    """Run thread loop ``loop`` (and the thread loops inside it) as one block's threads."""
    dims = _block_dims(ex, loop)
    tags = [t for t in THREAD_TAGS if t in dims]
    threads = []
    for combo in itertools.product(*[range(dims[t]) for t in reversed(tags)]):
        index = dict(zip(reversed(tags), combo))
        x, y, z = (index.get(t, 0) for t in THREAD_TAGS)
        linear = x + dims.get("threadIdx.x", 1) * (y + dims.get("threadIdx.y", 1) * z)
        threads.append(_Thread(index, linear))
    threads.sort(key=lambda t: t.linear)
    shared_storage: dict = {}
    for t in threads:
        t.steps = BlockThreadExecutor(ex, t, shared_storage).steps(loop)
    _schedule(ex, threads)


def _block_dims(ex, loop) -> dict:
    """tag -> threads along it: the largest extent of the loops bound to it."""
    dims: dict = {}
    for node in collect(loop, is_thread_loop):
        try:
            extent = ex.eval_int(node.extent)
        except InterpretError:
            raise InterpretError(f"{ex.func.name}: the extent of thread loop {node.loop_var.name!r} "
                                 f"({node.thread_tag}) must be known when its block starts") from None
        dims[node.thread_tag] = max(dims.get(node.thread_tag, 0), extent)
    return dims


def _advance(t: _Thread) -> None:
    try:
        t.request = t.steps.send(t.reply) if t.request is not None else next(t.steps)
    except StopIteration:
        t.finished, t.request = True, None
    t.reply = None


def _schedule(ex, threads: list) -> None:
    runnable = list(threads)
    while True:
        for t in runnable:
            _advance(t)
        live = [t for t in threads if not t.finished]
        if not live:
            return
        runnable = _complete(ex, threads, live)
        if not runnable:
            raise InterpretError(_divergence(ex, threads, live))


def _divergence(ex, threads, live) -> str:
    places: dict = {}
    for t in live:
        places.setdefault(TS.describe(t.request[1]), []).append(t.linear)
    done = len(threads) - len(live)
    parts = [f"{len(v)} at {k} (first thread {v[0]})" for k, v in places.items()]
    if done:
        parts.append(f"{done} finished")
    return (f"{ex.func.name}: the threads of a block do not reach the same synchronization ("
            + "; ".join(parts) + "): a barrier, shuffle or allreduce under control flow that differs "
            "between threads is undefined on a GPU")


def _complete(ex, threads, live) -> list:
    """Complete every synchronization all of whose participants wait at it; the threads to resume."""
    go: list = []
    first = live[0].request
    if all(t.request[1] is first[1] for t in live) and len(live) == len(threads):
        if first[0] == "barrier":
            return list(live)
        if first[0] == "allreduce":
            _allreduce(ex, live)
            return list(live)
    by_warp: dict = {}
    for t in live:
        by_warp.setdefault(t.warp, []).append(t)
    for warp, members in by_warp.items():
        node = members[0].request[1]
        if not all(t.request[1] is node for t in members):
            continue
        kind = members[0].request[0]
        if kind == "warp barrier":
            go += members
        elif kind == "activemask":
            mask = sum(1 << t.lane for t in members)
            for t in members:
                t.reply = scalar("uint32", mask)
            go += members
        elif kind == "shuffle":
            _shuffle(ex, node, members, [t for t in threads if t.warp == warp])
            go += members
    return go


def _shuffle(ex, node: E.Call, members: list, whole_warp: list) -> None:
    by_lane = {t.lane: t for t in members}
    running = {t.lane for t in whole_warp if not t.finished}
    what = f"{ex.func.name}: T.{node.op}"
    for t in members:
        mask, value, lane_arg, width, warp_size = t.request[2]
        if warp_size != TS.WARP_SIZE:
            raise InterpretError(f"{what}: warp size {warp_size}; the warps here have {TS.WARP_SIZE} lanes")
        if width < 1 or width > TS.WARP_SIZE or width & (width - 1):
            raise InterpretError(f"{what}: width {width} is not a power of two up to {TS.WARP_SIZE} "
                                 "(undefined in CUDA)")
        if not (mask >> t.lane) & 1:
            raise InterpretError(f"{what}: lane {t.lane} of warp {t.warp} calls it with mask {mask:#x}, "
                                 "which leaves the lane out (undefined in CUDA)")
        named = {lane for lane in range(TS.WARP_SIZE) if (mask >> lane) & 1}
        if named & running - set(by_lane):
            raise InterpretError(f"{what}: mask {mask:#x} names lanes of warp {t.warp} that do not take part")
        start = t.lane - t.lane % width
        if node.op == TS.SHUFFLE:
            source = start + lane_arg % width
        elif node.op == TS.SHUFFLE_DOWN:
            delta = lane_arg & (TS.WARP_SIZE - 1)   # the instruction reads the low 5 bits
            source = t.lane + delta if t.lane + delta < start + width else t.lane
        else:
            delta = lane_arg & (TS.WARP_SIZE - 1)
            source = t.lane - delta if t.lane - delta >= start else t.lane
        if source not in by_lane or not (mask >> source) & 1:
            raise InterpretError(
                f"{what}: lane {t.lane} of warp {t.warp} (thread {t.linear}) reads lane {source}, which does "
                f"not take part (mask {mask:#x}, {len(whole_warp)} threads in the warp; undefined in CUDA)")
        t.reply = by_lane[source].request[2][1]


def _allreduce(ex, live: list) -> None:
    node: TS.ThreadAllreduce = live[0].request[1]
    groups: dict = {}
    for t in live:
        reduced, values = t.request[2]
        key = tuple(sorted((tag, i) for tag, i in t.index.items() if tag not in reduced))
        groups.setdefault(key, []).append(values)
    reducer = node.reducer
    totals = {}
    for key, members in groups.items():
        acc = members[0]   # (TVM combines the threads' values alone: the identity only stands in for
        for values in members[1:]:   # a thread whose condition is false)
            acc = _combine(ex, reducer, acc, values)
        totals[key] = acc
    for t in live:
        reduced = t.request[2][0]
        t.reply = totals[tuple(sorted((tag, i) for tag, i in t.index.items() if tag not in reduced))]


def _combine(ex, reducer, a, b) -> list:
    tokens = [ex.bind(v, x) for v, x in zip(reducer.lhs + reducer.rhs, list(a) + list(b))]
    try:
        return [as_dtype(ex.eval(r), r.dtype) for r in reducer.results]
    finally:
        for token in reversed(tokens):
            ex.unbind(token)


class BlockThreadExecutor(Executor):
    """One thread of a block: its own variables and private buffers, the block's shared ones.
    ``steps(stmt)`` runs a statement as a generator yielding ``(kind, node, payload)`` at each
    synchronization and receiving its result."""

    def __init__(self, parent, thread: _Thread, shared_storage: dict):
        views = {}
        for buf, view in parent.views.items():
            if buf.scope == "local":   # each thread's own copy
                view = BufferView(view.name, view.data.copy(), view.shape, view.strides, view.offset)
            elif buf.scope == WARP_SCOPE:   # each warp's
                key = ("before", id(buf), thread.warp)
                if key not in shared_storage:
                    shared_storage[key] = BufferView(view.name, view.data.copy(), view.shape, view.strides,
                                                     view.offset)
                view = shared_storage[key]
            views[buf] = view
        super().__init__(parent.func, parent.vars, views, vectorize=parent.vectorize)
        self.signature_vars = parent.signature_vars
        self.nest_cache = parent.nest_cache
        self.thread_cache = parent.thread_cache
        self.thread = thread
        self.shared_storage = shared_storage
        self.allocations: dict = {}     # id(buffer) -> how many times this thread allocated it
        self.thread_tags: dict = {}     # id(loop var) -> tag, for the allreduce's groups
        self.sync_results: dict = {}    # id(Call) -> its result, while its expression is evaluated

    def in_block(self) -> bool:
        return True

    def allocate(self, buffer) -> BufferView:
        if buffer.scope not in SHARED_SCOPES and buffer.scope != WARP_SCOPE:
            return super().allocate(buffer)
        count = self.allocations.get(id(buffer), 0)
        self.allocations[id(buffer)] = count + 1
        key = (id(buffer), count, self.thread.warp if buffer.scope == WARP_SCOPE else None)
        if key not in self.shared_storage:    # the first thread there makes the block's copy
            self.shared_storage[key] = super().allocate(buffer)
        return self.shared_storage[key]

    def run_thread_loop(self, s) -> None:
        # a thread loop without synchronizations inside the block's (steps handles the others)
        for _ in self.thread_loop_steps(s):
            raise InterpretError(f"{self.func.name}: a synchronization outside the block's threads")

    # ---------------------------------------------------------------- generators
    def syncs(self, node) -> bool:
        entry = self.thread_cache.get(("syncs", id(node)))
        if entry is None:
            entry = (node, synchronizes(node))
            self.thread_cache[("syncs", id(node))] = entry
        return entry[1]

    def steps(self, s):
        if not self.syncs(s):
            self.run(s)
            return
        handler = getattr(self, "_steps_" + type(s).__name__, None)
        if handler is None:
            raise InterpretError(f"{self.func.name}: a synchronization between threads inside a "
                                 f"{type(s).__name__} is not supported by the interpreter")
        yield from handler(s)

    def _steps_SeqStmt(self, s):
        for child in s.seq:
            yield from self.steps(child)

    def _steps_For(self, s):
        if is_thread_loop(s):
            yield from self.thread_loop_steps(s)
            return
        start = yield from self.value(s.min)
        count = yield from self.value(s.extent)
        token = self.bind(s.loop_var, scalar(s.loop_var.dtype, int(start)))
        try:
            for i in range(int(start), int(start) + int(count)):
                self.vars[s.loop_var] = scalar(s.loop_var.dtype, i)
                try:
                    yield from self.steps(s.body)
                except _Jump as jump:
                    if jump.leave:
                        break
        finally:
            self.unbind(token)

    def thread_loop_steps(self, s):
        # the loop's var is its start plus the thread's index, as on the GPU; a loop shorter than
        # the block skips the threads past its end
        index = self.thread.index.get(s.thread_tag, 0)
        if index >= self.eval_int(s.extent):
            return
        self.thread_tags[id(s.loop_var)] = s.thread_tag
        token = self.bind(s.loop_var, scalar(s.loop_var.dtype, self.eval_int(s.min) + index))
        try:
            yield from self.steps(s.body)
        finally:
            self.unbind(token)

    def _steps_IfThenElse(self, s):
        if (yield from self.value(s.condition)):
            yield from self.steps(s.then_case)
        elif s.else_case is not None:
            yield from self.steps(s.else_case)

    def _steps_While(self, s):
        while (yield from self.value(s.condition)):
            try:
                yield from self.steps(s.body)
            except _Jump as jump:
                if jump.leave:
                    break

    def _steps_LetStmt(self, s):
        token = self.bind(s.var, (yield from self.value(s.value)))
        try:
            yield from self.steps(s.body)
        finally:
            self.unbind(token)

    def _steps_Allocate(self, s):
        self.views[s.buffer] = self.allocate(s.buffer)
        try:
            yield from self.steps(s.body)
        finally:
            del self.views[s.buffer]

    def _steps_BlockRealize(self, realize):
        # TVM's LowerCrossThreadReduction leaves the allreduce in a block of its own
        block = realize.block
        if block.init is not None or block.match_buffers:
            raise InterpretError(f"{self.func.name}: block {block.name!r} synchronizes threads and has an "
                                 "init or match_buffer, which the interpreter does not run between threads")
        if not (yield from self.value(realize.predicate)):
            return
        tokens = []
        try:
            for iv, binding in zip(block.iter_vars, realize.iter_values):
                tokens.append(self.bind(iv.var, scalar(iv.var.dtype, (yield from self.value(binding)))))
            for buf in block.alloc_buffers:
                self.views[buf] = self.allocate(buf)
            yield from self.steps(block.body)
        finally:
            for buf in block.alloc_buffers:
                self.views.pop(buf, None)
            for token in reversed(tokens):
                self.unbind(token)

    def _steps_Evaluate(self, s):
        yield from self.value(s.value)

    def _steps_BufferStore(self, s):
        yield from self.prepare(s)
        try:
            self.run(s)
        finally:
            self.sync_results.clear()

    def _steps_AssertStmt(self, s):
        yield from self._steps_BufferStore(s)

    def _steps_ThreadAllreduce(self, s: TS.ThreadAllreduce):
        reduced = set()
        for var in s.threads:
            tag = self.thread_tags.get(id(var))
            if tag is None:
                raise InterpretError(f"{self.func.name}: T.{TS.ALLREDUCE} reduces over "
                                     f"{var.name!r}, which is not an enclosing thread index")
            reduced.add(tag)
        if (yield from self.value(s.condition)):
            values = []
            for v in s.sources:
                values.append(as_dtype((yield from self.value(v)), v.dtype))
        else:
            values = [self.eval(i) for i in s.reducer.identities]
        totals = yield ("allreduce", s, (reduced, values))
        for load, total in zip(s.results, totals):
            self.view(load.buffer).store([self.eval(i) for i in load.indices], as_dtype(total, load.buffer.dtype))

    def prepare(self, node):
        """Make the synchronizations in ``node``'s expressions (innermost first)."""
        entry = self.thread_cache.get(("calls", id(node)))
        if entry is None:
            entry = (node, TS.innermost_first(node))
            self.thread_cache[("calls", id(node))] = entry
        for call in entry[1]:
            if call.op == TS.STORAGE_SYNC:
                yield ("warp barrier" if call.args[0].value == WARP_SCOPE else "barrier", call, None)
                result = scalar("int32", 0)
            elif call.op == TS.ACTIVEMASK:
                result = yield ("activemask", call, None)
            else:
                mask, value, lane, width, warp_size = (self.eval(a) for a in call.args)
                payload = (int(mask) & 0xFFFFFFFF, as_dtype(value, call.dtype), int(lane), int(width),
                           int(warp_size))
                result = yield ("shuffle", call, payload)
            self.sync_results[id(call)] = result

    def value(self, e):
        if not self.syncs(e):
            return self.eval(e)
        yield from self.prepare(e)
        try:
            return self.eval(e)
        finally:
            self.sync_results.clear()

    def sync_call(self, e: E.Call, mask):
        try:
            return self.sync_results[id(e)]
        except KeyError:
            raise InterpretError(f"{self.func.name}: T.{e.op} where the interpreter cannot make it "
                                 "(a block's init or a vectorized loop)") from None
