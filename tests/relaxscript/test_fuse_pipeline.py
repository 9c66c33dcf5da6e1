"""Measured cases through LegalizeOps -> AnnotateTIROpPattern -> FuseOps -> FuseTIR:
kernel counts before/after, and unchanged results for several values of n."""
import numpy as np

import relaxscript as rx

from .fuse_helpers import count_call_tir, norm_scale_softmax_source


MLP = '''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w1: R.Tensor((16, 32), "float32"), b1: R.Tensor((32,), "float32"),
             w2: R.Tensor((32, 16), "float32"), b2: R.Tensor((16,), "float32")) -> R.Tensor(("n", 16), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.matmul(x, w1)
            lv1 = R.add(lv0, b1)
            lv2 = R.nn.gelu(lv1)
            lv3 = R.matmul(lv2, w2)
            lv4 = R.add(lv3, b2)
            lv5 = R.add(lv4, x)
            R.output(lv5)
        return lv5
'''

NORM_SOFTMAX = norm_scale_softmax_source(4096)


def _pipeline(source):
    mod = rx.from_source(source)
    legal = rx.transform.AnnotateTIROpPattern()(rx.transform.LegalizeOps()(mod))
    fused = rx.transform.FuseTIR()(rx.transform.FuseOps()(legal))
    rx.assert_structural_equal(rx.from_source(fused.script()), fused)
    assert rx.analysis.well_formed(fused)
    return mod, legal, fused


def test_mlp_fuses_into_two_kernels():
    mod, legal, fused = _pipeline(MLP)
    assert count_call_tir(legal) == 6
    assert count_call_tir(fused) == 2
    assert [r.pattern_kind for r in rx.analysis.fusion_table(fused)] == ["OutputWiseFusible"] * 2
    rng = np.random.default_rng(0)
    params = [rng.standard_normal(s).astype("float32") for s in [(16, 32), (32,), (32, 16), (16,)]]
    for n in (1, 3):
        x = rng.standard_normal((n, 16)).astype("float32")
        expected = rx.interpret(mod, "main", x, *params)
        np.testing.assert_allclose(rx.interpret(fused, "main", x, *params), expected, rtol=1e-4, atol=1e-4)


def test_layer_norm_scale_softmax_stitches_into_one_kernel():
    mod, legal, fused = _pipeline(NORM_SOFTMAX)
    assert count_call_tir(legal) == 3
    assert count_call_tir(fused) == 1  # both row reductions stitched (see fuse_partition.py)
    assert {r.pattern_kind for r in rx.analysis.fusion_table(fused)} == {"Reduction"}
    rng = np.random.default_rng(1)
    g, b = (rng.standard_normal(4096).astype("float32") for _ in range(2))
    for n in (1, 2):
        x = rng.standard_normal((n, 4096)).astype("float32")
        np.testing.assert_allclose(rx.interpret(fused, "main", x, g, b), rx.interpret(mod, "main", x, g, b),
                                   rtol=1e-4, atol=1e-6)
