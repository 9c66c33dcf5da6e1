"""reverse_compute_inline: fold a one-statement consumer block into its producer and drop
the intermediate buffer.

The consumer may read the intermediate ``B`` at any index the producer's point determines
(TVM accepts these too):

- per dimension ``B[..., v + c, ...]`` (``c`` free of the consumer's iter vars; a transpose
  permutes dimensions), or a pair of dimensions ``B[..., v // K, v % K, ...]`` (a reshape
  read), or a fixed index (the consumer reads one slice);
- the producer may compute more of ``B`` than the consumer reads (an over-computed
  producer): its points that map outside the consumer's domain get a block predicate;
- the producer may be a sum reduction (``init`` and ``B[i] = B[i] + x``) when the consumer
  is affine in the value it reads (``C = s * B + e``, bias or scale epilogues): the init
  becomes ``C = s * init + e`` and the update ``C = C + s * x``; floating-point sums are
  then associated differently, as TVM's epilogue fusion does.

Every point the consumer reads must lie in ``B`` (so the producer writes it), and the
consumer's read map must be injective (every iter var of the consumer determined by the
point read), so each producer point yields at most one consumer point.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..expr import (EQ, GE, LT, Add, And, BufferLoad, Div, FloorDiv, FloorMod, FloatImm, IntImm, Mul,
                    PrimExpr, Sub, Var, as_bool, const)
from ..function import PrimFunc
from ..functor import substitute
from ..stmt import BlockRealize, BufferStore, is_true
from ..structural import structural_equal
from .checks import is_param_buffer, reads_buffer, require_not_root, var_ids, writes_buffer
from .inline import (_LoadReplacer, _between, _drop_alloc, _loads_of, _simple_store,
                     _simplify_load_indices)
from .region import _analyzer, infer_access_regions
from .state import StmtIndex, replace_stmts


def reverse_compute_inline(func: PrimFunc, block_name: str) -> PrimFunc:
    index = StmtIndex(func)
    realize = index.realize(block_name)
    where = f"reverse_compute_inline of block {block_name!r}"
    require_not_root(func, realize, "reverse_compute_inline")
    block = realize.block
    store = _simple_store(block, where)
    if not is_true(realize.predicate):
        raise ScheduleError(f"{where}: the block has a predicate; the producer's loops would not "
                            "carry it")
    others = [r for r in index.all_realizes() if r is not realize]
    candidates = [r.buffer for r in block.reads if not is_param_buffer(func, r.buffer)
                  and sum(writes_buffer(o.block, r.buffer) for o in others) == 1]
    if len(candidates) != 1:
        raise ScheduleError(f"{where}: the block must read exactly one intermediate buffer with a single "
                            f"producer, found {[b.name for b in candidates]}")
    buf = candidates[0]
    producer = next(o for o in others if writes_buffer(o.block, buf))
    reduction = producer.block.init is not None
    pstore = _producer_store(producer, buf, reduction, where)
    if any(reads_buffer(o.block, buf) for o in others if o is not producer):
        raise ScheduleError(f"{where}: {buf.name!r} has readers other than the block")
    loads = _loads_of(store, buf)
    if not loads or any(not structural_equal(ld.indices, loads[0].indices) for ld in loads):
        raise ScheduleError(f"{where}: the block must read {buf.name!r} at one index")
    if index.order[id(producer)] > index.order[id(realize)]:
        raise ScheduleError(f"{where}: the producer runs after the block")
    touched = [b.buffer for b in block.reads + block.writes if b.buffer is not buf]
    for mid in _between(index, producer, realize):
        if any(writes_buffer(mid.block, b) or reads_buffer(mid.block, b) for b in touched):
            raise ScheduleError(f"{where}: block {mid.block.name!r} between producer and block touches "
                                "the block's other buffers")
    analyzer = _analyzer()
    for iv in block.iter_vars:
        analyzer.bind(iv.var, iv.dom)
    _require_reads_inside(loads[0].indices, buf, analyzer, where)
    # The consumer's iter vars as functions of the producer's point (its store indices).
    point = list(pstore.indices)
    inverse, fixed = _invert(block, loads[0].indices, buf, point, where)
    vmap = {v: analyzer.simplify(e) for v, e in inverse.items()}
    guard = _guard(block, vmap, fixed, point, producer, analyzer)

    if reduction:
        new_pblock = _fold_into_reduction(producer, pstore, store, buf, vmap, analyzer, where)
    else:
        value = _LoadReplacer(buf, [], pstore.value, analyzer).visit(store.value)
        new_store = BufferStore(store.buffer, _simplify_load_indices(substitute(value, vmap), analyzer),
                                [analyzer.simplify(substitute(i, vmap)) for i in store.indices])
        reads, writes = infer_access_regions(new_store, analyzer=analyzer)
        new_pblock = producer.block.replace(body=new_store, reads=tuple(reads), writes=tuple(writes))
    new_realize = producer.replace(block=new_pblock)
    if guard is not None:
        new_realize = new_realize.replace(
            predicate=guard if is_true(producer.predicate) else And(producer.predicate, guard))
    new_func = replace_stmts(func, {index.exclusive_nest_root(realize): None, producer: new_realize})
    return replace_stmts(new_func, _drop_alloc(new_func, buf))


def _producer_store(producer: BlockRealize, buf, reduction: bool, where: str) -> BufferStore:
    pblock = producer.block
    if len(pblock.writes) != 1:
        raise ScheduleError(f"{where}: producer {pblock.name!r} must write only {buf.name!r}")
    if not reduction:
        pstore = _simple_store(pblock, where)
    else:
        pstore, init = pblock.body, pblock.init
        if not (isinstance(pstore, BufferStore) and isinstance(init, BufferStore)
                and init.buffer is buf and structural_equal(init.indices, pstore.indices)):
            raise ScheduleError(f"{where}: reduction producer {pblock.name!r} must be an init and one "
                                "update store of the same element")
        if not _sum_update(pstore):
            raise ScheduleError(f"{where}: reduction producer {pblock.name!r} is not a sum "
                                f"({buf.name}[...] = {buf.name}[...] + ...); only sums take an epilogue")
    if pstore.buffer is not buf:
        raise ScheduleError(f"{where}: producer {pblock.name!r} must write only {buf.name!r}")
    spatial = {id(iv.var) for iv in pblock.iter_vars if iv.kind == "S"}
    ok = all(isinstance(i, Var) and id(i) in spatial for i in pstore.indices) and \
        len({id(i) for i in pstore.indices}) == len(pstore.indices)
    if not ok:
        raise ScheduleError(f"{where}: producer {pblock.name!r} must write {buf.name}[v0, v1, ...] with "
                            "distinct spatial iter vars")
    doms = {id(iv.var): iv.dom for iv in pblock.iter_vars}
    analyzer = _analyzer()
    for i, extent in zip(pstore.indices, buf.shape):
        dom = doms[id(i)]
        if not (analyzer.can_prove(dom.min <= 0) and analyzer.can_prove(dom.min + dom.extent >= extent)):
            raise ScheduleError(f"{where}: producer {pblock.name!r} does not write all of {buf.name!r}")
    return pstore


def _sum_update(pstore: BufferStore) -> PrimExpr | None:
    """``x`` of an update ``B[i] = B[i] + x`` (or ``x + B[i]``), else None."""
    value = pstore.value
    if not isinstance(value, Add):
        return None
    for acc, rest in ((value.a, value.b), (value.b, value.a)):
        if _is_self_load(acc, pstore) and not _loads_of(rest, pstore.buffer):
            return rest
    return None


def _is_self_load(expr, pstore: BufferStore) -> bool:
    return isinstance(expr, BufferLoad) and expr.buffer is pstore.buffer and \
        structural_equal(expr.indices, pstore.indices)


def _inside(index, extent, analyzer) -> bool:
    """0 <= index < extent; ``a // K`` and ``a % K`` by a positive K are reduced to ``a``."""
    if isinstance(index, (FloorDiv, FloorMod)) and isinstance(index.b, IntImm) and index.b.value > 0:
        if isinstance(index, FloorMod):
            return analyzer.can_prove(index.b <= extent)
        return analyzer.can_prove(GE(index.a, IntImm(0, index.dtype))) and \
            analyzer.can_prove(LT(index.a, extent * index.b))
    return analyzer.can_prove(GE(index, IntImm(0, index.dtype))) and analyzer.can_prove(LT(index, extent))


