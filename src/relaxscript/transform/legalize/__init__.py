"""LegalizeOps and the legalizations of the op library, one module per op family.

Each family module registers ``fn(ctx, call)`` per op with
``register_legalize``; the prim_funcs are built with ``tensorir.compute``.
"""
from . import (binary, collapse_sum, create, elementwise, gather_scatter, image, index,  # noqa: F401
               layout_transform, linear_algebra, manipulate, nn, nn_attention, nn_extra, nn_window,
               quantize, reduce, shape, sorting)
from .context import LegalizeContext
from .legalize_ops import LegalizeOps
from .registry import get_legalize, legalized_op_names, register_legalize

__all__ = ["LegalizeOps", "LegalizeContext", "register_legalize", "get_legalize",
           "legalized_op_names"]
