"""Buffer primitives: cache_read, cache_write, set_scope, storage_align."""
from __future__ import annotations

from ..buffer import Buffer
from ..errors import ScheduleError
from ..expr import And, IntImm, PrimExpr, Var
from ..function import PrimFunc
from ..functor import Mutator
from ..stmt import Block, BlockRealize, BufferRegion, BufferStore, For, IterVar, Range, Stmt, seq
from ..transform.lower_blocks import ALIGN_KEY
from .checks import (leaf_realizes, reads_buffer, require_allocated,
                     require_buffer_index, require_not_root, stmt_realizes, trivial_write_dims,
                     writes_buffer)
from .region import simplify
from .state import NameSupply, StmtIndex, add_root_alloc, replace_stmts, used_names



class _BufferSwap(Mutator):
    def __init__(self, old: Buffer, new: Buffer):
        super().__init__()
        self._memo[old] = new


def swap_buffer(node, old: Buffer, new: Buffer):
    return _BufferSwap(old, new).visit(node)


def _copy_nest(names: NameSupply, name: str, src: Buffer, dst: Buffer,
               ranges: list[Range]) -> Stmt:
    """A block copying ``src`` to ``dst`` over ``ranges`` (one per dimension) with its own loops."""
    loops: list[Var] = []
    iter_vars: list[IterVar] = []
    for d, r in enumerate(ranges):
        loops.append(names.var(f"ax{d}", r.min.dtype if isinstance(r.min, PrimExpr) else "int64"))
        iter_vars.append(IterVar(names.var(f"v{d}"), Range(r.min, r.extent), "S"))
    point = [iv.var for iv in iter_vars]
    region = [Range(v, 1) for v in point]
    block = Block(name, iter_vars, [BufferRegion(src, region)], [BufferRegion(dst, region)],
                  BufferStore(dst, src.load(*point), point))
    body: Stmt = BlockRealize([simplify(r.min + lv) for r, lv in zip(ranges, loops)],
                              IntImm(True, "bool"), block)
    for lv, r in reversed(list(zip(loops, ranges))):
        body = For(lv, 0, r.extent, "serial", body)
    return body


def _cache_buffer(buf: Buffer, scope: str, names: NameSupply) -> Buffer:
    if not isinstance(scope, str) or not scope:
        raise ScheduleError(f"storage scope must be a non-empty string, got {scope!r}")
    return Buffer(names.fresh(f"{buf.name}_{scope}"), buf.shape, buf.dtype, scope=scope)


def cache_read(func: PrimFunc, block_name: str, buffer_index: int, scope: str) -> tuple[PrimFunc, str]:
    index = StmtIndex(func)
    realize = index.realize(block_name)
    where = f"cache_read of block {block_name!r}"
    require_not_root(func, realize, "cache_read")
    buf = require_buffer_index(realize.block, buffer_index, "read", "cache_read")
    if writes_buffer(realize.block, buf):
        raise ScheduleError(f"{where}: the block also writes {buf.name!r}; use cache_write")
    scope_block = index.scope_block(realize)
    siblings = _scope_statements(scope_block)
    # The copy goes right after the last statement of the scope that writes the buffer.
    last_writer = max((i for i, s in enumerate(siblings)
                       if any(writes_buffer(r.block, buf) for r in stmt_realizes(index, s))), default=-1)
    own_pos = next(i for i, s in enumerate(siblings) if s is index.top_level_stmt(realize))
    if own_pos == last_writer:
        nested = _cache_read_in_loop(func, index, realize, buf, scope, siblings[own_pos], where)
        if nested is not None:
            return nested
    if own_pos <= last_writer:
        raise ScheduleError(f"{where}: {buf.name!r} is written in the same statement as the block or "
                            "after it; the cache could not be filled before the block reads it")
    names = NameSupply(used_names(func))
    cache = _cache_buffer(buf, scope, names)
    nest = _copy_nest(names, cache.name, buf, cache, [Range(0, s) for s in buf.shape])
    mapping = {}
    for s in siblings[last_writer + 1:]:
        for r in stmt_realizes(index, s):
            if reads_buffer(r.block, buf) and not writes_buffer(r.block, buf):
                mapping[r.block] = swap_buffer(r.block, buf, cache)
    new_func = replace_stmts(func, mapping)
    new_func = _insert_in_scope(new_func, scope_block.name, last_writer + 1, nest)
    return add_root_alloc(new_func, cache), cache.name


