"""Recognize a several-token quantized linear layer for the generated GEMM
(``backends/c/quantized_gemm.py``): ``y(.., n, N) = epilogue(x(.., n, K) @ dequantize(codes,
scale[, min]))`` with a symbolic (or any) token count ``n``, constant whole-block ``K`` and
``N``, float32 or float16 scales, and an elementwise epilogue per output element.

Like the one-token GEMV (``quantized.py``'s ``quantized_gemv_spec``), the result is an
attribute (``QUANTIZED_GEMM_ATTR``) recording the format, shape and the buffer position of
each role; the loop nest stays the function's meaning (the interpreter and other targets
run it) and the C emitter puts the generated kernel in its place. The epilogue is recorded
by block names and rebuilt by the emitter from the scheduled function
(``function_element_epilogue``).
"""
from __future__ import annotations

from .. import expr as E
from ..errors import ScheduleError
from ..functor import collect, substitute
from ..schedule import Schedule
from ..schedule.state import StmtIndex
from ..stmt import Block, BufferStore
from ..structural import structural_equal
from .common import const_int, leaf_block_names
from .quantized import (CODE_DTYPES, FAKE_QUANTIZE_BLOCK, activation_rounding, decoded_product, whole_or_pair_steps,
                        scale_dtype_entry)

QUANTIZED_GEMM_ATTR = "c.quantized_gemm"


def _same(a, b) -> bool:
    return structural_equal(a, b, map_free_vars=False)


def quantized_gemm_spec(sch: Schedule) -> dict | None:
    """Roles and shape for the generated GEMM, or None (then the loop nest is compiled as
    scheduled). ``rows`` is the symbolic token count: the product of the output's leading
    dimensions, which the kernel evaluates from its symbolic arguments."""
    names = leaf_block_names(sch)
    index = StmtIndex(sch.func)
    blocks = [index.realize(n).block for n in names]
    products = [at for at, block in enumerate(blocks) if block.init is not None]
    if len(products) != 1:
        return None
    product, epilogues = blocks[products[0]], blocks[products[0] + 1:]
    params = {id(b): i for i, b in enumerate(sch.func.buffer_params)}
    decoders = [b for b in blocks[:products[0]]
                if any(id(r.buffer) in params and r.buffer.dtype in CODE_DTYPES for r in b.reads)]
    if len(decoders) != 1:
        return None
    decoder = decoders[0]
    prologue = [b for b in blocks[:products[0]] if b is not decoder]
    operands = decoded_product(decoder, product, params)
    if operands is None or operands[4].ndim != 2:
        return None
    fmt, codes, scales, mins, weight, x, product_out = operands
    rounding = activation_rounding(x, prologue)
    if rounding is not None:       # x = fake_quantize(source): the kernel rounds the rows itself
        prologue = [b for b in prologue if b is not rounding]
        x = rounding.reads[0].buffer
    # x is a parameter, or computed from parameters by elementwise/layout blocks (the
    # attention output's reshape and transpose): the kernel then gathers its rows first
    if (id(x) in params) == bool(prologue) or not all(_is_layout_block(b) for b in prologue):
        return None
    epilogue = element_epilogue(epilogues, product_out, params) if epilogues else None
    if epilogue is None and (epilogues or id(product_out) not in params):
        return None
    y = epilogue["output"] if epilogue else product_out
    rows, cols = (const_int(d) for d in weight.shape)
    if rows is None or cols is None or rows % 32 or x.dtype != "float32" or y.dtype != "float32" \
            or x.ndim < 2 or not x.ndim == y.ndim == product_out.ndim:
        return None
    pair = bool(epilogue and epilogue.get("pair"))
    if const_int(x.shape[-1]) != rows or const_int(y.shape[-1]) * (1 + pair) != cols or \
            not all(_same(a, b) for a, b in zip(y.shape[:-1], product_out.shape[:-1])) or \
            not all(_same(a, b) for a, b in zip(x.shape[:-1], y.shape[:-1])):
        return None
    if all(const_int(d) == 1 for d in y.shape[:-1]):
        return None   # one token: the GEMV's
    roles = {"codes": params[id(codes[0])], "scale": params[id(scales[0])], "y": params[id(y)]}
    if mins:
        roles["min"] = params[id(mins[0])]
    if id(x) in params:
        roles["x"] = params[id(x)]
    spec = {"format": fmt, "rows": rows, "cols": cols, "roles": roles, "product": product.name,
            **scale_dtype_entry(scales)}
    if rounding is not None:
        spec["activations"] = rounding.name[len(FAKE_QUANTIZE_BLOCK):]
    if pair:
        spec["pair"] = True    # y(n, N) from the product's halves: columns c and c + N
    if epilogue:
        names = {"blocks": [b.name for b in epilogues], "product": product.name}
        if len({product.name, *names["blocks"]}) != len(epilogues) + 1:
            return None   # names that do not find the blocks again
        spec["epilogue"] = names
    return spec


