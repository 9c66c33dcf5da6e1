"""Graph partitioning for FuseOps: which ``call_tir`` bindings of one dataflow
block fuse together, decided by the callees' pattern kinds (paper Algorithm 1).

Rules (one group = one future kernel):

- ElementWise / Broadcast / Injective calls fuse with each other freely.
- A group holds at most one *anchor*: a Reduction or an OutputWiseFusible
  call. Calls upstream of the anchor (its prologue, e.g. the 4-bit decode
  feeding a matmul in Figure 9) may be any injective kind; calls downstream
  of it (its epilogue: bias add, gelu) must be ElementWise or Broadcast.
  So two matmuls, or a reduction after a matmul never share a group.
- Stitching (BladeDISC): a chain of Reductions, each consuming the one
  before it (directly or through other members), may share a group when every
  member is *row-wise* over the same rows (see ``row_wise_params``): each
  block touches only the row its leading iter vars name, so reductions run
  over the last axis only, and every tensor passed between members is read
  at the reader's own row. The whole chain then runs one row per task, as
  layer_norm -> scale -> softmax does.
- Opaque calls, and bindings that are not fusible ``call_tir``s, never fuse.
- A group must be convex: no path leaves it and comes back in, counting
  every other group as one node (so no two groups need each other). Paths count
  data dependencies *and* symbolic-variable dependencies on the
  ``match_cast`` that defines a variable a call mentions, so a fused call
  is never placed before such a ``match_cast``.
- A group has at most ``max_depth`` calls.
- Pair epilogues (``pair_epilogue_merges``): a block-quantized product whose only users are two
  slices of its last axis, the first and the second half, that meet in one elementwise group
  (gate and up joined by MergeParallelMatmul or the model: ``silu(gu[:, :F]) * gu[:, F:]``) takes
  that group as its epilogue, which the generated GEMV and GEMM compute per output column from
  columns ``j`` and ``j + F`` of the product.

Groups are grown greedily in binding order: each call tries to join the
groups of its producers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorir.analysis import PatternKind
from tensorir.function import PrimFunc
from tensorir.functor import collect
from tensorir.stmt import Block, BufferStore
from tensorir.structural import structural_equal
from tensorir import expr as tir

from ..expr import Call, Constant, GlobalVar, MatchCast, Tuple, Var, VarBinding
from ..struct_info import TensorStructInfo
from ..struct_info_util import symbolic_vars_of
from .annotate_op_pattern import pattern_of

_ANCHORS = (PatternKind.Reduction, PatternKind.OutputWiseFusible)


@dataclass
class BlockGraph:
    """Dependencies between the bindings of one block (by index)."""
    bindings: list
    kinds: list                      # PatternKind of fusible call_tirs, else None
    producers: list = field(default_factory=list)   # index -> sorted producer indices
    callees: list = field(default_factory=list)     # index -> PrimFunc of fusible calls, else None
    users: list = field(default_factory=list)       # index -> sorted user indices

    def is_fusible(self, index: int) -> bool:
        return self.kinds[index] is not None


def call_tir_callee(value, mod) -> tuple[str, PrimFunc] | None:
    """``(name, prim_func)`` when ``value`` is ``R.call_tir`` of a prim_func of ``mod``."""
    if not (isinstance(value, Call) and getattr(value.op, "name", None) == "relax.call_tir"):
        return None
    callee = value.args[0] if value.args else None
    if not isinstance(callee, GlobalVar) or callee.name_hint not in mod:
        return None
    func = mod[callee.name_hint]
    return (callee.name_hint, func) if isinstance(func, PrimFunc) else None


def _has_full_tensor_info(sinfo) -> bool:
    return isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None and sinfo.dtype is not None


def fusible_kind(binding, mod) -> PatternKind | None:
    """The pattern kind of a call_tir binding that may join a group, else None."""
    if not isinstance(binding, VarBinding):
        return None
    found = call_tir_callee(binding.value, mod)
    if found is None:
        return None
    call = binding.value
    if len(call.args) < 2 or not isinstance(call.args[1], Tuple) or len(call.sinfo_args) != 1:
        return None
    if not _has_full_tensor_info(call.sinfo_args[0]):
        return None  # tuple outputs stay unfused
    for arg in call.args[1].fields:
        if not isinstance(arg, (Var, Constant)) or not _has_full_tensor_info(arg.struct_info):
            return None  # FuseTIR needs a shape and a dtype for every buffer
    kind = pattern_of(found[1])
    return None if kind == PatternKind.Opaque else kind


def _same_dims(a, b) -> bool:
    return len(a) == len(b) and all(structural_equal(x, y, map_free_vars=False) for x, y in zip(a, b))


def _mentions(expr, var_ids: set[int]) -> bool:
    return bool(collect(expr, lambda n: isinstance(n, tir.Var) and id(n) in var_ids))


def _row_local(block: Block, rank: int, rows, row_shaped) -> bool:
    """Every access of ``block`` to a buffer whose leading dims are ``rows`` is at the
    block's own row (its first ``rank`` iter vars, spatial); no other index names them."""
    if len(block.iter_vars) < rank or any(iv.kind != "S" for iv in block.iter_vars[:rank]) \
            or block.match_buffers:
        return False
    row_vars = [iv.var for iv in block.iter_vars[:rank]]
    row_ids = {id(v) for v in row_vars}
    parts = [block.body] + ([block.init] if block.init is not None else [])
    for part in parts:
        if collect(part, lambda n: isinstance(n, Block)):
            return False  # nested blocks: not analysed, so never stitched
        for access in collect(part, lambda n: isinstance(n, (tir.BufferLoad, BufferStore))):
            indices = list(access.indices)
            if row_shaped(access.buffer):
                if len(indices) < rank or any(i is not v for i, v in zip(indices, row_vars)):
                    return False
                indices = indices[rank:]
            if any(_mentions(i, row_ids) for i in indices):
                return False
    return True


