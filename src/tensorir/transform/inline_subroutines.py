"""inline_subroutines: calls between prim_funcs (``cls.sub(args)``) inlined into their callers.

No kernel calls another here: a build first replaces every call by a copy of the callee's body
(what TVM's InlinePrivateFunctions does for private callees), so the code generators and the
interpreter never see one. A copy has fresh loop, let and block variables and fresh buffers
per call site, and:

- a scalar parameter is bound to its argument by a let (evaluated once, before the body, as
  a call evaluates its arguments);
- a pointer parameter ``p: T.handle("float32")`` receives ``T.address_of(S[idx])`` (or
  ``S.data``): every access ``V[j]`` of a buffer ``V`` declared over ``p`` becomes an access
  of the one-dimensional view of ``S``'s storage at ``base + V.elem_offset + sum(j_d *
  stride_d)`` with ``base`` the flat position of ``S[idx]`` (``V``'s strides, or row-major ones);
  a block region of ``V`` becomes the flat range spanning it;
- the callee's root-block allocations become allocations scoped to the call site;
- a call inside an expression is replaced by the callee's result when the callee only binds
  lets before its ``return`` (its lets are substituted: the values are pure);
- a statement ``cls.sub(...)`` is the callee's body.

Refused with an ``IRError`` naming the functions: recursion (the body would never end), a
call whose callee is missing, a call of a callee with loops or stores inside an expression, a
view of another dtype than the storage it points into. A function that still takes pointers or
returns a value after this cannot be a kernel: ``check_kernel`` says so by name.
"""
from __future__ import annotations

import functools

from .. import dtype as dt
from .. import expr as E
from ..buffer import Buffer, Pointer
from ..errors import IRError
from ..function import PrimFunc, trailing_ret
from ..functor import Mutator, collect
from ..dispatch import handles
from ..stmt import (Allocate, Block, BlockRealize, BufferRegion, BufferStore, Evaluate, LetStmt, Range,
                    Stmt)


def calls_of(func: PrimFunc) -> list[E.CallFunc]:
    return collect(func.body, lambda n: isinstance(n, E.CallFunc))


@functools.lru_cache(maxsize=512)
def has_calls(func: PrimFunc) -> bool:
    return bool(calls_of(func))


def inline_subroutines(funcs: dict) -> dict:
    """``funcs`` (name -> PrimFunc, other module members passed through) with every call
    between prim_funcs inlined. Callees stay in the result (drop them with ``subroutine_names``)."""
    prims = {n: f for n, f in funcs.items() if isinstance(f, PrimFunc)}
    if not any(calls_of(f) for f in prims.values()):
        return funcs
    done: dict[str, PrimFunc] = {}

    def inlined(name: str, stack: tuple) -> PrimFunc:
        if name in done:
            return done[name]
        func = prims[name]
        callees = {c.callee for c in calls_of(func)}
        for callee in callees:
            if callee not in prims:
                raise IRError(f"prim_func {name!r} calls {callee!r}, which is not a prim_func of the module")
            if callee in stack or callee == name:
                chain = " -> ".join(stack[stack.index(callee):] + (name, callee)) if callee in stack \
                    else f"{name} -> {name}"
                raise IRError(f"prim_func {name!r} calls itself ({chain}): recursive calls between "
                              "prim_funcs are not supported (the build inlines every call)")
            inlined(callee, stack + (name,))
        if callees:
            names = {b.name for b in collect(func.body, lambda n: isinstance(n, Block))}
            func = func.with_body(_Inliner(done, name, names).visit(func.body))
            func = _with_root(func)
        done[name] = func
        return func

    for name in prims:
        inlined(name, ())
    return {n: done.get(n, f) for n, f in funcs.items()}


def subroutine_names(funcs: dict) -> set[str]:
    """The prim_funcs some prim_func of ``funcs`` calls."""
    return {c.callee for f in funcs.values() if isinstance(f, PrimFunc) for c in calls_of(f)}