def _require_reads_inside(indices, buf, analyzer, where: str) -> None:
    for d, (i, extent) in enumerate(zip(indices, buf.shape)):
        if not _inside(i, extent, analyzer):
            raise ScheduleError(f"{where}: the read of {buf.name!r} at dimension {d} may fall outside "
                                "the buffer, where the producer writes nothing")


def _invert(block, indices, buf, dims, where: str):
    """(iter var -> expression of the point ``dims`` read, [(dim, fixed index)])."""
    ivars = {id(iv.var): iv.var for iv in block.iter_vars}
    inverse: dict = {}
    fixed = []
    pending: dict[int, dict] = {}
    for d, index in enumerate(indices):
        used = var_ids(index) & set(ivars)
        if not used:
            fixed.append((d, index))
            continue
        if len(used) != 1:
            raise ScheduleError(f"{where}: dimension {d} of the read of {buf.name!r} mixes several iter "
                                "vars; the producer's point would not determine them")
        var = ivars[used.pop()]
        offset = _offset_form(index, var)
        if offset is not None:
            _set_once(inverse, var, dims[d] - offset, where, buf)
            continue
        split = _split_form(index, var)
        if split is None:
            raise ScheduleError(f"{where}: dimension {d} of the read of {buf.name!r} is not v + c, "
                                "v // K or v % K of an iter var v")
        kind, factor = split
        pending.setdefault(id(var), {"var": var})[kind] = (d, factor)
    for entry in pending.values():
        var = entry["var"]
        if "div" not in entry or "mod" not in entry or \
                not structural_equal(entry["div"][1], entry["mod"][1]):
            raise ScheduleError(f"{where}: iter var {var.name!r} is read as v // K or v % K without "
                                "the other half, so the point read does not determine it")
        (d_div, factor), (d_mod, _) = entry["div"], entry["mod"]
        _set_once(inverse, var, dims[d_div] * factor + dims[d_mod], where, buf)
    for iv in block.iter_vars:
        if iv.var not in inverse:
            raise ScheduleError(f"{where}: the read of {buf.name!r} does not use iter var "
                                f"{iv.var.name!r}; one produced element would feed several outputs")
    return inverse, fixed