def row_wise_params(func: PrimFunc) -> list[bool] | None:
    """For a prim_func that computes its (single, last) output one row at a time — rows
    being all but the output's last axis — which buffer params hold whole rows (their
    leading dims are the output's rows; each is read only at the row being computed).
    None when some block reads or writes across rows, e.g. reduces over a row axis."""
    buffers = func.buffer_params
    if not buffers or buffers[-1].ndim < 2:
        return None
    rank = buffers[-1].ndim - 1
    rows = buffers[-1].shape[:rank]

    def row_shaped(buffer) -> bool:
        return buffer.ndim >= rank and _same_dims(buffer.shape[:rank], rows)

    root = func.root_block
    blocks = [b for b in collect(func.body, lambda n: isinstance(n, Block)) if b is not root]
    if not blocks or not all(_row_local(b, rank, rows, row_shaped) for b in blocks):
        return None
    return [row_shaped(b) for b in buffers[:-1]]


def build_block_graph(bindings, mod) -> BlockGraph:
    defined_at: dict[Var, int] = {}
    symbol_defined_at: dict[tir.Var, int] = {}
    graph = BlockGraph(list(bindings), [fusible_kind(b, mod) for b in bindings])
    for index, binding in enumerate(bindings):
        deps = set()
        used = collect(binding.value, lambda n: isinstance(n, (Var, tir.Var)))
        if isinstance(binding, MatchCast):
            used += symbolic_vars_of(binding.struct_info)
        for node in used:
            if isinstance(node, Var) and node in defined_at:
                deps.add(defined_at[node])
            elif isinstance(node, tir.Var) and node in symbol_defined_at:
                deps.add(symbol_defined_at[node])
        graph.producers.append(sorted(deps))
        found = call_tir_callee(binding.value, mod) if graph.kinds[index] is not None else None
        graph.callees.append(found[1] if found else None)
        graph.users.append([])
        for dep in deps:
            graph.users[dep].append(index)
        defined_at[binding.var] = index
        if isinstance(binding, MatchCast):
            for var in symbolic_vars_of(binding.struct_info):
                symbol_defined_at.setdefault(var, index)
    return graph


