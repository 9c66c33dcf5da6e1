"""Every kernel the default GPU schedules make for the demo decoder, the
benchmark-shaped kernels and the Before/Expected functions compiles to PTX
with NVRTC (no GPU needed)."""
from __future__ import annotations

import pytest

from tensorir.schedule_rules.gpu import default_gpu_schedule
from tests.tensorir.test_gpu_schedule_rules import _decoder_kernels, gemv_func, stitched_norm_softmax
from tests.tensorir.test_gpu_schedule_rules_expected import CASES
from tests.tensorir.test_schedule_rules_kernels import KERNELS

pytest.importorskip("cuda.bindings.nvrtc", reason="NVRTC compiles the CUDA C (the cuda extra)")


def test_scheduled_kernels_compile_with_nvrtc():
    from backends.cuda.codegen import cuda_source
    from backends.cuda.nvrtc import compile_ptx
    from backends.gpu import lower_for_gpu
    funcs = [KERNELS[name][0](80) for name in sorted(KERNELS)]
    funcs += [stitched_norm_softmax(100), gemv_func(96, 40, True), gemv_func(96, 40, False)]
    funcs += [before for before, _, _ in CASES]
    funcs += list(_decoder_kernels().values())
    lowered = []
    for func in funcs:
        lowered.append(lower_for_gpu(f"k{len(lowered)}", default_gpu_schedule(func)))
    ptx = compile_ptx(cuda_source(lowered))
    for gpu_func in lowered:
        for kernel in gpu_func.kernels:
            assert kernel.symbol.encode() in ptx
