"""Rule for a matmul whose weight is decoded from 8-bit integer codes on the fly
(a ``dequantize`` prologue fused in front of ``matmul``; formats and layout:
``relaxscript.quantization.formats``).

When it applies: the function's single reduction block has ``[S...]SSR`` loops
and reads, once spatial producers are inlined, a uint8/int8 parameter buffer
(the codes). Otherwise it raises ``ScheduleError`` and the next rule runs (the
plain gemm rule, which keeps operand producers materialized: right for a
transpose, but for a quantized weight that would be the float32 copy this
design exists to avoid).

What it does, for one token (decode): every spatial producer is inlined, so
each weight value is computed from its code and block scale where the product
needs it; each parallel task owns a run of output columns (vector lanes, kept
adjacent by the layout) and streams down the weight's rows, so the codes are
read once, contiguously. For several tokens (prefill): each task owns
``TILE_J`` columns and, for every ``TILE_K`` rows, decodes a float32 tile into
a buffer of its own (``weight_tile.py``) that the products of all tokens then
read, so decoding costs once per weight and call, not once per token. In
neither case is the float32 weight stored.
"""
from __future__ import annotations

import math

from .. import expr as E
from ..arith.evaluate import EvaluationError, evaluate
from ..errors import ScheduleError
from ..functor import collect, substitute
from ..schedule import Schedule
from ..schedule.state import StmtIndex
from ..stmt import Block, BufferStore
from .common import (attempt, const_int, inline_spatial_intermediates, is_reduction_block,
                     leaf_block_names, loop_extents, loop_kinds, vector_chunk)
from .gemm import TILE_I, _operand_buffers
from .weight_tile import private_weight_tile

CODE_DTYPES = ("uint8", "int8")
# the scales' (and mins') dtypes the generated kernels read: float16 is GGUF's own, widened as loaded
SCALE_DTYPES = ("float32", "float16")
# attribute naming a generated micro-kernel the C emitter puts in place of the loop nest
# (backends/c/quantized_gemv.py; the loop nest stays the meaning, for the interpreter)
QUANTIZED_GEMV_ATTR = "c.quantized_gemv"
GEMV_FORMATS = ("q4_0", "q4_1", "q8_0")
# the block ``R.fake_quantize`` legalizes to is named this plus the activation format
FAKE_QUANTIZE_BLOCK = "T_fake_quantize_"
ACTIVATION_FORMATS = ("q8_0",)
TILE_J = 64        # weight columns per tile (vector lanes)
# most elements of a one-token product's input that ``flat_copy_source`` checks one by one
FLAT_CHECK_LIMIT = 1 << 15
TILE_K = 64        # weight rows per tile: TILE_K x TILE_J float32 = 16 KB, a stack array


def _reads_codes(sch: Schedule, name: str) -> bool:
    params = {id(b) for b in sch.func.buffer_params}
    block = StmtIndex(sch.func).realize(name).block
    return any(id(r.buffer) in params and r.buffer.dtype in CODE_DTYPES for r in block.reads)


def _product_block(sch: Schedule) -> str:
    reductions = [n for n in leaf_block_names(sch) if is_reduction_block(sch, n)]
    if len(reductions) != 1:
        raise ScheduleError(f"quantized gemm rule: expected one reduction block, found {reductions}")
    name = reductions[0]
    kinds = "".join(loop_kinds(sch, name, sch.get_loops(sch.get_block(name))))
    if not kinds.endswith("SSR") or kinds.count("R") != 1:
        raise ScheduleError(f"quantized gemm rule: block {name!r} loops are {kinds!r}, expected [S...]SSR")
    return name


def schedule_quantized_gemm(sch: Schedule):
    if not any(_reads_codes(sch, n) for n in leaf_block_names(sch)):
        raise ScheduleError("quantized gemm rule: no block reads 8-bit integer codes")
    name = _product_block(sch)
    rows = loop_extents(sch, sch.get_loops(sch.get_block(name)))[-3]
    # the loop nest stays the meaning; the C emitter puts the generated GEMV or GEMM
    # (backends/c/quantized_gemv.py, quantized_gemm.py) in its place where the function matches
    from .quantized_gemm import QUANTIZED_GEMM_ATTR, quantized_gemm_spec
    if const_int(rows) == 1:
        spec = quantized_gemv_spec(sch)
        _schedule_single_row(sch)
        return (lambda func: func.with_attr(QUANTIZED_GEMV_ATTR, spec)) if spec else None
    gemm = quantized_gemm_spec(sch)
    tiles = _schedule_weight_tiles(sch, name)
    return (lambda func: tiles(func).with_attr(QUANTIZED_GEMM_ATTR, gemm)) if gemm else tiles


