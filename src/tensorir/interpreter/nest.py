"""Vectorised execution of a whole loop nest with NumPy.

Each loop var becomes a broadcasted ``arange`` over its axis of the
iteration domain; the store's value and indices are evaluated once for all
iterations (loads are fancy indexing), under a mask built from ``T.where``
predicates and if-conditions. The domain is cut along the outermost loop
into chunks of at most ``CHUNK_LANES`` iterations; chunks run in loop
order, so dependences between chunks are honoured for free.

Within a chunk the result equals serial execution only when no iteration
reads an element that another iteration of the chunk writes. That is
checked on the actual indices before anything is stored; if the check
fails, the chunk runs serially instead (its inner loops are offered to
this executor again, which gives row-by-row execution for e.g. a prefix
sum). Writes of one element by several iterations keep the last one in
loop order, except for a recognised reduction ``Y[i] = Y[i] op g``
(op in + * max min), which is reduced with NumPy over the iterations that
share an element; a block's ``init`` runs first, after checking that for
every element it is the element's first write.
"""
from __future__ import annotations

import math

import numpy as np

from .evaluator import any_active, as_dtype, narrow
from .errors import InterpretError
from .nest_plan import plan_nest

CHUNK_LANES = 1 << 21  # 2M lanes: a few float64 temporaries stay around 64 MB

