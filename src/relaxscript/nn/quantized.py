"""Quantized weights for ``nn.Linear`` / ``nn.Embedding``: ``weight_format=nn.Quantized("q4_1")``.

The layer's ``weight`` is then a small module holding the format's arrays
(``weight.data``, ``weight.scale`` and, for formats with one, ``weight.min``;
layouts in ``relaxscript.quantization.formats``: they stand for the
``(in_features, out_features)`` matrix, blocks running along ``in``), and
``forward`` uses ``R.dequantize(...)`` where it would use the float weight,
one call per use so each fuses into its own consumer. The op is
graph-level and model-agnostic: the pipeline legalizes it and fuses it
into the matmul that consumes it, so no float32 copy of the weight exists
at run time; a gather (``nn.Embedding``) picks the quantized columns
first (``decode_columns``) and dequantizes only those.

``nn.Quantized("q4_1", scale_dtype="float16")`` keeps the block scales (and mins) in
float16, as GGUF stores them: 20 bytes per 32 q4_1 weights instead of 24, read and
widened by the kernels (exact: the dequantized values are the same).
"""
from __future__ import annotations

from .. import op as R
from ..quantization.formats import SCALE_DTYPES, get_format
from .module import Module, Parameter


class QuantizedTensor(Module):
    """The arrays of one block-quantized (rows, cols) matrix."""

    def __init__(self, format_name: str, shape, scale_dtype: str = "float32"):
        """``shape``: the (rows, cols) matrix the arrays stand for; rows are cut into blocks;
        ``scale_dtype``: the scales' and mins' dtype (float32 or float16)."""
        super().__init__()
        fmt = get_format(format_name)
        self.format_name = fmt.name
        for role, array_shape, dtype in fmt.tensor_specs(*shape, scale_dtype):
            setattr(self, role, Parameter(array_shape, dtype))


class Quantized:
    """A weight format: ``declare`` the arrays of a (rows, cols) weight, ``decode`` them."""

    def __init__(self, format_name: str, scale_dtype: str = "float32"):
        if scale_dtype not in SCALE_DTYPES:
            raise ValueError(f"Quantized({format_name!r}): scale_dtype must be one of {SCALE_DTYPES}, "
                             f"got {scale_dtype!r}")
        self.format = get_format(format_name)
        self.scale_dtype = scale_dtype

    def declare(self, shape) -> QuantizedTensor:
        """The arrays of a (rows, cols) matrix, blocks along rows (a linear layer's (in, out))."""
        return QuantizedTensor(self.format.name, shape, self.scale_dtype)

    def decode(self, weight: QuantizedTensor):
        """The (rows, cols) float32 matrix, as a fresh ``R.dequantize`` call."""
        minimum = weight.min if self.format.has_min else None
        return R.dequantize(weight.data, weight.scale, minimum, format=self.format.name)

    def decode_columns(self, weight: QuantizedTensor, ids):
        """Columns ``ids`` of the (rows, cols) matrix: the columns of every array are picked
        first (blocks run along rows, so each column is whole), then only they are
        dequantized. Dequantizing the matrix and then gathering would fuse into one kernel
        that writes the whole float32 matrix per call (an embedding lookup of one token
        rewrote 113 MB)."""
        def pick(array):
            return R.take(array, ids, axis=1)
        minimum = pick(weight.min) if self.format.has_min else None
        return R.dequantize(pick(weight.data), pick(weight.scale), minimum, format=self.format.name)

    def __repr__(self) -> str:
        extra = f", scale_dtype={self.scale_dtype!r}" if self.scale_dtype != "float32" else ""
        return f"Quantized({self.format.name!r}{extra})"
