"""Which scheduled functions a target's kernel generator writes from their attributes.

The CPU rules mark three kinds of function with the layout a C generator needs (the fused
attention, the quantized GEMM and GEMV); the loop nest stays the function's meaning for the
interpreter and the other targets, but the C kernel is written from the attribute.
"""
from __future__ import annotations

from .attention import ATTENTION_LAYOUT_ATTR
from .quantized import QUANTIZED_GEMV_ATTR
from .quantized_gemm import QUANTIZED_GEMM_ATTR

GENERATOR_ATTRS = (ATTENTION_LAYOUT_ATTR, QUANTIZED_GEMM_ATTR, QUANTIZED_GEMV_ATTR)


def generated_from_attributes(func) -> bool:
    """Whether a kernel generator writes ``func``'s kernel from its attributes rather than from
    its loop body: those generators read the buffers in the order they expect, workspaces
    included, so nothing may move them."""
    return any(func.attrs.get(attr) is not None for attr in GENERATOR_ATTRS)
