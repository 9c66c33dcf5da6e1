"""Block-quantized weights as a graph-level concept.

A quantized matrix is a few plain tensors (packed integer codes, per-block
scales, per-block minimums) plus a format name; ``R.dequantize(data, scale,
[min], format=...)`` gives its float32 value. The pipeline legalizes the op
to a loop nest that reads the blocks, FuseOps puts it in front of its
consumer (``matmul``, ``take``) as a prologue, and the schedule inlines it
into the consumer's loop, so no float32 copy of the weight exists at run
time (see docs/ARCHITECTURE.md, "Quantized weights").
"""
from .formats import FORMATS, SCALE_DTYPES, QuantFormat, check_arrays, dequantize_numpy, get_format, quantize_numpy
from .activations import fake_quantize_numpy, quantize_activations_numpy
from .repack import repack, repack_blocks
from .gguf_convert import ConvertedWeight, conversion_report, convert_weight

__all__ = ["FORMATS", "SCALE_DTYPES", "QuantFormat", "check_arrays", "get_format", "dequantize_numpy", "quantize_numpy",
           "repack", "repack_blocks", "ConvertedWeight", "convert_weight", "conversion_report",
           "fake_quantize_numpy", "quantize_activations_numpy"]