def _cache_read_in_loop(func: PrimFunc, index: StmtIndex, realize: BlockRealize, buf: Buffer,
                       scope: str, top: Stmt, where: str):
    """TVM's placement when the one block writing ``buf`` and the reader share a loop nest: the
    copy goes into the innermost loop whose body holds the writer and, in a later statement, the
    reader, just before that statement; it copies the writer's region relaxed over the loops
    between, and every later reader of ``buf`` reads the cache (TVM's default consumers)."""
    from ..stmt import SeqStmt
    from .region import _analyzer, relax_range
    # TVM's rule: the buffer has one writer in the scope (another one, earlier, would leave
    # the cache without the parts only it writes)
    writers = [r for r in index.all_realizes() if writes_buffer(r.block, buf)]
    if len(writers) != 1 or writers[0] is realize or \
            all(writers[0] is not r for r in stmt_realizes(index, top)):
        return None
    writer = writers[0]
    node, loop = top, None
    while True:
        if isinstance(node, For):
            loop, node = node, node.body
            continue
        if not isinstance(node, SeqStmt) or loop is None:
            return None
        holds = [(i, stmt_realizes(index, s)) for i, s in enumerate(node.seq)]
        w_pos = next(i for i, rs in holds if writer in rs)
        r_pos = next(i for i, rs in holds if realize in rs)
        if w_pos == r_pos:
            node = node.seq[w_pos]
            continue
        if w_pos > r_pos:
            return None
        break
    # before the first statement after the writer's that reads the buffer (TVM's position)
    seq_node = node
    pos = next(i for i, rs in holds[w_pos + 1:]
               if any(reads_buffer(r.block, buf) for r in rs))
    # the writer's region of buf, in loop variables, relaxed over the loops inside ``loop``
    binding = {iv.var: v for iv, v in zip(writer.block.iter_vars, writer.iter_values)}
    region = next(w for w in writer.block.writes if w.buffer is buf)
    inner_loops = [lp for lp in index.loops_of(writer) if lp is not loop and
                   any(a is loop for a in index.loops_of(lp))]
    dom = {lp.loop_var: Range(lp.min, lp.extent) for lp in inner_loops}
    analyzer = _analyzer()
    from ..functor import substitute
    ranges = []
    for r in region.region:
        lo, hi = relax_range(Range(substitute(r.min, binding), r.extent), dom, analyzer)
        ranges.append((lo, analyzer.simplify(hi - lo + 1)))
    names = NameSupply(used_names(func))
    cache = _cache_buffer(buf, scope, names)
    loops, iter_vars, values = [], [], []
    for d, (lo, extent) in enumerate(ranges):
        lv = names.var(f"ax{d}", lo.dtype if isinstance(lo, PrimExpr) else "int64")
        loops.append((lv, extent))
        iv = names.var(f"v{d}", buf.shape[d].dtype if isinstance(buf.shape[d], PrimExpr) else "int64")
        iter_vars.append(IterVar(iv, Range(0, buf.shape[d]), "S"))
        values.append(lv if isinstance(lo, IntImm) and lo.value == 0 else lo + lv)
    point = [iv.var for iv in iter_vars]
    cells = [Range(v, 1) for v in point]
    block = Block(cache.name, iter_vars, [BufferRegion(buf, cells)], [BufferRegion(cache, cells)],
                  BufferStore(cache, buf.load(*point), point))
    # A guarded writer (T.where) may relax past the buffer's end: the copy is guarded too.
    for lp in index.loops_of(writer):
        if all(lp is not x for x in inner_loops):
            analyzer.bind(lp.loop_var, Range(lp.min, lp.extent))
    guard = None
    for (lv, extent), value, dim in zip(loops, values, buf.shape):
        analyzer.bind(lv, Range(0, extent))
        if not analyzer.can_prove(value < dim):
            guard = value < dim if guard is None else And(guard, value < dim)
    nest: Stmt = BlockRealize(values, IntImm(True, "bool") if guard is None else guard, block)
    for lv, extent in reversed(loops):
        nest = For(lv, 0, extent, "serial", nest)
    items = list(seq_node.seq)
    items.insert(pos, nest)
    new_func = replace_stmts(func, {seq_node: seq(*items)})
    # the readers after the copy, in program order, read the cache
    order = StmtIndex(new_func).all_realizes()
    start = next(k for k, r in enumerate(order) if r.block is block)
    mapping = {r.block: swap_buffer(r.block, buf, cache) for r in order[start + 1:]
               if reads_buffer(r.block, buf) and not writes_buffer(r.block, buf)}
    new_func = replace_stmts(new_func, mapping)
    return add_root_alloc(new_func, cache), cache.name


