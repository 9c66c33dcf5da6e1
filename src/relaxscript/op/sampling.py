"""``R.multinomial_from_uniform(prob, uniform_sample, sample_indices, dtype="int64")`` (TVM's
sampling op, as ``nn.Module`` exports print it): output row ``i`` is the token drawn from the
distribution ``prob[sample_indices[i, 0]]`` by the uniform number ``uniform_sample[i, 0]``, i.e.
the first index ``j`` whose running sum ``prob[s, 0] + ... + prob[s, j]`` exceeds it. A number at
or above the row's total (rounding of a sum of 1) takes the last index, so every result is a
valid token. ``sample_indices`` counts from the end when negative; out of range is an
``IndexOutOfRangeError``, as every data-read index here."""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt

from ..struct_info import TensorStructInfo
from ._convert import as_tensor, make_call
from ._infer_util import attr_dtype, format_sinfo, prove_not_equal, tensor_arg
from .registry import register_op


def multinomial_from_uniform(prob, uniform_sample, sample_indices, dtype="int64"):
    """R.multinomial_from_uniform(prob, uniform_sample, sample_indices, dtype="int64")."""
    dtype = attr_dtype(dtype, "multinomial_from_uniform")
    if not dt.is_int(dtype):
        from .registry import OpAttributeError
        raise OpAttributeError(f"R.multinomial_from_uniform: dtype must be an integer type, got {dtype!r}")
    return make_call("relax.multinomial_from_uniform",
                     [as_tensor(prob), as_tensor(uniform_sample), as_tensor(sample_indices)],
                     {"dtype": dtype})


def _infer(call, ctx) -> TensorStructInfo:
    name = "relax.multinomial_from_uniform"
    prob = tensor_arg(call, 0, ctx, "prob")
    uniform = tensor_arg(call, 1, ctx, "uniform_sample")
    indices = tensor_arg(call, 2, ctx, "sample_indices")
    for what, sinfo, kind in (("prob", prob, dt.is_float), ("uniform_sample", uniform, dt.is_float),
                              ("sample_indices", indices, dt.is_int)):
        if sinfo.ndim not in (-1, 2):
            ctx.error(f"{name}: {what} must be 2-D, got {format_sinfo(sinfo)}")
        if sinfo.dtype is not None and not kind(sinfo.dtype):
            ctx.error(f"{name}: {what} must be {'a float' if kind is dt.is_float else 'an integer'} "
                      f"tensor, got {format_sinfo(sinfo)}")
    for what, sinfo in (("uniform_sample", uniform), ("sample_indices", indices)):
        if sinfo.shape is not None and prove_not_equal(ctx, sinfo.shape[1], 1):
            ctx.error(f"{name}: {what} must have shape (n, 1), got {format_sinfo(sinfo)}")
    if uniform.shape is not None and indices.shape is not None \
            and prove_not_equal(ctx, uniform.shape[0], indices.shape[0]):
        ctx.error(f"{name}: uniform_sample {format_sinfo(uniform)} and sample_indices "
                  f"{format_sinfo(indices)} must have the same rows")
    rows = uniform.shape[0] if uniform.shape is not None else (
        indices.shape[0] if indices.shape is not None else None)
    if rows is None:
        return TensorStructInfo(None, call.attrs["dtype"], 2)
    return TensorStructInfo([rows, 1], call.attrs["dtype"])


def _reference(prob, uniform_sample, sample_indices, dtype="int64"):
    vocab = prob.shape[1]
    rows = prob[sample_indices[:, 0].astype(np.int64)]   # IndexError out of range (NumPy's wrap)
    running = np.cumsum(rows, axis=1, dtype=prob.dtype)
    below = (running <= uniform_sample.astype(prob.dtype)).sum(axis=1)
    return np.minimum(below, vocab - 1).reshape(-1, 1).astype(dtype)


register_op("relax.multinomial_from_uniform", _infer, _reference, attr_names=("dtype",),
            constructor=multinomial_from_uniform)

__all__ = ["multinomial_from_uniform"]