def _float_param_loads(expr, params) -> list:
    return [load.buffer for load in collect(expr, lambda n: isinstance(n, E.BufferLoad))
            if id(load.buffer) in params and load.buffer.dtype in SCALE_DTYPES]


def quantized_gemv_spec(sch: Schedule) -> dict | None:
    """Roles and shape for the generated gemv when the function is exactly
    ``y(1.., N) = x(1.., K) @ dequantize(codes, scale[, min])`` with float32 ``x`` and ``y`` and
    float32 or float16 scales (``scale_dtype`` in the spec when float16), else None (then the loop
    nest is compiled as scheduled)."""
    names = leaf_block_names(sch)
    index = StmtIndex(sch.func)
    blocks = [index.realize(n).block for n in names]
    reductions = [i for i, b in enumerate(blocks) if any(iv.kind == "R" for iv in b.iter_vars)]
    if len(reductions) != 1:
        return None
    product, epilogues = blocks[reductions[0]], blocks[reductions[0] + 1:]
    params = {id(b): i for i, b in enumerate(sch.func.buffer_params)}
    decoders = [b for b in blocks[:reductions[0]] if "_".join(b.name.rsplit("_", 2)[-2:]) in GEMV_FORMATS
                and any(id(r.buffer) in params and r.buffer.dtype in CODE_DTYPES for r in b.reads)]
    if len(decoders) != 1 or not isinstance(decoders[0].body, BufferStore):
        return None
    decoder = decoders[0]
    prologue = [b for b in blocks[:reductions[0]] if b is not decoder]
    operands = decoded_product(decoder, product, params)
    if operands is None:
        return None
    fmt, codes, scales, mins, weight, x, product_out = operands
    rounding = activation_rounding(x, prologue)
    if rounding is not None:       # x = fake_quantize(source): the kernel rounds it itself
        prologue = [b for b in prologue if b is not rounding]
        x = rounding.reads[0].buffer
    if prologue or id(x) not in params:
        x = flat_copy_source(x, prologue, params)
        if x is None:
            return None
    epilogue = column_epilogue(epilogues, product_out, params) if epilogues else None
    if epilogue is None and (epilogues or id(product_out) not in params):
        return None
    y = epilogue["output"] if epilogue else product_out
    if weight.ndim != 2 or x.dtype != "float32" or y.dtype != "float32":
        return None
    rows, cols = (const_int(d) for d in weight.shape)
    lead = [const_int(d) for d in y.shape[:-1]]
    pair = bool(epilogue and epilogue.get("pair"))
    if rows is None or cols is None or rows % 32 or any(d != 1 for d in lead) \
            or _elements(x.shape) != rows or const_int(y.shape[-1]) * (1 + pair) != cols:
        return None
    roles = {"codes": params[id(codes[0])], "scale": params[id(scales[0])], "x": params[id(x)],
             "y": params[id(y)]}
    if mins:
        roles["min"] = params[id(mins[0])]
    spec = {"format": fmt, "rows": rows, "cols": cols, "roles": roles, **scale_dtype_entry(scales)}
    if rounding is not None:
        spec["activations"] = rounding.name[len(FAKE_QUANTIZE_BLOCK):]
    if pair:
        spec["pair"] = True    # y(1, N) from the product's halves: columns c and c + N
    # by name: an attribute holds printable values; the emitter rebuilds the chain from the
    # scheduled function's blocks (``function_epilogue``), whose bodies scheduling keeps
    names = {"blocks": [b.name for b in epilogues], "product": product.name}
    if epilogue and len({product.name, *names["blocks"]}) != len(epilogues) + 1:
        return None   # names that do not find the blocks again
    return spec | ({"epilogue": names} if epilogue else {})