def kernels_of(funcs: dict) -> dict:
    """The kernels of a set of prim_funcs built together: calls inlined, the callees (built
    only inlined) left out, every other function checked to be a kernel."""
    called = subroutine_names(funcs)
    funcs = inline_subroutines(funcs)
    kernels = {n: f for n, f in funcs.items() if n not in called}
    return {name: check_kernel(func, name) for name, func in kernels.items()}


def check_kernel(func: PrimFunc, name: str | None = None) -> PrimFunc:
    # (the reference interpreter asks once per call of a kernel: the answer is kept per function)
    return _checked_kernel(func, name or func.name)


@functools.lru_cache(maxsize=512)
def _checked_kernel(func: PrimFunc, name: str) -> PrimFunc:
    """``func`` as a kernel runs it: a kernel takes buffers and scalars and returns nothing (a
    subroutine is built only inlined into the prim_funcs calling it); its LLVM intrinsic calls
    become this project's ops (``llvm_intrinsics``), an ``IRError`` naming any other."""
    from .llvm_intrinsics import lower_llvm_intrinsics
    if func.pointer_params:
        raise IRError(f"prim_func {name!r} takes pointer parameters "
                      f"({', '.join(repr(p.name) for p in func.pointer_params)}: T.handle(dtype)): it is a "
                      "subroutine, built only inlined into the prim_funcs that call it (cls.f(...)), "
                      "never as a kernel of its own")
    if func.result is not None:
        raise IRError(f"prim_func {name!r} returns a value (-> T.{func.ret_dtype}): it is a subroutine, "
                      "built only inlined into the prim_funcs that call it, never as a kernel of its own")
    calls = calls_of(func)
    if calls:
        raise IRError(f"prim_func {name!r} calls prim_func {calls[0].callee!r}: build it together with "
                      "its callees (a module), which inlines the calls")
    return lower_llvm_intrinsics(func)


def _with_root(func: PrimFunc) -> PrimFunc:
    """Blocks an inlined body brought along need the root block the parser gives a function
    with blocks."""
    if func.root_block is not None or not collect(func.body, lambda n: isinstance(n, BlockRealize)):
        return func
    return func.with_body(BlockRealize([], None, Block("root", [], [], [], func.body)))


