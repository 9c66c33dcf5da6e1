"""The lowering every GPU target shares: a scheduled PrimFunc -> kernels with launch dimensions.

``lower_for_gpu`` (lower.py) is the entry point; the OpenCL and CUDA emitters
(backends/opencl/codegen.py, backends/cuda/codegen.py) spell its result in
their kernel language (emitter.py holds everything but the spelling).
"""
from __future__ import annotations

from .function import DeviceKernel, GPUFunction, Workspace
from .lower import GPULoweringError, lower_for_gpu

__all__ = ["DeviceKernel", "GPUFunction", "Workspace", "GPULoweringError", "lower_for_gpu"]
