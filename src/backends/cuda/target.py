"""The CUDA target: GPU schedules, the shared GPU lowering, CUDA C compiled to PTX by NVRTC.

``"cuda"`` builds for sm_80; ``"cuda -arch=sm_90"`` (or ``Target("cuda", "sm_90")``) for another
architecture. Matmuls stay generated kernels (no library dispatch)."""
from __future__ import annotations

import time

from ..target import Target, TargetBackend
from .runtime import CudaImage, CudaKernelModule


class CudaBackend(TargetBackend):
    kind = "cuda"
    schedule = "gpu"
    library_dispatch = False

    def build(self, target: Target, kernels: dict) -> CudaImage:
        from ..device_launch import LaunchPlan
        from ..gpu import lower_for_gpu
        from .codegen import cuda_source
        from .nvrtc import compile_ptx
        functions = [lower_for_gpu(name, func) for name, func in kernels.items()]
        source = cuda_source(functions)
        start = time.perf_counter()
        ptx = compile_ptx(source, target.arch)
        seconds = time.perf_counter() - start
        return CudaImage(source, ptx, {f.name: LaunchPlan.of(f) for f in functions}, target, dict(kernels),
                         compiled=True, compile_seconds=seconds)

    def decode(self, target: Target, entry, decoder) -> CudaImage:
        from ..device_launch import LaunchPlan
        if type(entry) is not dict or set(entry) != {"source", "arch", "plans", "offset", "size"} \
                or not isinstance(entry["source"], str) or type(entry["plans"]) is not list \
                or entry["arch"] != target.arch:
            raise ValueError("malformed CUDA kernel entry")
        ptx = decoder.bytes_at(entry)
        plans = [LaunchPlan.decode(item, decoder) for item in entry["plans"]]
        return CudaImage(entry["source"], ptx, {p.name: p for p in plans}, target)

    def load(self, image: CudaImage) -> CudaKernelModule:
        return CudaKernelModule(image)

    def memory(self):
        from .driver import cuda_context
        from .memory import CudaMemory
        return CudaMemory(cuda_context())


BACKEND = CudaBackend()