def scale_dtype_entry(scales) -> dict:
    """The spec's ``scale_dtype`` entry: present only for float16 scales (float32 is the default)."""
    return {"scale_dtype": scales[0].dtype} if scales[0].dtype != "float32" else {}


def activation_rounding(x, blocks):
    """The block computing ``x`` as ``R.fake_quantize`` of one other buffer (legalized into a
    block named ``T_fake_quantize_<format>``: one spatial store at its own iter vars, reading
    only that buffer, shaped like ``x``), or None."""
    for block in blocks:
        store = block.body
        if not block.name.startswith(FAKE_QUANTIZE_BLOCK) or not isinstance(store, BufferStore) or \
                store.buffer is not x or block.init is not None or len(block.reads) != 1 or \
                any(iv.kind != "S" for iv in block.iter_vars) or \
                list(store.indices) != [iv.var for iv in block.iter_vars]:
            continue
        source = block.reads[0].buffer
        if block.name[len(FAKE_QUANTIZE_BLOCK):] in ACTIVATION_FORMATS and source.dtype == "float32" and \
                len(source.shape) == len(x.shape) and _elements(source.shape) == _elements(x.shape):
            return block
    return None


def _elements(shape) -> int | None:
    dims = [const_int(d) for d in shape]
    return None if any(d is None for d in dims) else math.prod(dims)


def flat_copy_source(x, blocks, params: dict):
    """The parameter whose elements, in memory order, are ``x``'s when ``blocks`` (the
    function's blocks before the product, but the weight's decoder) are exactly a chain of
    copies from it to ``x`` that keeps the memory order (reshapes, permutes of unit axes:
    the attention output regrouped from heads to one row); else None.

    Checked by evaluating the chain's indices for every element (``x`` has as many as the
    weight has rows, a few thousand): regrouping a row is simple to recognize this way and
    hard to prove symbolically (``(k // 64 % 3) * 64 + k // 192 * 192 + k % 64 == k``)."""
    size = _elements(x.shape)
    if size is None or size > FLAT_CHECK_LIMIT or x.dtype != "float32":
        return None
    writers = {id(b.writes[0].buffer): b for b in blocks if len(b.writes) == 1}
    flat = E.Var("rs_flat", "int64")
    indices, buffer, chain = _unflatten(flat, x.shape), x, []
    while id(buffer) not in params:
        block = writers.get(id(buffer))
        store = block.body if block is not None else None
        if not isinstance(store, BufferStore) or block.init is not None or \
                any(b is block for b in chain) or not isinstance(store.value, E.BufferLoad) or \
                len(store.indices) != len(block.iter_vars) or \
                any(i is not iv.var for i, iv in zip(store.indices, block.iter_vars)):
            return None
        chain.append(block)
        indices = substitute(list(store.value.indices), dict(zip(store.indices, indices)))
        buffer = store.value.buffer
    if len(chain) != len(blocks) or buffer.dtype != "float32" or _elements(buffer.shape) != size:
        return None
    strides = [math.prod(const_int(d) for d in buffer.shape[i + 1:]) for i in range(len(buffer.shape))]
    offset = sum((index * stride for index, stride in zip(indices, strides)), E.IntImm(0, "int64"))
    try:
        if any(evaluate(offset, {flat: k}) != k for k in range(size)):
            return None
    except EvaluationError:
        return None
    return buffer