def _set_once(inverse, var, expr, where, buf):
    if var in inverse:
        raise ScheduleError(f"{where}: iter var {var.name!r} indexes several dimensions of {buf.name!r}")
    inverse[var] = expr


def _offset_form(index: PrimExpr, var: Var) -> PrimExpr | None:
    """``c`` when ``index`` is ``var + c`` / ``c + var`` / ``var - c`` / ``var``."""
    if index is var:
        return IntImm(0, var.dtype)
    if isinstance(index, Add):
        if index.a is var and var not in _vars(index.b):
            return index.b
        if index.b is var and var not in _vars(index.a):
            return index.a
    if isinstance(index, Sub) and index.a is var and var not in _vars(index.b):
        return IntImm(0, var.dtype) - index.b
    return None


def _split_form(index: PrimExpr, var: Var):
    if isinstance(index, (FloorDiv, FloorMod)) and index.a is var and var not in _vars(index.b):
        return ("div" if isinstance(index, FloorDiv) else "mod"), index.b
    return None


def _vars(expr) -> list:
    from ..functor import collect
    return collect(expr, lambda n: isinstance(n, Var))


def _guard(block, vmap, fixed, point, producer, analyzer) -> PrimExpr | None:
    """The producer points that feed a consumer point, as a predicate over the producer's
    loops (None when every point does)."""
    panalyzer = _analyzer()
    for iv in producer.block.iter_vars:
        panalyzer.bind(iv.var, iv.dom)
    conds = []
    for iv in block.iter_vars:
        e = vmap[iv.var]
        lo, hi = iv.dom.min, iv.dom.min + iv.dom.extent
        if not panalyzer.can_prove(GE(e, lo)):
            conds.append(GE(e, lo))
        if not panalyzer.can_prove(LT(e, hi)):
            conds.append(LT(e, hi))
    for d, value in fixed:
        cond = EQ(point[d], value)
        if not panalyzer.can_prove(cond):
            conds.append(cond)
    if not conds:
        return None
    guard = conds[0]
    for c in conds[1:]:
        guard = And(guard, c)
    binding = dict(zip((iv.var for iv in producer.block.iter_vars), producer.iter_values))
    return as_bool(analyzer.simplify(substitute(guard, binding)))