def _is_layout_block(block) -> bool:
    return isinstance(block.body, BufferStore) and block.init is None and len(block.writes) == 1 and \
        all(iv.kind == "S" for iv in block.iter_vars)


def function_row_operand(func, spec: dict) -> dict | None:
    """For a marked function whose ``x`` is not a parameter: the product's left operand at
    ``(row, k)`` as an expression over the function's inputs, the layout blocks in front of
    it (a reshape, a transpose) composed into it; None when the product's body is not
    ``C = C + a * w`` or the operand reads anything a non-layout block writes."""
    blocks = collect(func.body, lambda n: isinstance(n, Block))
    block = next((b for b in blocks if b.name == spec["product"]), None)
    if block is None or not isinstance(block.body, BufferStore) or len(block.iter_vars) < 3:
        return None
    store = block.body
    value = store.value
    if not isinstance(value, E.Add):
        return None
    terms = [t for t in (value.a, value.b)
             if not (isinstance(t, E.BufferLoad) and t.buffer is store.buffer)]
    if len(terms) != 1 or not isinstance(terms[0], E.Mul):
        return None
    written = {id(w.buffer) for b in blocks for w in b.writes}
    # with rounded activations the operand is the rounding block's own element before rounding
    # (the kernel rounds the gathered rows itself); scheduling may have inlined layout blocks
    # into the rounding block, so the element is taken from its body, not its read buffer
    rounded = {id(b.writes[0].buffer): b for b in blocks
               if spec.get("activations") and b.name.startswith(FAKE_QUANTIZE_BLOCK)}
    producers = {id(b.writes[0].buffer): b for b in blocks
                 if _is_layout_block(b) and [i for i in b.body.indices] == [iv.var for iv in b.iter_vars]}

    def composed(expr, depth: int = 0):
        """``expr`` with loads of layout blocks' buffers replaced by what they store, or None
        when it reads another block's output or anything but float32."""
        replaced = {}
        for load in collect(expr, lambda n: isinstance(n, E.BufferLoad)):
            if id(load.buffer) in rounded:
                block = rounded[id(load.buffer)]
                element = _unrounded_element(block)
                ivs = [iv.var for iv in block.iter_vars]
                inner = composed(substitute(element, dict(zip(ivs, load.indices))), depth + 1) \
                    if element is not None and depth <= 16 else None
                if inner is None:
                    return None
                replaced[load] = inner
                continue
            producer = producers.get(id(load.buffer))
            if producer is None:
                if id(load.buffer) in written or load.buffer.dtype != "float32":
                    return None
                continue
            if depth > 16:
                return None
            ivs = [iv.var for iv in producer.iter_vars]
            inner = composed(substitute(producer.body.value, dict(zip(ivs, load.indices))), depth + 1)
            if inner is None:
                return None
            replaced[load] = inner
        return substitute(expr, replaced) if replaced else expr

    row, k = E.Var("rs_row", "int64"), E.Var("rs_k", "int64")
    *batch, i, j, kv = [iv.var for iv in block.iter_vars]
    mapping = {**{v: E.IntImm(0, v.dtype) for v in batch}, i: row, kv: k}
    for operand in (terms[0].a, terms[0].b):
        uses = {id(n) for n in collect(operand, lambda n: isinstance(n, E.Var))}
        found = composed(operand) if id(j) not in uses else None
        if found is not None and collect(found, lambda n: isinstance(n, E.BufferLoad)):
            return {"row": row, "k": k, "value": substitute(found, mapping)}
    return None


