"""FuseAttention builds each distinct kernel once per run (fuse_attention.kernel_key): equal
attentions share one prim_func, attentions differing in scale or mask get their own, and the
fused module still computes what the unfused one does."""
from __future__ import annotations

import numpy as np

import relaxscript as rx
from relaxscript.expr import Call
from relaxscript.transform import FuseAttention
from relaxscript.transform.attention_kernel import AttentionMask, AttentionSpec
from relaxscript.transform.fuse_attention import kernel_key
from tensorir.functor import collect

SOURCE = '''
@R.ir_module
class Module:
    @R.function
    def main(q: R.Tensor((2, "n", 8), "float32"), kt: R.Tensor((2, 8, "m"), "float32"),
             v: R.Tensor((2, "m", 4), "float32"), mask: R.Tensor(("n", "m"), "float32")):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            s1 = R.matmul(q, kt)
            a1 = R.add(mask, R.multiply(s1, R.const(0.35, "float32")))
            o1 = R.matmul(R.nn.softmax(a1, axis=-1), v)
            s2 = R.matmul(q, kt)
            a2 = R.add(mask, R.multiply(s2, R.const(0.5, "float32")))
            o2 = R.matmul(R.nn.softmax(a2, axis=-1), v)
            s3 = R.matmul(q, kt)
            a3 = R.add(mask, R.multiply(s3, R.const(0.35, "float32")))
            o3 = R.matmul(R.nn.softmax(a3, axis=-1), v)
            s4 = R.matmul(q, kt)
            o4 = R.matmul(R.nn.softmax(R.multiply(s4, R.const(0.35, "float32")), axis=-1), v)
            out = (o1, o2, o3, o4)
            R.output(out)
        return out
'''


def test_equal_attentions_share_one_kernel_and_different_ones_do_not():
    mod = rx.from_source(SOURCE)
    fused = FuseAttention()(mod)
    calls = [c for c in collect(fused["main"], lambda e: isinstance(e, Call))
             if getattr(c.op, "name", "") == "relax.call_tir"]
    callees = [c.args[0].name_hint for c in calls]
    assert len(callees) == 4
    assert callees[0] == callees[2] and len(set(callees)) == 3
    assert len(fused.prim_funcs) == 3
    rng = np.random.default_rng(0)
    for n, m in ((1, 5), (3, 17)):
        args = [rng.standard_normal(s).astype("float32") for s in ((2, n, 8), (2, 8, m), (2, m, 4), (n, m))]
        for want, got in zip(rx.interpret(mod, "main", *args), rx.interpret(fused, "main", *args)):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_kernel_key_tells_specs_apart():
    dims = dict(B=2, N=None, D=8, M=None, DV=4)
    add = AttentionMask("add", ("N", "M"), "float32")
    base = kernel_key(AttentionSpec(dims, 0.35, add))
    assert kernel_key(AttentionSpec(dict(dims), 0.35, AttentionMask("add", ("N", "M"), "float32"))) == base
    assert kernel_key(AttentionSpec(dims, 0.5, add)) != base
    assert kernel_key(AttentionSpec(dims, 0.35, None)) != base
    assert kernel_key(AttentionSpec(dict(dims, DV=8), 0.35, add)) != base