def _fold_into_reduction(producer, pstore, store, buf, vmap, analyzer, where):
    """A sum producer with an affine epilogue: init ``C = s * init + e``, update ``C = C + s * x``."""
    if store.buffer.dtype != buf.dtype:
        raise ScheduleError(f"{where}: the block writes {store.buffer.dtype}, the reduction sums "
                            f"{buf.dtype}; only an epilogue of the same dtype folds into the sum")
    load = next(iter(_loads_of(store.value, buf)))
    affine = _affine_in(store.value, load, buf)
    if affine is None:
        raise ScheduleError(f"{where}: the block is not s * {buf.name}[...] + e in the value it reads, "
                            "so it cannot fold into the reduction's init and update")
    scale, offset = affine
    if _loads_of(offset, store.buffer) or _loads_of(scale, store.buffer):
        raise ScheduleError(f"{where}: the block reads its own output")
    target = [analyzer.simplify(substitute(i, vmap)) for i in store.indices]

    def mapped(e):
        return _simplify_load_indices(substitute(e, vmap), analyzer)
    scale, offset = mapped(scale), mapped(offset)
    init_value = producer.block.init.value
    x = _sum_update(pstore)
    scaled_init = init_value if _is_zero(init_value) else _times(scale, init_value)
    new_init = BufferStore(store.buffer, _plus(scaled_init, offset), target)
    acc = BufferLoad(store.buffer, target)
    new_update = BufferStore(store.buffer, acc + _times(scale, x), target)
    reads, writes = infer_access_regions(new_update, new_init, analyzer=analyzer)
    return producer.block.replace(body=new_update, init=new_init, reads=tuple(reads),
                                  writes=tuple(writes))


def _times(scale, value):
    one = (isinstance(scale, IntImm) and scale.value == 1) or \
        (isinstance(scale, FloatImm) and scale.value == 1.0)
    return value if one else scale * value


def _affine_in(expr, load: BufferLoad, buf):
    """(s, e) with ``expr == s * load + e``, s and e free of ``buf``; None if not affine."""
    if isinstance(expr, BufferLoad) and expr.buffer is buf:
        return const(1, expr.dtype), const(0, expr.dtype)
    if not _loads_of(expr, buf):
        return const(0, expr.dtype), expr
    if isinstance(expr, (Add, Sub)):
        a, b = _affine_in(expr.a, load, buf), _affine_in(expr.b, load, buf)
        if a is None or b is None:
            return None
        if isinstance(expr, Add):
            return _plus(a[0], b[0]), _plus(a[1], b[1])
        return _minus(a[0], b[0]), _minus(a[1], b[1])
    if isinstance(expr, Mul):
        for inner, factor in ((expr.a, expr.b), (expr.b, expr.a)):
            if not _loads_of(factor, buf):
                part = _affine_in(inner, load, buf)
                if part is not None:
                    return _mul(part[0], factor), _mul(part[1], factor)
        return None
    if isinstance(expr, Div) and not _loads_of(expr.b, buf) and expr.dtype.startswith("float"):
        part = _affine_in(expr.a, load, buf)
        if part is not None:
            return part[0] / expr.b, part[1] / expr.b
    return None


def _is_zero(e) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == 0


def _plus(a, b):
    return b if _is_zero(a) else a if _is_zero(b) else a + b


def _minus(a, b):
    return a if _is_zero(b) else a - b


def _mul(a, factor):
    if _is_zero(a):
        return a
    if isinstance(a, (IntImm, FloatImm)) and a.value == 1:
        return factor
    return a * factor


__all__ = ["reverse_compute_inline"]
