"""The demo decoder's fused kernels, bound by the test schedule (tests/backends/gpu_schedules.py),
lowered for the GPU: every kernel compiles with NVRTC and runs on OpenCL as the interpreter
does, for n = 1 and a length the 64-thread tiles do not divide."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from examples.llama_decoder import TINY, llama_source
from tensorir import PrimFunc
from tensorir.arith.evaluate import evaluate

from .gpu_launch import check_on_opencl, require_opencl
from .gpu_schedules import bind_everything


def _decoder_prim_funcs() -> dict:
    mod = rx.from_source(llama_source(TINY))
    steps = [rx.transform.InlineFunctions(), rx.transform.LegalizeOps(), rx.transform.AnnotateTIROpPattern(),
             rx.transform.FuseOps(), rx.transform.FuseTIR()]
    mod = rx.transform.Sequential(steps)(mod)
    return {str(getattr(name, "name_hint", name)): f for name, f in mod.functions.items()
            if isinstance(f, PrimFunc)}


def _arrays(func, n: int) -> list:
    rng = np.random.default_rng(1)
    arrays = []
    for buf in func.buffer_params:
        env = {v: n for dim in buf.shape for v in tir.functor.collect(dim, lambda x: isinstance(x, tir.Var))}
        shape = [int(evaluate(dim, env)) for dim in buf.shape]
        values = rng.uniform(-1, 1, shape) if buf.dtype.startswith("float") else rng.integers(0, 3, shape)
        arrays.append(values.astype(buf.dtype))
    return arrays


@pytest.mark.slow
def test_decoder_kernels_on_opencl_and_nvrtc():
    require_opencl()
    funcs = _decoder_prim_funcs()
    assert funcs
    for name, func in funcs.items():
        scheduled = bind_everything(func, 64, 32)
        gfunc = check_on_opencl(scheduled, lambda n, f=func: _arrays(f, n), [1, 7], {"rtol": 1e-4, "atol": 1e-5})
        assert gfunc.kernels, name
