"""``R.astype(x, dtype)``: elementwise conversion (NumPy ``astype``)."""
from __future__ import annotations

import numpy as np

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import attr_dtype, tensor_arg
from .registry import register_op


def astype(x, dtype):
    """R.astype(x, dtype): x converted to ``dtype``."""
    return make_call("relax.astype", [as_tensor(x)], {"dtype": attr_dtype(dtype, "astype")})


def _infer_astype(call, ctx) -> TensorStructInfo:
    x = tensor_arg(call, 0, ctx)
    return TensorStructInfo(x.shape, call.attrs["dtype"], x.ndim)


register_op("relax.astype", _infer_astype, lambda x, dtype: np.asarray(x).astype(dtype),
            attr_names=("dtype",), constructor=astype)

__all__ = ["astype"]
