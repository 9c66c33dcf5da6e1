"""The CUDA runtime's host side without a GPU: a stand-in driver keeps "device" memory in host
buffers and records launches, so the arguments, the launch sizes and the status handling (a
failed assert's message) are checked on any machine. The kernels themselves are not run."""
from __future__ import annotations

import ctypes
import types

import numpy as np
import pytest

import tensorir as tir
from backends.target import build_kernels
from tensorir.errors import KernelAssertionError

from .gpu_launch import require_nvrtc


class _FakeDriver:
    def __init__(self, on_launch=None):
        from cuda.bindings import driver
        self.ok = driver.CUresult.CUDA_SUCCESS
        self.CUresult = driver.CUresult
        self.CUdeviceptr = int
        self.blocks: dict[int, ctypes.Array] = {}
        self.launches: list = []
        self.on_launch = on_launch

    def cuGetErrorName(self, status):
        return self.ok, b"fake"

    def cuMemAlloc(self, nbytes):
        block = ctypes.create_string_buffer(nbytes)
        self.blocks[ctypes.addressof(block)] = block
        return self.ok, ctypes.addressof(block)

    def cuMemFree(self, pointer):
        self.blocks.pop(int(pointer), None)
        return (self.ok,)

    def cuMemcpyHtoD(self, dst, src, nbytes):
        ctypes.memmove(int(dst), src, nbytes)
        return (self.ok,)

    def cuMemcpyDtoH(self, dst, src, nbytes):
        ctypes.memmove(dst, int(src), nbytes)
        return (self.ok,)

    def cuMemsetD32(self, dst, value, count):
        (ctypes.c_int32 * count).from_address(int(dst))[:] = [value] * count
        return (self.ok,)

    def cuModuleLoadData(self, ptx):
        return self.ok, "module"

    def cuModuleGetFunction(self, module, name):
        return self.ok, name.decode()

    def cuLaunchKernel(self, function, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        self.launches.append((function, (gx, gy, gz), (bx, by, bz), shared))
        if self.on_launch is not None:
            self.on_launch(function, params)
        return (self.ok,)


@pytest.fixture
def fake_driver(monkeypatch):
    pytest.importorskip("cuda.bindings")
    require_nvrtc()
    holder = {}

    def install(on_launch=None):
        driver = _FakeDriver(on_launch)
        context = types.SimpleNamespace(driver=driver, stream=0)
        monkeypatch.setattr("backends.cuda.runtime.cuda_context", lambda: context)
        holder["driver"] = driver
        return driver
    return install


TILED = '''
@T.prim_func
def tiled(var_x: T.handle, var_y: T.handle):
    T.func_attr({"tir.is_scheduled": True})
    n = T.int64()
    X = T.match_buffer(var_x, (n, T.int64(64)))
    Y = T.match_buffer(var_y, (n, T.int64(64)))
    S = T.alloc_buffer((n, T.int64(64)), scope="shared")
    for b in T.thread_binding(n, thread="blockIdx.x"):
        assert n < T.int64(100), "n below 100"
        for tx in T.thread_binding(T.int64(64), thread="threadIdx.x"):
            with T.block("fetch"):
                v0, v1 = T.axis.remap("SS", [b, tx])
                S[v0, v1] = X[v0, v1]
        for tx in T.thread_binding(T.int64(64), thread="threadIdx.x"):
            with T.block("use"):
                v0, v1 = T.axis.remap("SS", [b, tx])
                assert X[v0, v1] == X[v0, v1], "no NaN"
                Y[v0, v1] = S[v0, T.int64(63) - v1]
'''


def _arguments(params, count) -> list[int]:
    """The kernel's argument values (8 bytes each) behind cuLaunchKernel's parameter array."""
    return [ctypes.c_uint64.from_address(ctypes.c_void_p.from_address(params + 8 * i).value).value
            for i in range(count)]


def test_launches_pass_the_arguments_and_no_dynamic_shared_memory(fake_driver):
    seen = []

    def record(function, params):
        args = _arguments(params, 4)   # the input's bytes are read now: the call frees its copy after
        seen.append((args, np.frombuffer(bytes((ctypes.c_char * x.nbytes).from_address(args[0])), "float32")))
    driver = fake_driver(record)
    module = build_kernels("cuda", tir.from_source(TILED))
    x = np.arange(5 * 64, dtype="float32").reshape(5, 64)
    for _ in range(3):   # the parameter array outlives the call that built the runner
        module["tiled"](x, np.zeros((5, 64), "float32"))
    assert len(seen) == 3
    for (x_address, y_address, n, status), x_bytes in seen:
        assert n == 5 and status in driver.blocks and x_address != y_address
        np.testing.assert_array_equal(x_bytes, x.ravel())
    # the shared tile is a static __shared__ array of the kernel: none is reserved at the launch
    assert driver.launches[-1] == ("tiled_k0", (5, 1, 1), (64, 1, 1), 0)
    assert "__shared__ float S[64];" in module.image.source


@pytest.mark.parametrize("number, message", [(0, "n below 100"), (1, "no NaN")])
def test_a_failed_assert_reports_its_message(fake_driver, number, message):
    def fail(function, params):
        # the status word is the last kernel argument: what a failing rs_assert_failed leaves
        args = 2 + 1 + 1
        slot = ctypes.c_void_p.from_address(params + 8 * (args - 1)).value
        status = ctypes.c_uint64.from_address(slot).value
        ctypes.c_int32.from_address(status).value = -4
        ctypes.c_int32.from_address(status + 4).value = (1 << 30) - number
    fake_driver(fail)
    module = build_kernels("cuda", tir.from_source(TILED))
    with pytest.raises(KernelAssertionError, match=f"'tiled'.*{message}"):
        module["tiled"](np.ones((5, 64), "float32"), np.zeros((5, 64), "float32"))


def test_a_kernel_over_the_static_shared_memory_limit_is_refused():
    from backends.cuda.codegen import STATIC_SHARED_LIMIT, cuda_source
    from backends.gpu import GPULoweringError, lower_for_gpu
    text = TILED.replace("T.int64(64)", "T.int64(256)").replace("T.int64(63)", "T.int64(255)")
    fits = lower_for_gpu("tiled", tir.from_source(text))
    assert fits.kernels[0].shared_bytes <= STATIC_SHARED_LIMIT
    cuda_source([fits])
    big = tir.from_source(text.replace('scope="shared"', 'scope="shared"').replace(
        "(n, T.int64(256)), scope", "(n, T.int64(256) * T.int64(64)), scope").replace(
        "S[v0, v1] = X[v0, v1]", "S[v0, v1 * T.int64(64)] = X[v0, v1]").replace(
        "S[v0, T.int64(255) - v1]", "S[v0, (T.int64(255) - v1) * T.int64(64)]"))
    with pytest.raises(GPULoweringError, match="bytes of shared memory"):
        cuda_source([lower_for_gpu("tiled", big)])
