"""The CUDA dialect compiled by NVRTC (no GPU needed): every kernel of the GPU lowering tests,
the warp-shuffle reductions, architectures, and NVRTC's log in errors."""
from __future__ import annotations

import pytest

import tensorir as tir
from backends.cuda.codegen import cuda_source
from backends.cuda.nvrtc import NVRTCError, compile_ptx, virtual_arch
from backends.gpu import lower_for_gpu

from . import test_gpu_lower as cases
from .gpu_launch import require_nvrtc


@pytest.fixture(autouse=True)
def _nvrtc():
    require_nvrtc()


def _row_reduce(threads: int, rows_on_y: int = 1):
    sch = tir.Schedule(tir.from_source(cases.ROW_REDUCE))
    for name in ("S", "M"):
        i, j = sch.get_loops(sch.get_block(name))
        _, inner = sch.split(j, [None, threads])
        if rows_on_y > 1:
            io, ii = sch.split(i, [None, rows_on_y])
            sch.bind(io, "blockIdx.x")
            sch.bind(ii, "threadIdx.y")
        else:
            sch.bind(i, "blockIdx.x")
        sch.bind(inner, "threadIdx.x")
    return lower_for_gpu(f"rows_{threads}x{rows_on_y}", sch.func)


def test_every_kernel_of_the_schedules_compiles():
    funcs = [lower_for_gpu("mm", cases._tiled_matmul().func),
             lower_for_gpu("two", cases._bind_elementwise(tir.from_source(cases.TWO_STAGES), "B", 64).func),
             _row_reduce(3), _row_reduce(64)]
    ptx = compile_ptx(cuda_source(funcs)).decode()
    assert ptx.count(".entry") == sum(len(f.kernels) for f in funcs)
    assert ".target sm_80" in ptx


@pytest.mark.parametrize("threads, rows, shuffles", [(32, 1, True), (128, 1, True), (8, 4, True),
                                                     (8, 1, False), (3, 1, False), (48, 1, False)])
def test_warp_shuffles_where_the_block_is_whole_warps(threads, rows, shuffles):
    source = cuda_source([_row_reduce(threads, rows)])
    assert ("__shfl_xor_sync" in source) == shuffles
    assert ("rs_red_float32[" in source.split("__global__", 1)[1])  # the scratch of tree or warp partials
    compile_ptx(source)


def test_architecture_choice_and_errors():
    source = cuda_source([_row_reduce(32)])
    assert b".target sm_90" in compile_ptx(source, "sm_90")
    assert virtual_arch("sm_80") == "compute_80" and virtual_arch("compute_90a") == "compute_90a"
    with pytest.raises(NVRTCError, match="unknown CUDA architecture"):
        compile_ptx(source, "pascal")
    with pytest.raises(NVRTCError, match=r"could not compile.*\n.*undefined"):
        compile_ptx('extern "C" __global__ void broken(float* a) { a[0] = not_declared; }')


CASTS = '''
@T.prim_func
def casts(A: T.Buffer(("n",), "SRC"), B: T.Buffer(("n",), "DST")):
    n = T.int64()
    for i in range(n):
        with T.block("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = T.Cast("DST", A[vi])
'''


@pytest.mark.parametrize("src", ["float32", "float64"])
@pytest.mark.parametrize("dst", ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"])
def test_float_to_integer_casts_take_the_defined_helpers(src, dst):
    """s13: a float -> integer cast goes through a helper with NumPy's answer for NaN, +-inf and
    out-of-range values (backends.source_emitter.float_to_int_helpers), never CUDA's own
    conversion, which saturates (-1.0 -> 0 for uint32 where NumPy gives 2**32 - 1)."""
    from backends.source_emitter import float_to_int_helper
    from tests.backends.test_gpu_lower import _bind_elementwise
    func = tir.from_source(CASTS.replace("SRC", src).replace("DST", dst))
    source = cuda_source([lower_for_gpu("casts", _bind_elementwise(func, "B", 32).func)])
    helper = float_to_int_helper(src, dst)
    body = source.split("__global__", 1)[1]
    assert f"{helper}(" in body and f"{helper}(" in source.split("__global__", 1)[0]
    compile_ptx(source)
