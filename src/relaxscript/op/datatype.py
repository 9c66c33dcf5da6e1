"""``R.astype(x, dtype)``: elementwise conversion (NumPy ``astype``)."""
from __future__ import annotations

import numpy as np
from tensorir.float_casts import float_to_int, is_float_to_int

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


def _reference_astype(x, dtype):
    # a float that the integer type cannot hold converts as NumPy's element loop does, on every
    # level (tensorir.float_casts: NumPy's own answer for uint32 depends on the array length)
    x = np.asarray(x)
    if is_float_to_int(x.dtype, dtype):
        return float_to_int(x, np.dtype(dtype).name)
    return x.astype(dtype)


register_op("relax.astype", _infer_astype, _reference_astype,
            attr_names=("dtype",), constructor=astype)

__all__ = ["astype"]