def _unrounded_element(block):
    """The value a ``T_fake_quantize_*`` block rounds (``round(element * inverse) * scale``), or None."""
    if not isinstance(block.body, BufferStore):
        return None
    rounds = collect(block.body.value, lambda n: isinstance(n, E.Call) and n.op == "round")
    if len(rounds) != 1 or not isinstance(rounds[0].args[0], E.Mul):
        return None
    product = rounds[0].args[0]
    plain = [t for t in (product.a, product.b) if not collect(t, lambda n: isinstance(n, E.Select))]
    return plain[0] if len(plain) == 1 else None


def function_element_epilogue(func, names: dict) -> dict:
    """The epilogue chain (``element_epilogue``) of a function marked with
    ``QUANTIZED_GEMM_ATTR``, from the product's and the epilogue's block names."""
    blocks = {b.name: b for b in collect(func.body, lambda n: isinstance(n, Block))}
    # scheduling may have inlined stages into later ones; the chain still ends in the last
    missing = [n for n in names["blocks"][-1:] if n not in blocks]
    chain = [blocks[n] for n in names["blocks"] if n in blocks]
    products = [w.buffer for w in blocks[names["product"]].writes] if names["product"] in blocks else []
    params = {id(b): i for i, b in enumerate(func.buffer_params)}
    epilogue = element_epilogue(chain, products[0], params) if products and not missing else None
    if epilogue is None:
        raise ScheduleError(f"{func.name!r}: the quantized gemm's epilogue {names} is not in the function")
    return epilogue


def element_epilogue(blocks, product_out, params: dict) -> dict | None:
    """The blocks after the product as scalar steps per output element ``(row, column)``, or
    None when they are not an elementwise chain over the product.

    Each block stores one float32 value at its own spatial iter vars into a buffer shaped
    like the product ``(1.., n, N)``; with the leading vars at 0, the next the row and the
    last the column, a load of the product or of an earlier step's buffer at
    ``(0.., row, column)`` becomes that step's scalar, and any other load must read a
    parameter (bias, gate, residual), indexed however the block indexes it. The last step
    writes a parameter: ``output``."""
    row, column = E.Var("rs_row", "int64"), E.Var("rs_col", "int64")
    product = E.Var("rs_prod", "float32")
    shape = product_out.shape
    if len(shape) < 2 or any(const_int(d) != 1 for d in shape[:-2]):
        return None

    def at_element(indices) -> bool:
        if len(indices) != len(shape):
            return False
        *lead, r, c = indices
        return all(const_int(i) == 0 for i in lead) and \
            (r is row or (const_int(shape[-2]) == 1 and const_int(r) == 0)) and \
            (c is column or (const_int(shape[-1]) == 1 and const_int(c) == 0))

    def position(spatial) -> dict:
        return {**{v: E.IntImm(0, v.dtype) for v in spatial[:-2]}, spatial[-2]: row, spatial[-1]: column}

    def fits_width(width: int):
        def fits(spatial, out) -> bool:
            return len(spatial) == len(shape) and len(out.shape) == len(shape) and \
                all(_same(a, b) for a, b in zip(out.shape[:-1], shape[:-1])) and const_int(out.shape[-1]) == width
        return fits

    chain = whole_or_pair_steps(blocks, product_out, product, params, const_int(shape[-1]), column, fits_width,
                                position, at_element)
    return None if chain is None else {"row": row, "column": column, "product": product, **chain}
