"""Quantized weights for ``nn.Linear`` / ``nn.Embedding``: ``weight_format=nn.Quantized("q4_1")``.

The layer's ``weight`` is then a small module holding the format's arrays
(``weight.data``, ``weight.scale`` and, for formats with one, ``weight.min``;
layouts in ``relaxscript.quantization.formats``), and ``forward`` uses
``R.dequantize(...)`` where it would use the float weight. The op is
graph-level and model-agnostic: the pipeline legalizes it and fuses it
into the matmul or gather that consumes it, so no float32 copy of the
weight exists at run time.
"""
from __future__ import annotations

from .. import op as R
from ..quantization.formats import get_format
from .module import Module, Parameter


class QuantizedTensor(Module):
    """The arrays of one block-quantized (rows, cols) matrix."""

    def __init__(self, format_name: str, shape):
        super().__init__()
        fmt = get_format(format_name)
        rows, cols = shape
        if cols % fmt.block:
            raise ValueError(f"{fmt.name}: a quantized matrix needs columns in whole blocks of "
                             f"{fmt.block}, got shape {tuple(shape)}")
        self.format_name = fmt.name
        self.data = Parameter((rows, fmt.data_cols(cols)), fmt.data_dtype)
        self.scale = Parameter((rows, cols // fmt.block), "float32")
        if fmt.has_min:
            self.min = Parameter((rows, cols // fmt.block), "float32")


class Quantized:
    """A weight format: ``declare`` the arrays of a (rows, cols) weight, ``decode`` them."""

    def __init__(self, format_name: str):
        self.format = get_format(format_name)

    def declare(self, shape) -> QuantizedTensor:
        return QuantizedTensor(self.format.name, shape)

    def decode(self, weight: QuantizedTensor, shape):
        minimum = weight.min if self.format.has_min else None
        return R.dequantize(weight.data, weight.scale, minimum, format=self.format.name)

    def __repr__(self) -> str:
        return f"Quantized({self.format.name!r})"
