"""Targets: parsing, the per-target pipelines, the C and interp targets through the one interface, and
the CUDA runtime's clear error on a machine without a GPU."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from backends.target import Target, TargetError, build_kernels, get_backend
from relaxscript.vm import VMBuildError
from tests.relaxscript import vm_modules as M

SHIFT = '''
@T.prim_func
def shift(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i in range(n):
        b[i] = a[i] + T.float32(1)
'''


@pytest.mark.parametrize("spec, kind, arch, text", [
    ("c", "c", "", "c"), ("interp", "interp", "", "interp"), ("opencl", "opencl", "", "opencl"),
    ("cuda", "cuda", "sm_80", "cuda -arch=sm_80"), ("cuda -arch=sm_90", "cuda", "sm_90", "cuda -arch=sm_90"),
    (Target("cuda", "sm_86"), "cuda", "sm_86", "cuda -arch=sm_86")])
def test_targets_parse_and_print(spec, kind, arch, text):
    target = Target.parse(spec)
    assert (target.kind, target.arch, str(target)) == (kind, arch, text)
    assert Target.parse(str(target)) == target


@pytest.mark.parametrize("spec, message", [
    ("tpu", "unknown build target 'tpu'"), ("", "unknown build target"),
    ("cuda -arch=ampere", "-arch must look like sm_80"), ("c -O3", "unknown option '-O3' for 'c'"),
    (3, "a target is a string")])
def test_bad_targets_are_named(spec, message):
    with pytest.raises(TargetError, match=message):
        Target.parse(spec)
    with pytest.raises(VMBuildError, match=message):
        rx.build(M.parse(M.SUBGRAPH), target=spec)


def test_gpu_pipelines_dispatch_no_library_and_schedule_for_the_gpu():
    for spec in ("opencl", "cuda -arch=sm_90", Target("cuda")):
        names = [type(p).__name__ for p in rx.get_pipeline(spec)]
        assert "DispatchLibrary" not in names and "DefaultCPUSchedule" not in names
        assert names.index("FuseTIR") + 1 == names.index("DefaultGPUSchedule")
        assert names[0] == "InlineFunctions" and names[-1] == "StaticPlanBlockMemory"
    assert "DispatchLibrary" in [type(p).__name__ for p in rx.get_pipeline("c")]


@pytest.mark.parametrize("target", ["c", "interp"])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_direct_kernel_calls_match_the_interpreter(target, n):
    func = tir.from_source(SHIFT)
    module = build_kernels(target, func)
    a = np.arange(n, dtype="float32")
    got, want = np.zeros(n, "float32"), np.zeros(n, "float32")
    module["shift"](a, got)
    tir.interpret(func, a, want)
    np.testing.assert_array_equal(got, want)


def test_backends_are_found_by_kind_only():
    assert get_backend("c").kind == "c" and get_backend(Target("interp")).kind == "interp"
    assert get_backend("cuda -arch=sm_90").schedule == "gpu"
    assert get_backend("c").memory() is None


def test_host_targets_have_no_device_memory():
    with pytest.raises(ValueError, match="has no device memory"):
        rx.device("c")


def _has_cuda_device() -> bool:
    from backends.cuda.driver import NoCudaDeviceError, cuda_context
    try:
        cuda_context()
    except NoCudaDeviceError:
        return False
    return True


def test_loading_cuda_kernels_without_a_device_says_no_cuda_device_was_found():
    from backends.cuda.driver import NoCudaDeviceError
    from backends.cuda.runtime import CudaImage, CudaKernelModule
    if _has_cuda_device():
        pytest.skip("this machine has a CUDA device; the no-device error cannot happen here")
    image = CudaImage("", b"// no kernels\n", {}, Target.parse("cuda"))
    with pytest.raises(NoCudaDeviceError, match="no CUDA device was found"):
        CudaKernelModule(image)
    with pytest.raises(NoCudaDeviceError, match="no CUDA device was found"):
        rx.device("cuda")