def cache_write(func: PrimFunc, block_name: str, buffer_index: int, scope: str) -> tuple[PrimFunc, str]:
    index = StmtIndex(func)
    realize = index.realize(block_name)
    where = f"cache_write of block {block_name!r}"
    require_not_root(func, realize, "cache_write")
    block = realize.block
    buf = require_buffer_index(block, buffer_index, "write", "cache_write")
    others = [r for r in index.all_realizes() if r is not realize]
    if any(writes_buffer(r.block, buf) for r in others):
        raise ScheduleError(f"{where}: another block also writes {buf.name!r}")
    top = index.top_level_stmt(realize)
    if any(reads_buffer(r.block, buf) for r in leaf_realizes(index, top) if r is not realize):
        raise ScheduleError(f"{where}: another block in the same loop nest reads {buf.name!r} before "
                            "the cache is written back")
    dims = trivial_write_dims(block, buf)
    if dims is None:
        raise ScheduleError(f"{where}: the block must write {buf.name}[v0, v1, ...] with distinct "
                            "spatial iter vars")
    doms = {id(iv.var): iv.dom for iv in block.iter_vars}
    names = NameSupply(used_names(func))
    cache = _cache_buffer(buf, scope, names)
    nest = _copy_nest(names, cache.name, cache, buf, [doms[id(v)] for v in dims])
    new_block = swap_buffer(block, buf, cache)
    new_func = replace_stmts(func, {block: new_block})
    scope_block = index.scope_block(realize)
    pos = next(i for i, s in enumerate(_scope_statements(scope_block)) if s is top)
    new_func = _insert_in_scope(new_func, scope_block.name, pos + 1, nest)
    return add_root_alloc(new_func, cache), cache.name


def _scope_statements(scope_block: Block) -> list[Stmt]:
    from ..stmt import SeqStmt
    body = scope_block.body
    return list(body.seq) if isinstance(body, SeqStmt) else [body]


def _insert_in_scope(func: PrimFunc, scope_name: str, pos: int, stmt: Stmt) -> PrimFunc:
    scope = StmtIndex(func).realize(scope_name).block
    items = _scope_statements(scope)
    items.insert(pos, stmt)
    return replace_stmts(func, {scope: scope.replace(body=seq(*items))})


def _written_alloc(func: PrimFunc, block_name: str, buffer_index: int, primitive: str) -> tuple:
    index = StmtIndex(func)
    realize = index.realize(block_name)
    buf = require_buffer_index(realize.block, buffer_index, "write", primitive)
    require_allocated(func, buf, block_name, primitive)
    return realize, buf


def set_scope(func: PrimFunc, block_name: str, buffer_index: int, scope: str) -> PrimFunc:
    _, buf = _written_alloc(func, block_name, buffer_index, "set_scope")
    if not isinstance(scope, str) or not scope:
        raise ScheduleError(f"set_scope of block {block_name!r}: scope must be a non-empty string")
    new_buf = buf.replace(scope=scope)
    return func.with_body(swap_buffer(func.body, buf, new_buf))


def storage_align(func: PrimFunc, block_name: str, buffer_index: int, axis: int, factor: int,
                  offset: int) -> PrimFunc:
    """Pad ``buffer``'s stride at ``axis`` to ``k * factor + offset``; applied by lowering."""
    realize, buf = _written_alloc(func, block_name, buffer_index, "storage_align")
    where = f"storage_align of block {block_name!r}"
    for name, value in (("axis", axis), ("factor", factor), ("offset", offset)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ScheduleError(f"{where}: {name} must be an int, got {value!r}")
    if not -buf.ndim <= axis < buf.ndim:
        raise ScheduleError(f"{where}: axis {axis} out of range for {buf.ndim}-d buffer {buf.name!r}")
    if factor < 1 or not 0 <= offset < factor:
        raise ScheduleError(f"{where}: need factor >= 1 and 0 <= offset < factor, got {factor}, {offset}")
    block = realize.block
    entries = [e for e in block.annotations.get(ALIGN_KEY, [])
               if not (e[0] == buffer_index and e[1] == axis % buf.ndim)]
    entries.append([buffer_index, axis % buf.ndim, factor, offset])
    annotations = dict(block.annotations)
    annotations[ALIGN_KEY] = entries
    return replace_stmts(func, {block: block.replace(annotations=annotations)})

