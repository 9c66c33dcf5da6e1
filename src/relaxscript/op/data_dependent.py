"""Operators whose output shape depends on input values: ``unique`` and
``nonzero``. Deduction gives the coarse annotation (rank and dtype only);
``R.match_cast`` re-introduces a symbolic shape (paper Figure 3).
"""
from __future__ import annotations

import numpy as np

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import tensor_arg
from .registry import register_op


def unique(x):
    """R.unique(x): the sorted distinct elements of x, flattened (``np.unique``)."""
    return make_call("relax.unique", [as_tensor(x)])


def nonzero(x):
    """R.nonzero(x): int64 indices of the non-zero elements, one row per dimension."""
    return make_call("relax.nonzero", [as_tensor(x)])


def _infer_unique(call, ctx) -> TensorStructInfo:
    return TensorStructInfo(None, tensor_arg(call, 0, ctx).dtype, 1)


def _infer_nonzero(call, ctx) -> TensorStructInfo:
    tensor_arg(call, 0, ctx)
    return TensorStructInfo(None, "int64", 2)


def _nonzero_reference(x):
    x = np.atleast_1d(x)  # a scalar is treated as a one-element vector (NumPy does the same)
    return np.asarray(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


register_op("relax.unique", _infer_unique, lambda x: np.unique(x), constructor=unique)
register_op("relax.nonzero", _infer_nonzero, _nonzero_reference, constructor=nonzero)

__all__ = ["unique", "nonzero"]
