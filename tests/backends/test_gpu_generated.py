"""Hypothesis-drawn TensorIR programs, bound by a simple schedule, on OpenCL vs the interpreter.

Kinds of tests/tensorir/generators.py (elementwise, transpose, reduction,
matmul, conditional with integer dtypes); each block's spatial loops are
fused, split by a drawn thread count (often not dividing the extent) and
bound to blockIdx.x/threadIdx.x; with a drawn reduction thread count the
reduction loops are bound to threadIdx.x (a cross-thread reduction). Each
program runs for several bindings of its symbolic vars, n = 1 included,
and its CUDA version compiles with NVRTC.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tensorir as tir
from backends.c.status import STATUS_ZERO_DIVISION
from backends.cuda.codegen import cuda_source
from backends.cuda.nvrtc import NVRTCError, compile_ptx
from backends.gpu import lower_for_gpu
from backends.opencl.codegen import opencl_source
from tensorir.interpreter import InterpretError
from tests.tensorir import generators as G

from .gpu_launch import require_opencl, run_opencl


def _programs():
    return st.one_of(G.prim_funcs(), G.prim_funcs(G.CONTROL_KINDS, G.DTYPES + G.INT_DTYPES))


def _check(data):
    from .gpu_schedules import bind_everything
    gen = data.draw(_programs(), label="program")
    threads = data.draw(st.sampled_from([1, 3, 4, 32]), label="threads")
    reduce_threads = data.draw(st.sampled_from([None, 1, 3, 8]), label="reduce threads")
    func = bind_everything(gen.func, threads, reduce_threads)
    gfunc = lower_for_gpu(gen.func.name, func)
    source = opencl_source([gfunc])
    try:
        compile_ptx(cuda_source([gfunc]))
    except NVRTCError as exc:
        if "not available" not in str(exc):
            raise
    bindings = [{v.name: 1 for v in gen.sym_vars}] + \
        [data.draw(G.sym_sizes(gen, 1, 9), label="sizes") for _ in range(2)]
    for sizes in bindings:
        arrays = G.make_inputs(gen, np.random.default_rng(0), sizes)
        expected = [a.copy() for a in arrays]
        try:
            tir.interpret(gen.func, *expected)
        except InterpretError as exc:  # a drawn integer division by zero: the kernel reports it
            assert "zero" in str(exc), exc
            assert run_opencl(gfunc, source, arrays) == STATUS_ZERO_DIVISION
            continue
        assert run_opencl(gfunc, source, arrays) == 0
        for got, want in zip(arrays[gen.num_inputs:], expected[gen.num_inputs:]):
            np.testing.assert_allclose(got, want, **G.tolerance(gen.dtype), err_msg=f"{sizes}\n{source}")


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_programs_on_opencl(data):
    require_opencl()
    _check(data)


@pytest.mark.fuzz
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_programs_on_opencl_fuzz(data):
    require_opencl()
    _check(data)