class _Inliner(Mutator):
    """Replaces the calls in one caller's body (callees already inlined themselves)."""

    def __init__(self, callees: dict, caller: str, block_names: set):
        super().__init__()
        self.callees = callees
        self.caller = caller
        self.block_names = set(block_names)

    def callee(self, call: E.CallFunc) -> PrimFunc:
        return self.callees[call.callee]

    @handles(Evaluate)
    def evaluate(self, node: Evaluate):
        if isinstance(node.value, E.CallFunc):
            call = node.value
            args = tuple(self.visit(a) for a in call.args)
            return self.instance(self.callee(call), args, statement=True)
        return self.generic_visit(node)

    @handles(E.CallFunc)
    def call_in_expression(self, call: E.CallFunc):
        callee = self.callee(call)
        if callee.result is None:
            raise IRError(f"prim_func {self.caller!r} uses the call of {call.callee!r} as a value, but "
                          f"{call.callee!r} returns nothing")
        args = tuple(self.visit(a) for a in call.args)
        return self.instance(callee, args, statement=False)

    def instance(self, callee: PrimFunc, args: tuple, statement: bool):
        vmap: dict = {}
        lets = []
        views: dict[int, tuple] = {}   # pointer id -> (storage, base)
        for param, arg in zip(callee.params, args):
            if isinstance(param, Pointer):
                views[id(param)] = self.pointee(callee, param, arg)
            elif isinstance(param, E.Var):
                if statement and not isinstance(arg, (E.Var, E.IntImm, E.FloatImm)):
                    fresh = E.Var(param.name, param.dtype)
                    lets.append((fresh, arg))
                    vmap[param] = fresh
                else:
                    vmap[param] = arg
            else:
                raise IRError(f"prim_func {callee.name!r} takes a buffer parameter {param.name!r}: only "
                              "scalars and pointers pass between prim_funcs")
        body = _Instance(vmap).visit(callee.body)
        body = _RedirectViews(views, callee.name).visit(body)
        body = self.unwrap_root(body)
        if not statement:
            return self.expression(callee, body)
        ret = trailing_ret(body)
        if ret is not None:   # a statement call discards the result: the return is no statement here
            body = _Replace({ret: E.const(0, "int32")}).visit(body)
        body = self.rename_blocks(body)
        for var, value in reversed(lets):
            body = LetStmt(var, value, body)
        return body

    def pointee(self, callee: PrimFunc, param: Pointer, arg) -> tuple:
        if not (isinstance(arg, E.Call) and arg.op == E.ADDRESS_OF):
            raise IRError(f"prim_func {self.caller!r} passes {arg!r} as pointer {param.name!r} of "
                          f"{callee.name!r}; pass T.address_of(A[i]) or A.data")
        load = arg.args[0]
        buf = load.buffer
        if isinstance(buf.storage, Pointer):
            raise IRError(f"prim_func {self.caller!r} passes on its own pointer to {callee.name!r}; "
                          "it is inlined only once its own caller is")
        return buf.storage, _flat_position(buf, load.indices)

    def unwrap_root(self, body: Stmt) -> Stmt:
        if isinstance(body, BlockRealize) and body.block.name == "root" and not body.block.iter_vars:
            inner = body.block.body
            for buf in reversed(body.block.alloc_buffers):
                inner = Allocate(buf, inner)
            return inner
        return body

    def expression(self, callee: PrimFunc, body: Stmt):
        """The result of a callee that only binds lets before returning."""
        lets = {}
        node = body
        while isinstance(node, LetStmt):
            lets[node.var] = E.convert(node.value) if not lets else _subst(node.value, lets)
            node = node.body
        ret = trailing_ret(node)
        if not (isinstance(node, Evaluate) and ret is node.value):
            raise IRError(f"prim_func {self.caller!r} calls {callee.name!r} inside an expression, and "
                          f"{callee.name!r} runs statements (loops, stores, allocations) before its "
                          "return: only a callee of lets and a return is inlined there; call it as a "
                          "statement that stores its result through a pointer instead")
        return _subst(ret.args[0], lets)

    def rename_blocks(self, body: Stmt) -> Stmt:
        """Inlined copies of one block get distinct names (``name_1``, ``name_2``...)."""
        renames = {}
        for realize in collect(body, lambda n: isinstance(n, BlockRealize)):
            name = realize.block.name
            k = 1
            new = f"{name}_{k}"
            while new in self.block_names:
                k += 1
                new = f"{name}_{k}"
            self.block_names.add(new)
            renames[realize.block] = realize.block.replace(name=new)
        if not renames:
            return body
        return _Replace(renames).visit(body)


def _subst(expr, lets: dict):
    from ..functor import substitute
    return substitute(expr, lets)


def _plus(a, b):
    """``a + b`` without the zero terms (a flat index stays readable)."""
    if E.is_const_int(a, 0):
        return b
    if E.is_const_int(b, 0):
        return a
    return E.add(a, b)


def _times(a, b):
    if E.is_const_int(b, 1):
        return a
    if E.is_const_int(a, 1):
        return b
    return E.mul(a, b)


def _row_major(shape) -> list:
    strides, acc = [], E.const(1, "int64")
    for d in reversed(shape):
        strides.append(acc)
        acc = _times(acc, E.cast("int64", d))
    return strides[::-1]


def _strides(buf: Buffer) -> list:
    return [E.cast("int64", s) for s in buf.strides] if buf.strides else _row_major(buf.shape)


def _flat_position(buf: Buffer, indices) -> E.PrimExpr:
    """The element ``buf[indices]``'s position in its storage (row-major)."""
    pos = E.cast("int64", buf.elem_offset) if buf.data is not None else E.const(0, "int64")
    if buf.data is None and (buf.strides or not E.is_const_int(buf.elem_offset, 0)):
        raise IRError(f"a pointer into buffer {buf.name!r} (strided or offset storage) is not supported")
    for i, s in zip(indices, _strides(buf)):
        pos = _plus(pos, _times(E.cast("int64", i), s))
    return pos