class Partitioner:
    """Greedy grouping of one block's fusible calls (see the module docstring)."""

    def __init__(self, graph: BlockGraph, max_depth: int):
        self.graph = graph
        self.max_depth = max_depth
        self.group_of: dict[int, frozenset] = {}
        self._rows: dict[int, tuple | None] = {}
        # the slices of quantized products' halves: the group combining them takes no injective
        # call or anchor (the down projection's rounding and product), to become the product's
        # pair epilogue
        self._pair_slices = {u for i in range(len(graph.bindings)) for u in pair_slices(graph, i)}

    def run(self) -> list[list[int]]:
        for index in range(len(self.graph.bindings)):
            if self.graph.is_fusible(index):
                self._place(index)
        self._merge_pair_epilogues()
        groups = {id(g): g for g in self.group_of.values()}.values()
        return sorted((sorted(g) for g in groups if len(g) > 1), key=lambda g: g[-1])

    def _place(self, index: int) -> None:
        members = frozenset([index])
        candidates = []
        # only elementwise / broadcast calls join a pair epilogue (what the GEMV's epilogue takes)
        kept_out = self.graph.kinds[index] > PatternKind.Broadcast and index not in self._pair_slices
        for producer in reversed(self.graph.producers[index]):
            group = self.group_of.get(producer)
            if group is not None and group not in candidates and not (kept_out and group & self._pair_slices):
                candidates.append(group)
        for group in candidates:
            merged = members | group
            if self._legal(merged):
                members = merged
        for member in members:
            self.group_of[member] = members

    def _merge_pair_epilogues(self) -> None:
        """Joins each quantized product's group with the group combining its two halves
        (``pair_epilogue_group``), when the union stays within ``max_depth`` and convex."""
        for index in range(len(self.graph.bindings)):
            product = self.group_of.get(index)
            if product is None or max(product) != index:
                continue
            epilogue = pair_epilogue_group(self.graph, index, product, self.group_of)
            if epilogue is None:
                continue
            merged = product | epilogue
            if len(merged) <= self.max_depth and self._convex(merged):
                for member in merged:
                    self.group_of[member] = merged

    def _legal(self, members: frozenset) -> bool:
        if len(members) > self.max_depth:
            return False
        kinds = self.graph.kinds
        anchors = sorted(m for m in members if kinds[m] in _ANCHORS)
        if len(anchors) > 1 and not self._stitchable(members, anchors):
            return False
        if anchors and any(kinds[m] > PatternKind.Broadcast
                           for m in self._reachable_inside(anchors[0], members) if m not in anchors):
            return False  # an anchor's epilogue is elementwise / broadcast only
        return self._convex(members)

    def _row_info(self, index: int) -> tuple | None:
        """(row dims of the call's output, per-argument "holds whole rows" flags), when the
        callee is row-wise (see ``row_wise_params``), else None. Cached."""
        if index not in self._rows:
            info = None
            func = self.graph.callees[index]
            flags = row_wise_params(func) if func is not None else None
            call = self.graph.bindings[index].value
            if flags is not None and len(flags) == len(call.args[1].fields):
                shape = call.sinfo_args[0].shape
                info = (tuple(shape[:-1]), flags)
            self._rows[index] = info
        return self._rows[index]

    def _stitchable(self, members: frozenset, anchors: list[int]) -> bool:
        """Several reductions may share a group when every member is row-wise over the same
        rows and every tensor made inside the group is read whole-row-wise (no cross-row read)."""
        if any(self.graph.kinds[a] != PatternKind.Reduction for a in anchors):
            return False
        if any(later not in self._reachable_inside(earlier, members)
               for earlier, later in zip(anchors, anchors[1:])):
            return False  # only a chain: each reduction consumes the one before it
        infos = {m: self._row_info(m) for m in members}
        if any(info is None for info in infos.values()):
            return False
        rows = infos[anchors[0]][0]
        if not all(_same_dims(info[0], rows) for info in infos.values()):
            return False
        produced = {id(self.graph.bindings[m].var) for m in members}
        for m in members:
            for arg, whole_rows in zip(self.graph.bindings[m].value.args[1].fields, infos[m][1]):
                if id(arg) in produced and not whole_rows:
                    return False
        return True

    def _reachable_inside(self, start: int, members: frozenset) -> set[int]:
        seen, stack = set(), [start]
        while stack:
            for user in self.graph.users[stack.pop()]:
                if user in members and user not in seen:
                    seen.add(user)
                    stack.append(user)
        return seen

    def _convex(self, members: frozenset) -> bool:
        """No path member -> outside binding(s) -> member. Another group counts as one node (it
        becomes one kernel): reaching one of its members reaches all of their users, so two
        groups that each need the other's output are refused."""
        last = max(members)
        stack = [u for m in members for u in self.graph.users[m] if u not in members and u < last]
        seen = set(stack)
        while stack:
            node = stack.pop()
            for peer in self.group_of.get(node, (node,)):
                for user in self.graph.users[peer]:
                    if user in members:
                        return False
                    if user < last and user not in seen:
                        seen.add(user)
                        stack.append(user)
        return True


