"""Test-side launcher: run a GPUFunction's OpenCL kernels on PoCL's CPU device through pyopencl.

Allocates device buffers for the arrays (copied in), workspaces and the
status word, evaluates each kernel's grid from the symbolic values the
arrays' shapes bind, launches in order (skipping empty grids), copies every
buffer back into its array and returns the status word.
"""
from __future__ import annotations

import functools

import numpy as np

from backends.c.status import DEVICE_STATUS_BYTES
from tensorir.expr import Var


@functools.lru_cache(maxsize=1)
def _context():
    import pyopencl as cl
    platform = next(p for p in cl.get_platforms() if p.get_devices())
    ctx = cl.Context(platform.get_devices()[:1])
    return ctx, cl.CommandQueue(ctx)


@functools.lru_cache(maxsize=256)
def _program(source: str):
    import pyopencl as cl
    ctx, _ = _context()
    return cl.Program(ctx, source).build(), {}


def _kernel(program_and_kernels, symbol: str):
    import pyopencl as cl
    program, kernels = program_and_kernels
    if symbol not in kernels:
        kernels[symbol] = cl.Kernel(program, symbol)
    return kernels[symbol]


def _bytes(array: np.ndarray) -> np.ndarray:
    """A writable byte view of a C-contiguous array (0-d included)."""
    return array.reshape(-1).view(np.uint8)


def bind_sym_values(gfunc, arrays, scalars: dict | None = None) -> dict:
    """{Var: int} for the function's sym vars, from the arrays' shapes and ``scalars`` (by name)."""
    values: dict = {}
    for buf, array in zip(gfunc.buffers, arrays):
        for dim, size in zip(buf.shape, array.shape):
            if isinstance(dim, Var):
                values.setdefault(dim, int(size))
    for var in gfunc.sym_vars:
        if var not in values:
            values[var] = int((scalars or {})[var.name])
    return values


def run_opencl(gfunc, source: str, arrays: list[np.ndarray], scalars: dict | None = None) -> int:
    import pyopencl as cl
    ctx, queue = _context()
    program = _program(source)
    values = bind_sym_values(gfunc, arrays, scalars)
    flags = cl.mem_flags
    device = [cl.Buffer(ctx, flags.READ_WRITE | flags.COPY_HOST_PTR, hostbuf=_bytes(a) if a.size else
                        np.zeros(1, np.uint8)) for a in arrays]
    workspaces = [cl.Buffer(ctx, flags.READ_WRITE, max(1, n * np.dtype(w.dtype).itemsize))
                  for w, n in zip(gfunc.workspaces, gfunc.workspace_sizes(values))]
    status = np.zeros(DEVICE_STATUS_BYTES // 4, np.int32)   # a failed index check writes past the word
    status_buffer = cl.Buffer(ctx, flags.READ_WRITE | flags.COPY_HOST_PTR, hostbuf=status)
    syms = [np.int64(values[v]) for v in gfunc.sym_vars]
    for kernel, grid in zip(gfunc.kernels, gfunc.launch_grid(values)):
        if min(grid) <= 0:
            continue
        global_size = tuple(g * b for g, b in zip(grid, kernel.block))
        launch = _kernel(program, kernel.symbol)
        launch(queue, global_size, kernel.block, *device, *workspaces, *syms, status_buffer)
    for array, buffer in zip(arrays, device):
        if array.size:
            cl.enqueue_copy(queue, _bytes(array), buffer)
    cl.enqueue_copy(queue, status, status_buffer)
    queue.finish()
    return int(status[0])


def require_opencl() -> None:
    """Skip (with the reason) when pyopencl or an OpenCL device (PoCL's CPU device) is missing."""
    import pytest
    pytest.importorskip("pyopencl", reason="pyopencl is not installed (the 'opencl' extra)")
    try:
        _context()
    except Exception as exc:  # noqa: BLE001 - any platform failure means no device to test on
        pytest.skip(f"no OpenCL device (install pocl-binary-distribution): {exc}")


def require_nvrtc() -> None:
    """Skip (with the reason) when NVRTC cannot be loaded."""
    import pytest
    from backends.cuda.nvrtc import NVRTCError, compile_ptx
    try:
        compile_ptx('extern "C" __global__ void probe() {}')
    except NVRTCError as exc:
        pytest.skip(f"NVRTC is not available (the 'cuda' extra): {exc}")


def check_on_opencl(func, arrays_for, bindings, tolerance=None, nvrtc: bool = True):
    """Lower ``func`` for the GPU, run it on OpenCL for every binding (``arrays_for(binding)``
    gives the argument arrays) and compare with the loop-level interpreter; compile the
    CUDA version with NVRTC when available. Returns the GPUFunction."""
    import tensorir as tir
    from backends.cuda.codegen import cuda_source
    from backends.gpu import lower_for_gpu
    from backends.opencl.codegen import opencl_source
    gfunc = lower_for_gpu(func.name, func)
    source = opencl_source([gfunc])
    if nvrtc:
        from backends.cuda.nvrtc import NVRTCError, compile_ptx
        try:
            compile_ptx(cuda_source([gfunc]))
        except NVRTCError as exc:
            if "not available" not in str(exc):
                raise
    for binding in bindings:
        arrays = arrays_for(binding)
        expected = [a.copy() for a in arrays]
        tir.interpret(func, *expected)
        status = run_opencl(gfunc, source, arrays)
        assert status == 0, f"status {status} for {binding}"
        for got, want in zip(arrays, expected):
            if tolerance is None:
                np.testing.assert_array_equal(got, want, err_msg=f"binding {binding}")
            else:
                np.testing.assert_allclose(got, want, err_msg=f"binding {binding}", **tolerance)
    return gfunc