def _size(buf: Buffer) -> E.PrimExpr:
    size = E.const(1, "int64")
    for d in buf.shape:
        size = _times(size, E.cast("int64", d))
    return size


class _Instance(Mutator):
    """A copy of a callee's body: parameters replaced, every other variable and buffer fresh
    (one function may inline a callee at several sites)."""

    def __init__(self, vmap: dict):
        super().__init__()
        self._memo.update(vmap)

    def _dispatch(self, node):
        if isinstance(node, Pointer):   # a pointer parameter stays; its views are redirected next
            return node
        if isinstance(node, E.Var):
            return node.with_name(node.name)
        if isinstance(node, Buffer):
            new = self.generic_visit(node)
            return new if new is not node else node.replace()
        return super()._dispatch(node)


class _RedirectViews(Mutator):
    """Accesses of buffers declared over pointer parameters become accesses of the caller's
    storage (see the module docstring)."""

    def __init__(self, views: dict, callee: str):
        super().__init__()
        self.views = views
        self.callee = callee
        self.flat: dict[int, Buffer] = {}

    def target(self, buf: Buffer):
        pointer = buf if isinstance(buf, Pointer) else buf.data
        if not isinstance(pointer, Pointer) or id(pointer) not in self.views:
            return None
        storage, base = self.views[id(pointer)]
        if buf.dtype != storage.dtype:
            raise IRError(f"prim_func {self.callee!r} reads its pointer {pointer.name!r} as {buf.dtype} "
                          f"(buffer {buf.name!r}); the storage it points into is {storage.dtype}")
        flat = self.flat.get(id(storage))
        if flat is None:
            flat = Buffer(f"{storage.name}_flat", [_size(storage)], storage.dtype, data=storage,
                          scope=storage.scope)
            self.flat[id(storage)] = flat
        if buf is pointer:
            return flat, base, []
        return flat, _plus(base, E.cast("int64", buf.elem_offset)), _strides(buf)

    def flat_index(self, buf, indices):
        flat, pos, strides = self.target(buf)
        for i, s in zip(indices, strides):
            pos = _plus(pos, _times(_widen(i), s))
        return flat, [pos]

    @handles(E.BufferLoad)
    def load(self, node: E.BufferLoad):
        indices = [self.visit(i) for i in node.indices]
        if self.target(node.buffer) is None:
            return node if all(a is b for a, b in zip(indices, node.indices)) else E.BufferLoad(node.buffer, indices)
        flat, pos = self.flat_index(node.buffer, indices)
        return E.BufferLoad(flat, pos)

    @handles(BufferStore)
    def store(self, node: BufferStore):
        value = self.visit(node.value)
        indices = [self.visit(i) for i in node.indices]
        if self.target(node.buffer) is None:
            return BufferStore(node.buffer, value, indices)
        flat, pos = self.flat_index(node.buffer, indices)
        return BufferStore(flat, value, pos)

    @handles(BufferRegion)
    def region(self, node: BufferRegion):
        found = self.target(node.buffer)
        if found is None:
            return self.generic_visit(node)
        flat, start, strides = found
        lo, span = start, E.const(1, "int64")
        for r, s in zip(node.region, strides):
            lo = _plus(lo, _times(_widen(self.visit(r.min)), s))
            span = _plus(span, _times(E.sub(_widen(self.visit(r.extent)), 1), s))
        return BufferRegion(flat, [Range(lo, span)])


def _widen(i):
    """An index in int64 (a vector index keeps its lanes)."""
    return E.cast(dt.with_lanes("int64", dt.lanes(i.dtype)), i)


class _Replace(Mutator):
    def __init__(self, mapping: dict):
        super().__init__()
        self._memo.update(mapping)


__all__ = ["inline_subroutines", "subroutine_names", "check_kernel", "calls_of", "kernels_of"]
