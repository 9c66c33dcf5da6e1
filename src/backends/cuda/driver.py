"""The CUDA driver, through ``cuda.bindings.driver``: one context on device 0, created on first use.

Building never touches the driver (PTX comes from NVRTC); only running
does, and on a machine without a GPU or driver it raises
``NoCudaDeviceError`` saying so, before any kernel runs.
"""
from __future__ import annotations

_STATE = []


class NoCudaDeviceError(RuntimeError):
    """No CUDA device (or no driver) to run a CUDA executable on."""


def check(result, what: str):
    """The values of a driver call's ``(CUresult, *values)``; a RuntimeError naming the call otherwise."""
    from cuda.bindings import driver
    status, *values = result if isinstance(result, tuple) else (result,)
    if status != driver.CUresult.CUDA_SUCCESS:
        name = driver.cuGetErrorName(status)[1]
        raise RuntimeError(f"CUDA {what} failed: {name.decode() if isinstance(name, bytes) else status}")
    return values[0] if len(values) == 1 else tuple(values)


class CudaContext:
    def __init__(self):
        try:
            from cuda.bindings import driver
        except ImportError as err:
            raise NoCudaDeviceError(f"no CUDA device was found: cuda-bindings is not installed ({err}); "
                                    "pip install 'relaxscript[cuda]'") from None
        try:
            status, = driver.cuInit(0)
        except Exception as err:   # the bindings raise when libcuda itself cannot be loaded
            raise NoCudaDeviceError(f"no CUDA device was found: the NVIDIA driver (libcuda) is not "
                                    f"available ({type(err).__name__}: {err}). The executable's PTX is "
                                    "built; run it on a machine with a GPU") from None
        if status != driver.CUresult.CUDA_SUCCESS:
            raise NoCudaDeviceError(f"no CUDA device was found: cuInit returned {status!r}")
        count = check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
        if count == 0:
            raise NoCudaDeviceError("no CUDA device was found: the driver reports 0 devices")
        self.driver = driver
        self.device = check(driver.cuDeviceGet(0), "cuDeviceGet")
        self.context = check(driver.cuDevicePrimaryCtxRetain(self.device), "cuDevicePrimaryCtxRetain")
        check(driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")
        self.stream = driver.CUstream(0)   # the legacy default stream: launches run in order

    def make_current(self) -> None:
        check(self.driver.cuCtxSetCurrent(self.context), "cuCtxSetCurrent")


def cuda_context() -> CudaContext:
    if not _STATE:
        _STATE.append(CudaContext())
    return _STATE[0]
