"""Recognize a several-token quantized linear layer for the generated GEMM
(``backends/c/quantized_gemm.py``): ``y(.., n, N) = epilogue(x(.., n, K) @ dequantize(codes,
scale[, min]))`` with a symbolic (or any) token count ``n``, constant whole-block ``K`` and
``N``, float32 scales, and an elementwise epilogue per output element.

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
from .quantized import CODE_DTYPES, GEMV_FORMATS, _float_param_loads

QUANTIZED_GEMM_ATTR = "c.quantized_gemm"


def _same(a, b) -> bool:
    return structural_equal(a, b, map_free_vars=False)


def quantized_gemm_spec(sch: Schedule) -> dict | None:
    """Roles and shape for the generated GEMM, or None (then the loop nest is compiled as
    scheduled). ``rows`` is the symbolic token count: the product of the output's leading
    dimensions, which the kernel evaluates from its symbolic arguments."""
    names = leaf_block_names(sch)
    if len(names) < 2:
        return None
    index = StmtIndex(sch.func)
    decoder, product, *epilogues = (index.realize(n).block for n in names)
    fmt = "_".join(decoder.name.rsplit("_", 2)[-2:])
    if fmt not in GEMV_FORMATS or not isinstance(decoder.body, BufferStore) or product.init is None:
        return None
    params = {id(b): i for i, b in enumerate(sch.func.buffer_params)}
    codes = [r.buffer for r in decoder.reads if id(r.buffer) in params and r.buffer.dtype in CODE_DTYPES]
    value = decoder.body.value
    if fmt == "q4_1":
        if not isinstance(value, E.Add):
            return None
        scales, mins = _float_param_loads(value.a, params), _float_param_loads(value.b, params)
    else:
        scales, mins = _float_param_loads(value, params), []
    if len(codes) != 1 or len(scales) != 1 or len(mins) != (fmt == "q4_1"):
        return None
    weight = decoder.writes[0].buffer
    outputs = [w.buffer for w in product.writes]
    others = [r.buffer for r in product.reads if r.buffer is not weight and r.buffer not in outputs]
    if len(others) != 1 or len(outputs) != 1 or id(others[0]) not in params or weight.ndim != 2:
        return None
    x, product_out = others[0], outputs[0]
    epilogue = element_epilogue(epilogues, product_out, params) if epilogues else None
    if epilogue is None and (epilogues or id(product_out) not in params):
        return None
    y = epilogue["output"] if epilogue else product_out
    rows, cols = (const_int(d) for d in weight.shape)
    if rows is None or cols is None or rows % 32 or x.dtype != "float32" or y.dtype != "float32" \
            or x.ndim < 2 or not x.ndim == y.ndim == product_out.ndim:
        return None
    if const_int(x.shape[-1]) != rows or const_int(y.shape[-1]) != cols or \
            not all(_same(a, b) for a, b in zip(y.shape, product_out.shape)) or \
            not all(_same(a, b) for a, b in zip(x.shape[:-1], y.shape[:-1])):
        return None
    if all(const_int(d) == 1 for d in x.shape[:-1]):
        return None   # one token: the GEMV's
    roles = {"codes": params[id(codes[0])], "scale": params[id(scales[0])], "x": params[id(x)],
             "y": params[id(y)]}
    if mins:
        roles["min"] = params[id(mins[0])]
    spec = {"format": fmt, "rows": rows, "cols": cols, "roles": roles}
    if epilogue:
        names = {"blocks": [b.name for b in epilogues], "product": product.name}
        if len({product.name, *names["blocks"]}) != len(epilogues) + 1:
            return None   # names that do not find the blocks again
        spec["epilogue"] = names
    return spec


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

    scalars = {id(product_out): product}
    steps, inputs = [], {}
    out = None
    for number, block in enumerate(blocks):
        store = block.body
        if not isinstance(store, BufferStore) or block.init is not None or \
                any(iv.kind != "S" for iv in block.iter_vars) or len(block.writes) != 1:
            return None
        spatial = [iv.var for iv in block.iter_vars]
        out = store.buffer
        if len(spatial) != len(shape) or out.dtype != "float32" or len(out.shape) != len(shape) or \
                not all(_same(a, b) for a, b in zip(out.shape, shape)):
            return None
        to_element = {**{v: E.IntImm(0, v.dtype) for v in spatial[:-2]}, spatial[-2]: row,
                      spatial[-1]: column}
        if not at_element(substitute(list(store.indices), to_element)):
            return None
        bound = substitute(store.value, to_element)
        replaced = {}
        for load in collect(bound, lambda n: isinstance(n, E.BufferLoad)):
            if id(load.buffer) in scalars:
                if not at_element(load.indices):
                    return None   # reads the product at another element: not elementwise
                replaced[load] = scalars[id(load.buffer)]
            elif id(load.buffer) in params:
                inputs[params[id(load.buffer)]] = load.buffer
            else:
                return None
        value = E.Var(f"rs_ep{number}", "float32")
        steps.append((value, substitute(bound, replaced)))
        scalars[id(out)] = value
    if out is None or id(out) not in params:
        return None
    return {"row": row, "column": column, "product": product, "steps": steps, "inputs": inputs,
            "output": out}