def _reads_codes(func: PrimFunc | None) -> bool:
    return func is not None and any(b.dtype in ("uint8", "int8") for b in func.buffer_params[:-1])


def column_window(func: PrimFunc | None) -> tuple[int, int] | None:
    """``(offset, width)`` when ``func`` is one block copying ``out[..., j] = in[..., j + offset]``
    (a strided slice of the last axis with step 1, legalized), else None."""
    if func is None or len(func.buffer_params) != 2:
        return None
    source, out = func.buffer_params
    blocks = [b for b in collect(func.body, lambda n: isinstance(n, Block)) if b is not func.root_block]
    if len(blocks) != 1 or source.ndim != out.ndim or out.ndim < 1:
        return None
    block = blocks[0]
    store = block.body
    spatial = [iv.var for iv in block.iter_vars]
    if not isinstance(store, BufferStore) or store.buffer is not out or block.init is not None or \
            any(iv.kind != "S" for iv in block.iter_vars) or len(spatial) != out.ndim or \
            any(i is not v for i, v in zip(store.indices, spatial)) or \
            not isinstance(store.value, tir.BufferLoad) or store.value.buffer is not source:
        return None
    *lead, last = store.value.indices
    width = out.shape[-1]
    if not isinstance(width, tir.IntImm) or not _same_dims(source.shape[:-1], out.shape[:-1]) or \
            any(i is not v for i, v in zip(lead, spatial[:-1])):
        return None
    from tensorir.arith.evaluate import EvaluationError, evaluate
    try:
        at = [evaluate(last, {spatial[-1]: j}) for j in (0, 1, width.value - 1)]
    except EvaluationError:
        return None
    offset = at[0]
    if at != [offset, offset + 1, offset + width.value - 1]:
        return None
    return int(offset), int(width.value)


def pair_slices(graph: BlockGraph, index: int) -> list[int]:
    """The two users of binding ``index`` when it is a product of a block-quantized weight (an
    OutputWiseFusible call fed by a call reading 8-bit codes) of ``2F`` columns whose only users
    are the slices ``[0, F)`` and ``[F, 2F)`` of its last axis; else none."""
    kinds = graph.kinds
    if kinds[index] != PatternKind.OutputWiseFusible or \
            not any(_reads_codes(graph.callees[p]) for p in graph.producers[index]):
        return []
    users = graph.users[index]
    out_sinfo = graph.bindings[index].var.struct_info
    if len(users) != 2 or not isinstance(out_sinfo, TensorStructInfo) or not out_sinfo.shape:
        return []
    cols = out_sinfo.shape[-1]
    if not isinstance(cols, tir.IntImm) or cols.value % 2:
        return []
    half = cols.value // 2
    windows = sorted(column_window(graph.callees[u]) or (-1, -1) for u in users)
    return list(users) if windows == [(0, half), (half, half)] else []


def pair_epilogue_group(graph: BlockGraph, index: int, product: frozenset, group_of: dict) -> frozenset | None:
    """The group that combines the two halves of the block-quantized product computed by binding
    ``index`` (the last member of ``product``, its anchor, with no epilogue of its own), or None.

    Its only users must be the two slices ``pair_slices`` finds, in one group with no anchor
    whose other members are elementwise or broadcast (the generated GEMV and GEMM compute such a
    chain per output column from the product's two halves; anything else keeps its own kernel)."""
    kinds = graph.kinds
    users = pair_slices(graph, index)
    if not users:
        return None
    epilogue = group_of.get(users[0])
    if epilogue is None or epilogue is product or group_of.get(users[1]) is not epilogue:
        return None
    if any(kinds[m] in _ANCHORS or (kinds[m] > PatternKind.Broadcast and m not in users) for m in epilogue):
        return None
    return epilogue


def partition_block(bindings, mod, max_depth: int) -> list[list[int]]:
    """Groups (sorted binding indices, at least two calls each) to fuse in one block."""
    return Partitioner(build_block_graph(bindings, mod), max_depth).run()
