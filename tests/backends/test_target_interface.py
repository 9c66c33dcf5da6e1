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


# ---------------------------------------------------------------- GPU targets through rx.build
from tests.targets import HAVE_OPENCL, OPENCL_REASON  # noqa: E402


def _nvrtc_available() -> bool:
    try:
        from cuda.bindings import nvrtc  # noqa: F401
    except ImportError:
        return False
    return True


needs_nvrtc = pytest.mark.skipif(not _nvrtc_available(), reason="cuda-bindings / NVRTC are not installed "
                                 "(pip install 'relaxscript[cuda]')")
needs_opencl = pytest.mark.skipif(not HAVE_OPENCL, reason=OPENCL_REASON)


@needs_nvrtc
@pytest.mark.parametrize("name", sorted(M.MODULES))
def test_every_vm_module_builds_ptx_for_every_kernel(name):
    exe = rx.build(M.parse(M.MODULES[name]), target="cuda -arch=sm_90")
    image = exe.kernels
    assert exe.target == "cuda -arch=sm_90" and image.compiled
    ptx = image.ptx.decode()
    assert ".target sm_90" in ptx
    for plan in image.plans.values():
        for launch in plan.launches:
            assert f".entry {launch.symbol}(" in ptx, launch.symbol


@needs_nvrtc
def test_cuda_executables_save_and_load_with_their_ptx(tmp_path, monkeypatch):
    exe = rx.build(M.parse(M.NORMS), target="cuda")
    path = tmp_path / "norms.rsx"
    exe.save(path)

    def no_nvrtc(*args, **kwargs):
        raise AssertionError("load must not compile")
    monkeypatch.setattr("backends.cuda.nvrtc.compile_ptx", no_nvrtc)
    loaded = rx.Executable.load(path)
    assert loaded.target == "cuda -arch=sm_80" and not loaded.compiled
    assert loaded.kernels.ptx == exe.kernels.ptx and loaded.kernels.source == exe.kernels.source
    assert {n: [k.symbol for k in p.launches] for n, p in loaded.kernels.plans.items()} == \
        {n: [k.symbol for k in p.launches] for n, p in exe.kernels.plans.items()}
    args = M.inputs_for("NORMS", np.random.default_rng(0), 5, 3)
    grids = {n: p.sizes((5,) * len(p.sym_vars)) for n, p in exe.kernels.plans.items()}
    assert {n: p.sizes((5,) * len(p.sym_vars)) for n, p in loaded.kernels.plans.items()} == grids
    if not _has_cuda_device():
        with pytest.raises(RuntimeError, match="no CUDA device was found"):
            rx.VirtualMachine(loaded)
    else:
        want = rx.interpret(M.parse(M.NORMS), "main", *args)
        for got, expected in zip(rx.VirtualMachine(loaded)["main"](*args), want):
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@needs_opencl
def test_opencl_executables_save_and_load_with_their_source(tmp_path):
    mod = M.parse(M.MLP)
    exe = rx.build(mod, target="opencl")
    path = tmp_path / "mlp.rsx"
    exe.save(path)
    loaded = rx.Executable.load(path)
    assert loaded.target == "opencl" and loaded.kernels.source == exe.kernels.source
    args = M.inputs_for("MLP", np.random.default_rng(1), 4, 3)
    np.testing.assert_allclose(rx.VirtualMachine(loaded)["main"](*args), rx.interpret(mod, "main", *args),
                               rtol=1e-4, atol=1e-5)


@needs_opencl
def test_a_wrong_argument_shape_on_opencl_is_the_c_error_before_any_kernel():
    from tensorir.errors import ShapeMismatchError
    mod = M.parse(M.MLP)
    good = M.inputs_for("MLP", np.random.default_rng(1), 4, 3)
    bad = [np.ascontiguousarray(good[0][:, :5]), *good[1:]]   # x must have 8 columns
    messages = {}
    for target in ("c", "opencl"):
        vm = rx.VirtualMachine(rx.build(mod, target=target))
        seen = []
        vm.set_instrument(lambda *record, seen=seen: seen.append(record))
        with pytest.raises(ShapeMismatchError) as info:
            vm["main"](*bad)
        assert seen == [], f"{target}: instructions ran before the argument check failed"
        messages[target] = str(info.value)
    assert messages["opencl"] == messages["c"]
    assert "parameter 'x'" in messages["c"] and "8" in messages["c"] and "5" in messages["c"], messages["c"]


@needs_opencl
def test_device_arrays_chain_calls_without_copies_and_come_back_as_device_arrays():
    mod = M.parse(M.ELEMENTWISE)
    vm = rx.VirtualMachine(rx.build(mod, target="opencl"))
    device = rx.device("opencl")
    args = M.inputs_for("ELEMENTWISE", np.random.default_rng(2), 6, 3)
    on_device = [rx.tensor(a, device=device) if isinstance(a, np.ndarray) else a for a in args]
    first = vm["main"](*on_device)
    assert isinstance(first, device.memory.device_array_type) and first.shape == args[0].shape
    np.testing.assert_allclose(first.numpy(), vm["main"](*args), rtol=1e-6)   # NumPy in, NumPy out
    assert isinstance(vm["main"](*args), np.ndarray)
    second = vm["main"](first, *on_device[1:])      # the result feeds the next call on the device
    want = rx.interpret(mod, "main", rx.interpret(mod, "main", *args), *args[1:])
    np.testing.assert_allclose(second.numpy(), want, rtol=1e-4, atol=1e-5)
