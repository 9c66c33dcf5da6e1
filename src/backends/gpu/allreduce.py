"""``T.tvm_thread_allreduce`` (TVM's lowered cross-thread reductions) as ``ThreadReduce``.

A reducer the emitters combine natively (one value; ``x + y``, ``x * y``, ``max``, ``min``
in either operand order) becomes one ``ThreadReduce`` per
reduced thread axis, each over the previous one's result, inside the thread loops
(``in_thread_loop``): every thread contributes ``condition ? source : identity`` and
stores the total into its result element. Other reducers (several values, an argmax's
selects) are a ``GPULoweringError`` naming the intrinsic and its line;
the interpreter runs them all.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.dispatch import handles
from tensorir.function import PrimFunc
from tensorir.functor import Mutator
from tensorir.stmt import BufferStore, For, is_true
from tensorir.thread_sync import ThreadAllreduce, describe

from .cross_thread_reduce import ThreadReduce
from .errors import GPULoweringError
from .function import THREAD_AXES

_OPS = {E.Add: "sum", E.Mul: "prod", E.Max: "max", E.Min: "min"}


def reducer_op(reducer) -> str | None:
    """sum/prod/max/min when ``reducer`` is that operation, else None. Its identity only stands in for
    the value of a thread whose condition is false (the threads' values are combined alone)."""
    if len(reducer.results) != 1:
        return None
    result, x, y = reducer.results[0], reducer.lhs[0], reducer.rhs[0]
    op = _OPS.get(type(result))
    if op is None or not ((result.a is x and result.b is y) or (result.a is y and result.b is x)):
        return None
    return op


class _Lower(Mutator):
    def __init__(self, name: str):
        super().__init__()
        self.name = name
        self.tags: dict = {}   # id(thread loop var) -> its tag

    @handles(E.PrimExpr)
    def visit_PrimExpr(self, node):
        return node

    @handles(For)
    def visit_For(self, loop: For):
        if loop.kind == "thread_binding":
            self.tags[id(loop.loop_var)] = loop.thread_tag
        return self.generic_visit(loop)

    @handles(ThreadAllreduce)
    def visit_ThreadAllreduce(self, node: ThreadAllreduce):
        where = f"{self.name!r}: {describe(node)}"
        op = reducer_op(node.reducer)
        if op is None:
            raise GPULoweringError(f"{where}: its reducer is not one of x + y, x * y, max(x, y), min(x, y); "
                                   "the GPU targets do not lower it")
        tags = []
        for var in node.threads:
            tag = self.tags.get(id(var))
            if tag not in THREAD_AXES:
                raise GPULoweringError(f"{where}: it reduces over {var.name!r}, which is not a threadIdx loop")
            tags.append(tag)
        if len(set(tags)) != len(tags):
            raise GPULoweringError(f"{where}: it names the thread axis {tags[0]} twice")
        source, load = node.sources[0], node.results[0]
        value = source if is_true(node.condition) else \
            E.select(node.condition, source, node.reducer.identities[0])
        results = []
        for tag in tags:
            var = E.Var(f"{load.buffer.name}_red", source.dtype)
            results.append((var, value, tag))
            value = var
        body = BufferStore(load.buffer, value, load.indices)
        for var, val, tag in reversed(results):
            body = ThreadReduce(var, val, body, op, tag, in_thread_loop=True)
        return body


def lower_allreduces(name: str, func: PrimFunc) -> PrimFunc:
    body = _Lower(name).visit(func.body)
    return func if body is func.body else func.with_body(body)
