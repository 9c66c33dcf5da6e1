"""relaxscript.nn: build models the PyTorch way and export them to an IRModule.

::

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.up = nn.Linear(64, 256)
            self.down = nn.Linear(256, 64)

        def forward(self, x):
            return self.down(nn.silu(self.up(x)))

    exported = nn.export(MLP(), {"forward": {"x": nn.Tensor(("n", 64))}}, dims={"n": 128})
    exported.mod          # prints as R/T script; functions take x, then every weight by name
"""
from .export import Exported, builder, emit, export, identifier
from .layers import (GELU, Embedding, LayerNorm, Linear, ReLU, RMSNorm, SiLU, gelu, relu, silu,
                     softmax)
from .module import Module, ModuleList, Parameter
from .quantized import Quantized, QuantizedTensor
from .spec import ExportSpec, Shape, Tensor

__all__ = ["Module", "ModuleList", "Parameter", "Linear", "Embedding", "RMSNorm", "LayerNorm",
           "SiLU", "GELU", "ReLU", "silu", "gelu", "relu", "softmax", "export", "Exported",
           "ExportSpec", "Tensor", "Shape", "builder", "emit", "identifier", "Quantized",
           "QuantizedTensor"]
