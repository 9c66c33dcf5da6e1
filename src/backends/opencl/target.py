"""The OpenCL target: GPU schedules, the shared GPU lowering, OpenCL C, pyopencl at run time.

No OpenCL BLAS is required: matmuls stay generated kernels (no library dispatch)."""
from __future__ import annotations

from ..target import Target, TargetBackend
from .runtime import OpenCLImage, OpenCLKernelModule, build_program


class OpenCLBackend(TargetBackend):
    kind = "opencl"
    schedule = "gpu"
    library_dispatch = False

    def build(self, target: Target, kernels: dict) -> OpenCLImage:
        from ..device_launch import LaunchPlan
        from ..gpu import lower_for_gpu
        from .codegen import opencl_source
        functions = [lower_for_gpu(name, func) for name, func in kernels.items()]
        source = opencl_source(functions)
        program = build_program(source)   # fail at build time, with the compiler's log
        return OpenCLImage(source, {f.name: LaunchPlan.of(f) for f in functions}, dict(kernels),
                           compiled=True, program=program)

    def decode(self, target: Target, entry, decoder) -> OpenCLImage:
        from ..device_launch import LaunchPlan
        if type(entry) is not dict or set(entry) != {"source", "plans"} or not isinstance(entry["source"], str) \
                or type(entry["plans"]) is not list:
            raise ValueError("malformed OpenCL kernel entry")
        plans = [LaunchPlan.decode(item, decoder) for item in entry["plans"]]
        return OpenCLImage(entry["source"], {p.name: p for p in plans})

    def load(self, image: OpenCLImage) -> OpenCLKernelModule:
        return OpenCLKernelModule(image)

    def memory(self):
        from .device import opencl_device
        from .memory import OpenCLMemory
        return OpenCLMemory(opencl_device())


BACKEND = OpenCLBackend()
