"""The default GPU schedules, lowered by backends/gpu and run as OpenCL on
PoCL's CPU device, give the NumPy reference results for n = 1 and extents
the thread counts do not divide."""
from __future__ import annotations

import numpy as np
import pytest

from tensorir.schedule_rules.gpu import GPU_RULE_ATTR, default_gpu_schedule
from tests.tensorir.test_gpu_schedule_rules import _norm_softmax_numpy, gemv_func, stitched_norm_softmax
from tests.tensorir.test_gpu_schedule_rules_expected import column_sum_scale, masked_row_sum
from tests.tensorir.test_schedule_rules_kernels import KERNELS

pytest.importorskip("pyopencl", reason="pyopencl with PoCL runs the OpenCL kernels (the opencl extra)")


def _cases():
    rng = np.random.default_rng(0)
    for name in ("add_gelu", "layer_norm", "softmax", "matmul", "matmul_bias"):
        build, make_args, reference = KERNELS[name]
        yield name, build(80), lambda n, m=make_args: [a.astype("f4") for a in m(rng, n, 80)], reference
    yield ("norm_softmax", stitched_norm_softmax(100),
           lambda n: [rng.standard_normal((n, 100)).astype("f4")], _norm_softmax_numpy)
    yield ("gemv_transposed", gemv_func(96, 40, True),
           lambda n: [rng.standard_normal((1, 96)).astype("f4"), rng.standard_normal((40, 96)).astype("f4")],
           lambda a, w: a @ w.T)
    # a predicated cross-thread reduction, and the fallback's two launches
    yield ("masked_row_sum", masked_row_sum, lambda n: [rng.standard_normal(n).astype("f4")], np.cumsum)
    yield ("column_sum_scale", column_sum_scale, lambda n: [rng.standard_normal((8, n)).astype("f4")],
           lambda x: 2 * x.sum(0))
    yield ("gemv", gemv_func(300, 40, False),
           lambda n: [rng.standard_normal((1, 300)).astype("f4"), rng.standard_normal((300, 40)).astype("f4")],
           lambda a, w: a @ w)


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: c[0])
def test_scheduled_kernels_run_on_opencl(case):
    from backends.gpu import lower_for_gpu
    from backends.opencl.codegen import opencl_source
    from tests.backends.gpu_launch import run_opencl
    name, func, make_args, reference = case
    scheduled = default_gpu_schedule(func)
    gpu_func = lower_for_gpu(func.name, scheduled)
    # one launch per function (norm -> softmax included), but the fallback's stage per launch
    assert len(gpu_func.kernels) == (2 if scheduled.attrs[GPU_RULE_ATTR] == "fallback" else 1)
    source = opencl_source([gpu_func])
    for n in (1, 5, 33, 300):
        args = make_args(n)
        want = reference(*args).astype("f4")
        got = np.zeros_like(want)
        assert run_opencl(gpu_func, source, [*args, got]) == 0
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-5, err_msg=f"{name}, n={n}")


def test_decoder_kernels_run_on_opencl():
    """The demo decoder's kernels against the interpreter."""
    from backends.gpu import lower_for_gpu
    from backends.opencl.codegen import opencl_source
    from tests.backends.gpu_launch import run_opencl
    from tests.tensorir.test_gpu_schedule_rules import _decoder_kernels
    from tests.tensorir.test_schedule_util import make_arrays, run
    rng = np.random.default_rng(5)
    checked = 0
    for name, func in _decoder_kernels().items():
        scheduled = default_gpu_schedule(func)
        gpu_func = lower_for_gpu(name, scheduled)
        source = opencl_source([gpu_func])
        sym_names = {v.name for v in gpu_func.sym_vars}
        for value in (1, 7):
            sizes = {s: value for s in sym_names}
            arrays = make_arrays(func, sizes, rng)
            expected = run(func, arrays, sizes)
            got = [a.copy() for a in arrays]
            assert run_opencl(gpu_func, source, got, sizes) == 0
            np.testing.assert_allclose(got[-1], expected[-1], rtol=1e-4, atol=1e-5, err_msg=f"{name}, {sizes}")
        checked += 1
    assert checked == 10