_UFUNCS = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def run_nest(ex, loop) -> bool:
    """Run ``loop`` vectorised (chunk by chunk); False if its shape does not allow it."""
    key = id(loop)
    if key not in ex.nest_cache:
        ex.nest_cache[key] = plan_nest(loop)
    plan = ex.nest_cache[key]
    if plan is None:
        return False
    mins = [ex.eval_int(l.min) for l in plan.loops]
    extents = [ex.eval_int(l.extent) for l in plan.loops]
    if any(e <= 0 for e in extents):
        return True
    inner = math.prod(extents[1:])
    if inner > CHUNK_LANES and len(extents) > 1:
        return False  # too large even one outer iteration at a time: go one level down
    rows = max(1, CHUNK_LANES // inner)
    for start in range(0, extents[0], rows):
        count = min(rows, extents[0] - start)
        if plan.conflicted or not _run_chunk(ex, plan, mins, extents, start, count):
            plan.conflicted = True
            ex.run_serial(loop, mins[0] + start, count)
    return True


class _Reads:
    """Records loads that may touch the stored buffer's memory."""

    def __init__(self, target):
        self.target = target
        self.same: list = []   # (view, indices, mask) on the stored buffer's own data
        self.aliased = False   # a load from other memory that may overlap it

    def __call__(self, view, indices, mask):
        if view.data is self.target.data:
            self.same.append((view, indices, mask))
        elif np.may_share_memory(view.data, self.target.data):
            self.aliased = True


def _run_chunk(ex, plan, mins, extents, start, count) -> bool:
    domain = (count,) + tuple(extents[1:])
    tokens = []
    try:
        for axis, loop in enumerate(plan.loops):
            lo = mins[axis] + (start if axis == 0 else 0)
            shape = [1] * len(domain)
            shape[axis] = domain[axis]
            grid = np.arange(lo, lo + domain[axis], dtype=np.dtype(loop.loop_var.dtype)).reshape(shape)
            tokens.append(ex.bind(loop.loop_var, grid))
        return _run_leaf(ex, plan, domain, tokens)
    finally:
        ex.recorder = None
        for token in reversed(tokens):
            ex.unbind(token)


def _run_leaf(ex, plan, domain, tokens) -> bool:
    mask = None
    for wrapper in plan.wrappers:
        if hasattr(wrapper, "condition"):
            mask = narrow(mask, ex.eval(wrapper.condition, mask))
        else:
            tokens.append(ex.bind(wrapper.var, ex.eval(wrapper.value, mask)))
    is_init = True
    if plan.realize is not None:
        mask = narrow(mask, ex.eval(plan.realize.predicate, mask))
        is_init = _bind_iter_vars(ex, plan.realize, mask, tokens)
    if not any_active(mask):
        return True
    store = plan.store
    target = ex.view(store.buffer)
    reads = ex.recorder = _Reads(target)
    value = ex.eval(plan.reduction[1] if plan.reduction else store.value, mask)
    indices = [ex.eval(i, mask) for i in store.indices]
    init_mask = narrow(mask, is_init)
    init_value = None
    if plan.init is not None and any_active(init_mask):
        init_value = ex.eval(plan.init.value, init_mask)
    ex.recorder = None
    flat = target.flat_index(indices, mask)
    value = as_dtype(value, store.buffer.dtype)
    reduce_axes = _reduce_axes(indices, domain) if target.non_overlapping else None
    if plan.reduction is None:
        if reads.aliased or not _reads_own_elements(reads.same, target, indices, flat, mask, domain,
                                                    reduce_axes):
            return False
        _store_last_writer(target.data, flat, value, mask, domain, reduce_axes)
        return True
    if reads.aliased or reads.same:
        return False
    if init_value is not None:
        if not _init_comes_first(flat, is_init, mask, domain, reduce_axes):
            return False
        where = _active(init_mask, domain)
        init_value = as_dtype(init_value, store.buffer.dtype)
        target.data[_full(flat, domain)[where]] = _full(init_value, domain)[where]
    _store_reduction(target.data, flat, value, mask, domain, reduce_axes, plan.reduction[0])
    return True


def _bind_iter_vars(ex, realize, mask, tokens):
    """Bind the block's iter vars over the domain; returns the lanes where init runs."""
    block = realize.block
    is_init = True
    for iv, binding in zip(block.iter_vars, realize.iter_values):
        value = as_dtype(ex.eval(binding, mask), iv.var.dtype)
        lo, extent = ex.eval_int(iv.dom.min), ex.eval_int(iv.dom.extent)
        outside = np.logical_or(np.less(value, lo), np.greater_equal(value, lo + extent))
        active = narrow(mask, outside)
        if any_active(active):
            bad = np.broadcast_to(value, np.shape(active))[tuple(np.argwhere(active)[0])] \
                if np.ndim(active) else np.max(value)
            raise InterpretError(f"block {block.name!r}: iter var {iv.var.name!r} bound to {int(bad)}, "
                                 f"outside its domain [{lo}, {lo + extent})")
        if iv.kind == "R":
            is_init = np.logical_and(is_init, np.equal(value, lo))
        tokens.append(ex.bind(iv.var, value))
    return is_init


def _full(a, domain):
    return np.broadcast_to(a, domain)


def _reduce_axes(indices, domain):
    """Axes along which the store's element does not change, if each index dim is a
    strictly monotone function of its own single axis; None if that is not evident."""
    used = set()
    for index in indices:
        arr = np.asarray(index)
        if arr.ndim == 0:
            continue
        if arr.ndim != len(domain):
            return None
        axes = [a for a in range(arr.ndim) if arr.shape[a] != 1]
        if not axes:
            continue
        if len(axes) > 1 or axes[0] in used:
            return None
        steps = np.diff(arr.reshape(-1))
        if not (np.all(steps > 0) or np.all(steps < 0)):
            return None
        used.add(axes[0])
    return tuple(a for a in range(len(domain)) if a not in used and domain[a] != 1)


def _active(mask, domain):
    return np.ones(domain, dtype=bool) if mask is None else _full(mask, domain)


def _is_injective(flat, mask, domain, reduce_axes) -> bool:
    if reduce_axes is not None:
        return not reduce_axes
    written = _full(flat, domain)[_active(mask, domain)]
    return np.unique(written).size == written.size


def _reads_own_elements(reads, target, indices, flat, mask, domain, reduce_axes) -> bool:
    """True if no lane reads an element of the stored buffer that another lane writes."""
    if not reads:
        return True
    if not _is_injective(flat, mask, domain, reduce_axes):
        return False
    written_all = None
    for view, read_indices, read_mask in reads:
        if view is target and all(np.shape(r) == np.shape(w) and np.array_equal(r, w)
                                  for r, w in zip(read_indices, indices)):
            continue  # each lane reads exactly the element it writes
        if written_all is None:
            written_all = _full(flat, domain)[_active(mask, domain)]
        lanes = _active(read_mask, domain)
        read_flat = _full(view.flat_index(read_indices, read_mask), domain)[lanes]
        own = _full(flat, domain)[lanes]
        hit = np.isin(read_flat, written_all)
        if not np.array_equal(read_flat[hit], own[hit]):
            return False
    return True


def _store_last_writer(data, flat, value, mask, domain, reduce_axes):
    if reduce_axes is not None and (not reduce_axes or mask is None):
        # Element constant along reduce_axes: the last iteration there is the last writer.
        pick = tuple(-1 if a in reduce_axes else slice(None) for a in range(len(domain)))
        flat_sel, value_sel = _full(flat, domain)[pick], _full(value, domain)[pick]
        if mask is not None:
            active = _full(mask, domain)[pick]
            flat_sel, value_sel = flat_sel[active], value_sel[active]
        data[flat_sel] = value_sel
        return
    active = _active(mask, domain)
    flat_all, value_all = _full(flat, domain)[active], _full(value, domain)[active]
    elements, first_from_end = np.unique(flat_all[::-1], return_index=True)
    data[elements] = value_all[flat_all.size - 1 - first_from_end]


def _identity(op: str, dtype: np.dtype):
    if op == "add":
        return dtype.type(0)
    if op == "multiply":
        return dtype.type(1)
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    low, high = (-np.inf, np.inf) if dtype.kind == "f" else (info.min, info.max)
    return dtype.type(low if op == "maximum" else high)


def _store_reduction(data, flat, value, mask, domain, reduce_axes, op: str):
    ufunc = _UFUNCS[op]
    if reduce_axes is None:
        active = _active(mask, domain)
        ufunc.at(data, _full(flat, domain)[active], _full(value, domain)[active])
        return
    values = _full(value, domain)
    if mask is not None:
        values = np.where(_full(mask, domain), values, _identity(op, data.dtype))
    if reduce_axes:
        values = ufunc.reduce(values, axis=reduce_axes, keepdims=True, dtype=data.dtype)
    first = tuple(slice(0, 1) if a in reduce_axes else slice(None) for a in range(len(domain)))
    elements = _full(flat, domain)[first]
    if mask is not None:
        active = _full(mask, domain).any(axis=reduce_axes, keepdims=True) if reduce_axes \
            else _full(mask, domain)
        elements, values = elements[active], values[active]
    data[elements] = ufunc(data[elements], values)


def _init_comes_first(flat, is_init, mask, domain, reduce_axes) -> bool:
    """Every element's init (if in this chunk) runs once, before its other updates."""
    if np.ndim(is_init) == 0 and not reduce_axes:
        return True
    if reduce_axes is not None and mask is None:
        init = _full(is_init, domain)
        count = init.sum(axis=reduce_axes, keepdims=True) if reduce_axes else init
        first = init[tuple(slice(0, 1) if a in reduce_axes else slice(None) for a in range(len(domain)))]
        return bool(np.all((count == 0) | ((count == 1) & first)))
    active = _active(mask, domain)
    flat_all, init_all = _full(flat, domain)[active], _full(is_init, domain)[active]
    _, first, inverse = np.unique(flat_all, return_index=True, return_inverse=True)
    count = np.bincount(inverse.reshape(-1), weights=init_all.astype(np.float64))
    started = count > 0
    return bool(np.all(count[started] == 1) and np.all(init_all[first[started]]))