def _unflatten(flat, shape) -> list:
    dims = [const_int(d) for d in shape]
    return [(flat // math.prod(dims[i + 1:])) % d if d != 1 else E.IntImm(0, "int64")
            for i, d in enumerate(dims)]



def decoded_product(decoder, product, params: dict):
    """``(format, codes, scales, mins, weight, x, product_out)`` of a dequantize block (its name
    ends in the format) feeding ``product`` = ``x @ weight``, each of codes/scales/mins a list of
    parameter buffers; None when the decoder or the product has another form."""
    fmt = "_".join(decoder.name.rsplit("_", 2)[-2:])
    if fmt not in GEMV_FORMATS or not isinstance(decoder.body, BufferStore):
        return None
    codes = [r.buffer for r in decoder.reads if id(r.buffer) in params and r.buffer.dtype in CODE_DTYPES]
    value = decoder.body.value
    if fmt == "q4_1":
        if not isinstance(value, E.Add):
            return None
        scales, mins = _float_param_loads(value.a, params), _float_param_loads(value.b, params)
    else:
        scales, mins = _float_param_loads(value, params), []
    if len(codes) != 1 or len(scales) != 1 or len(mins) != (fmt == "q4_1") or \
            any(m.dtype != scales[0].dtype for m in mins):
        return None
    weight = decoder.writes[0].buffer
    outputs = [w.buffer for w in product.writes]
    others = [r.buffer for r in product.reads if r.buffer is not weight and r.buffer not in outputs]
    if len(others) != 1 or len(outputs) != 1:
        return None
    return fmt, codes, scales, mins, weight, others[0], outputs[0]

def function_epilogue(func, names: dict) -> dict:
    """The epilogue chain (``column_epilogue``) of a marked function, from the names of the
    product's and the epilogue's blocks its ``c.quantized_gemv`` attribute records."""
    blocks = {b.name: b for b in collect(func.body, lambda n: isinstance(n, Block))}
    # scheduling may have inlined stages into later ones; the chain still ends in the last
    missing = [n for n in names["blocks"][-1:] if n not in blocks]
    chain = [blocks[n] for n in names["blocks"] if n in blocks]
    products = [w.buffer for w in blocks[names["product"]].writes] if names["product"] in blocks else []
    params = {id(b): i for i, b in enumerate(func.buffer_params)}
    epilogue = column_epilogue(chain, products[0], params) if products and not missing else None
    if epilogue is None:
        raise ScheduleError(f"{func.name!r}: the quantized gemv's epilogue {names} is not in the function")
    return epilogue


def column_epilogue(blocks, product_out, params: dict) -> dict | None:
    """The blocks after the product as per-column scalar steps, or None when they are not
    an injective chain over the output row.

    Each block must store one value at its own spatial iter vars into a ``(1.., N)`` buffer;
    with the leading vars at 0 and the last one the output column ``column``, a load of
    the product or of an earlier step's buffer at ``(0.., column)`` becomes that step's
    scalar (``Var``), and any other load must read a parameter (bias, gate, residual),
    indexed however the block indexes it. The last step writes a parameter: ``output``.

    A pair epilogue (``pair`` True in the result): the product has ``2 N`` columns, the steps
    write ``N``, and the product is read at ``(0.., column)`` (``product``, its first half) and
    at ``(0.., column + N)`` (``product_hi``): gate and up merged into one weight and combined
    per column (``silu(gate) * up``; ``relaxscript.transform.fuse_partition`` fuses them)."""
    column, product = E.Var("rs_col", "int64"), E.Var("rs_prod", "float32")
    cols = const_int(product_out.shape[-1])

    def at_column(indices) -> bool:   # (0.., column); a one-column row may index it by 0
        *lead, last = indices
        return all(const_int(i) == 0 for i in lead) and \
            (last is column or (cols == 1 and const_int(last) == 0))

    def position(spatial) -> dict:
        return {**{v: E.IntImm(0, v.dtype) for v in spatial[:-1]}, spatial[-1]: column}

    def fits_width(width: int):
        def fits(spatial, out) -> bool:
            return bool(spatial) and const_int(out.shape[-1]) == width and \
                all(const_int(d) == 1 for d in out.shape[:-1])
        return fits

    chain = whole_or_pair_steps(blocks, product_out, product, params, cols, column, fits_width, position,
                                at_column)
    return None if chain is None else {"column": column, "product": product, **chain}


def whole_or_pair_steps(blocks, product_out, product, params: dict, cols: int, column, fits_width, position,
                        at_product) -> dict | None:
    """``elementwise_steps`` over the whole product's columns, else (an even column count) as a pair
    epilogue over its two halves (``product_hi``, ``pair``), or None. ``fits_width(w)``: the test
    of a step's output for ``w`` columns."""
    for width in (cols, cols // 2 if cols and cols % 2 == 0 else None):
        if width is None:
            continue
        # a pair epilogue: the product's second half read at column + width
        pair = width != cols
        hi = (E.Var("rs_prod_hi", "float32"), second_half(at_product, column, width),
              second_half(at_product, column, width, 0)) if pair else None
        chain = elementwise_steps(blocks, product_out, product, params, fits_width(width), position, at_product, hi)
        if chain is not None:
            return {"product_hi": hi[0], "pair": True, **chain} if pair else chain
    return None


def second_half(at_position, column, half: int, offset: int | None = None):
    """A test of a product load's indices: the position's, but ``offset`` (default ``half``)
    columns further: the column index is ``column + offset`` at columns ``0, 1, half - 1``
    (checked by evaluation: a legalized slice reads ``start + column * 1``)."""
    shift = half if offset is None else offset
    from ..arith.evaluate import EvaluationError, evaluate

    def test(indices) -> bool:
        *lead, last = indices
        if not at_position([*lead, column]):
            return False
        try:
            return all(evaluate(last, {column: j}) == j + shift for j in (0, 1, half - 1))
        except EvaluationError:
            return False
    return test


def elementwise_steps(blocks, product_out, product, params: dict, fits, position, at_position,
                      hi=None) -> dict | None:
    """The shared walk of ``column_epilogue`` and the GEMM's ``element_epilogue``: each block
    as one scalar step at an output position, or None when the chain is not elementwise.

    ``fits(spatial, out)`` accepts a block's iter vars and output buffer, ``position(spatial)``
    maps its iter vars onto the position's vars, and ``at_position(indices)`` says whether
    indices (after that mapping) name the position itself. ``hi``: ``(var, test, first)`` for a pair
    epilogue, ``test(indices)`` saying a product load reads the second half (then ``var``), and
    ``first(indices)`` the first half at the position (a slice's ``0 + column``). Returns ``steps``, ``inputs``
    (parameter index -> buffer read) and ``output`` (the last step's buffer, a parameter)."""
    scalars = {id(product_out): product}
    steps, inputs, out = [], {}, None
    for number, block in enumerate(blocks):
        store = block.body
        if not isinstance(store, BufferStore) or block.init is not None or \
                any(iv.kind != "S" for iv in block.iter_vars) or len(block.writes) != 1:
            return None
        spatial = [iv.var for iv in block.iter_vars]
        out = store.buffer
        if out.dtype != "float32" or not fits(spatial, out):
            return None
        to_position = position(spatial)
        if not at_position(substitute(list(store.indices), to_position)):
            return None
        bound = substitute(store.value, to_position)
        replaced = {}
        for load in collect(bound, lambda n: isinstance(n, E.BufferLoad)):
            if id(load.buffer) in scalars:
                if at_position(load.indices):
                    replaced[load] = scalars[id(load.buffer)]
                elif hi is not None and load.buffer is product_out and hi[1](list(load.indices)):
                    replaced[load] = hi[0]
                elif hi is not None and load.buffer is product_out and hi[2](list(load.indices)):
                    replaced[load] = product     # the first half, read through a slice
                else:
                    return None   # reads the product at another position: not elementwise
            elif id(load.buffer) in params:
                inputs[params[id(load.buffer)]] = load.buffer
            else:
                return None
        value = E.Var(f"rs_ep{number}", "float32")
        steps.append((value, substitute(bound, replaced)))
        scalars[id(out)] = value
    if out is None or id(out) not in params:
        return None
    return {"steps": steps, "inputs": inputs, "output": out}


def single_row_tile(columns: int) -> int:
    """Columns per task of a one-token product: about 16 tasks, 32 to 2048 columns each.
    Each step of the reduction reads one run of ``tile`` codes from a row of the weight;
    runs much shorter than a page on a wide weight (the 49152-column LM head) cost a
    TLB miss per run (measured there: 64-column runs 2.7x slower than 512, 2048 and
    whole rows 1.4x faster than 512), while too few tasks leave cores idle."""
    return max(32, min(2048, columns // 16 // 16 * 16))


def _schedule_single_row(sch: Schedule) -> None:
    """One token (decode): the codes are read once, straight into the product; each task
    owns a run of columns and streams down the weight's rows."""
    inline_spatial_intermediates(sch)
    name = _product_block(sch)
    if not _reads_codes(sch, name):
        raise ScheduleError("quantized gemm rule: the codes are not read by the product block")
    block = sch.get_block(name)
    *batch, i, j, k = sch.get_loops(block)
    extent_j = const_int(loop_extents(sch, [j])[0])
    if extent_j is None:
        raise ScheduleError("quantized gemm rule: the weight's columns must be a constant")
    j_outer, j_inner = sch.split(j, [None, min(extent_j, single_row_tile(extent_j))])
    sch.reorder(*batch, i, j_outer, k, j_inner)
    names = leaf_block_names(sch)
    for epilogue in names[names.index(name) + 1:]:
        attempt(sch.reverse_compute_at, sch.get_block(epilogue), j_outer)
    sch.decompose_reduction(block, k)
    sch.vectorize(j_inner)
    sch.parallel(sch.fuse(*batch, i, j_outer))
    for epilogue in names[names.index(name) + 1:]:
        loops = sch.get_loops(sch.get_block(epilogue))
        if len(loops) > 1:
            attempt(sch.vectorize, loops[-1])


def _schedule_weight_tiles(sch: Schedule, name: str):
    """Several tokens (prefill): each task owns TILE_J weight columns; for each TILE_K rows
    it decodes a float32 tile into its private buffer, then every token's rows use it."""
    weight_buffers = _operand_buffers(sch)
    inline_spatial_intermediates(sch, keep_buffers=weight_buffers)
    index = StmtIndex(sch.func)
    producers = [n for n in leaf_block_names(sch) if n != name and not is_reduction_block(sch, n)
                 and any(id(w.buffer) in weight_buffers for w in index.realize(n).block.writes)]
    decoders = [n for n in producers if _reads_codes(sch, n)]
    if len(decoders) != 1:
        raise ScheduleError(f"quantized gemm rule: expected one block decoding the weight, found {decoders}")
    decoder = decoders[0]
    weight = index.realize(decoder).block.writes[0].buffer
    if weight.ndim != 2 or weight not in sch.func.root_block.alloc_buffers:
        raise ScheduleError("quantized gemm rule: the decoded weight is not a 2-D intermediate")
    block = sch.get_block(name)
    *batch, i, j, k = sch.get_loops(block)
    extent_j, extent_k = (const_int(e) for e in loop_extents(sch, [j, k]))
    if extent_j is None or extent_k is None or extent_k % 32:
        raise ScheduleError("quantized gemm rule: the weight's shape must be constant whole blocks")
    tile_k = TILE_K if extent_k % TILE_K == 0 else 32
    tile_j = min(TILE_J, extent_j)
    j_outer, j_inner = sch.split(j, [None, tile_j])
    k_outer, k_inner = sch.split(k, [None, tile_k])
    i_outer, i_inner = sch.split(i, [None, TILE_I])
    sch.reorder(j_outer, k_outer, *batch, i_outer, k_inner, i_inner, j_inner)
    names = leaf_block_names(sch)
    for epilogue in names[names.index(name) + 1:]:
        attempt(sch.reverse_compute_at, sch.get_block(epilogue), j_outer)
    sch.decompose_reduction(block, k_outer)
    sch.compute_at(sch.get_block(decoder), k_outer)
    decode_loops = sch.get_loops(sch.get_block(decoder))
    if vector_chunk(loop_extents(sch, decode_loops[-1:])[0]) is not None:
        attempt(sch.vectorize, decode_loops[-1])
    if vector_chunk(loop_extents(sch, [j_inner])[0]) is not None:
        sch.vectorize(j_inner)
    attempt(sch.unroll, i_inner)
    sch.parallel(j_outer)
    for other in producers:
        if other != decoder:
            attempt(sch.parallel, sch.get_loops(sch.get_block(other))[0])
    for epilogue in names[names.index(name) + 1:]:
        loops = sch.get_loops(sch.get_block(epilogue))
        if len(loops) > 1 and vector_chunk(loop_extents(sch, loops[-1:])[0]) is not None:
            attempt(sch.vectorize, loops[-1])
    task_var = sch._loop_var(j_outer)
    return lambda func: private_weight_tile(func, weight, (tile_k, tile_j), task_var)
