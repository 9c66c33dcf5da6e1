"""Stitching row reductions (fuse_partition.py): a reduction group absorbs a later
reduction when every member works one row at a time over the same rows."""
import numpy as np
import pytest

import relaxscript as rx
from tests.targets import COMPILED_TARGETS
from relaxscript.transform.fuse_partition import row_wise_params

from .fuse_helpers import count_call_tir, norm_scale_softmax_source


NORM_SCALE_SOFTMAX = norm_scale_softmax_source(64)

# the second reduction sums over rows (axis 0): every output row needs every input row
NORM_THEN_COLUMN_SUM = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 64), "float32"), g: R.Tensor((64,), "float32"), b: R.Tensor((64,), "float32")) -> R.Tensor((1, 64), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.nn.layer_norm(x, g, b, axes=-1)
            lv1 = R.sum(lv0, axis=[0], keepdims=True)
            R.output(lv1)
        return lv1
'''

# softmax over the rows' axis of a transposed layout: reads every row of its input
NORM_THEN_SOFTMAX_AXIS0 = NORM_SCALE_SOFTMAX.replace("R.nn.softmax(lv1, axis=-1)", "R.nn.softmax(lv1, axis=0)")


def _legal(source):
    return rx.transform.AnnotateTIROpPattern()(rx.transform.LegalizeOps()(rx.from_source(source)))


def _fused(source):
    fused = rx.transform.FuseTIR()(rx.transform.FuseOps()(_legal(source)))
    assert rx.analysis.well_formed(fused)
    return fused


def _inputs(rng, n):
    return [rng.standard_normal(s).astype("float32") for s in [(n, 64), (64,), (64,)]]


@pytest.mark.parametrize("target", COMPILED_TARGETS)
def test_norm_scale_softmax_is_one_kernel_with_equal_results(target):
    mod = rx.from_source(NORM_SCALE_SOFTMAX)
    fused = _fused(NORM_SCALE_SOFTMAX)
    assert count_call_tir(fused) == 1
    assert [r.pattern_kind for r in rx.analysis.fusion_table(fused)] == ["Reduction"]
    vm = rx.VirtualMachine(rx.build(rx.from_source(NORM_SCALE_SOFTMAX), target=target))["main"]
    rng = np.random.default_rng(7)
    for n in (1, 3, 17):
        args = _inputs(rng, n)
        expected = rx.interpret(mod, "main", *args)
        np.testing.assert_allclose(rx.interpret(fused, "main", *args), expected, rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(vm(*args), expected, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("source", [NORM_THEN_COLUMN_SUM, NORM_THEN_SOFTMAX_AXIS0])
def test_cross_row_reduction_is_not_stitched(source):
    fused = _fused(source)
    assert count_call_tir(fused) == 2
    mod = rx.from_source(source)
    args = _inputs(np.random.default_rng(3), 5)
    np.testing.assert_allclose(rx.interpret(fused, "main", *args), rx.interpret(mod, "main", *args),
                               rtol=1e-5, atol=1e-6)


def test_row_wise_params_tells_row_local_from_cross_row_kernels():
    legal = _legal(NORM_THEN_COLUMN_SUM)
    assert row_wise_params(legal["layer_norm"]) == [True, False, False]  # x whole rows; g, b broadcast
    # the column sum writes one (1, 64) row from all n input rows: x is not read whole-row-wise
    assert row_wise_params(legal["sum"]) == [False]
    axis0 = _legal(NORM_THEN_SOFTMAX_AXIS0)
    assert row_wise_params(axis0["softmax"]) is None
