"""IRModules written the way TVM's printer writes them: ``@I.ir_module``,
``I.module_attrs``, ``I.module_global_infos``, ``cls = Module`` at the top of a
function and cross-function calls through ``cls``, ``T.handle`` prim_funcs.
Each entry: (name, source, function to run, inputs(rng, n), reference)."""
from __future__ import annotations

import numpy as np

ADD_ONE_MODULE = '''
# from tvm.script import ir as I
# from tvm.script import relax as R
# from tvm.script import tir as T

@I.ir_module
class Module:
    I.module_attrs({"system_lib_prefix": "demo_"})
    I.module_global_infos({"vdevice": [I.vdevice({"keys": ["cpu"], "kind": "llvm"}, 0, "global")]})

    @T.prim_func(private=True)
    def add_one(a: T.handle, b: T.handle):
        T.func_attr({"tir.noalias": T.bool(True)})
        n = T.int64()
        A = T.match_buffer(a, (n,))
        B = T.match_buffer(b, (n,))
        for i in range(n):
            with T.block("B"):
                vi = T.axis.spatial(n, i)
                T.reads(A[vi])
                T.writes(B[vi])
                B[vi] = A[vi] + T.float32(1)

    @R.function(private=True)
    def helper(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
        n = T.int64(is_size_var=True)
        cls = Module
        y = R.call_tir(cls.add_one, (x,), out_sinfo=R.Tensor((n,), dtype="float32"))
        return y

    @R.function
    def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
        n = T.int64()
        cls = Module
        with R.dataflow():
            y: R.Tensor((n,), dtype="float32") = cls.helper(x)
            z = R.multiply(y, y)
            R.output(z)
        return z
'''

MATMUL_BIAS_MODULE = '''
@I.ir_module
class Module:
    @T.prim_func
    def matmul(a: T.handle, b: T.handle, c: T.handle):
        T.func_attr({"global_symbol": "matmul", "tir.noalias": True})
        m = T.int64()
        A = T.match_buffer(a, (m, 8), "float32")
        B = T.match_buffer(b, (8, 4), "float32")
        C = T.match_buffer(c, (m, 4), "float32")
        for i, j, k in T.grid(m, 4, 8):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]

    @T.prim_func
    def bias_relu(c: T.handle, bias: T.handle, d: T.handle):
        T.func_attr({"global_symbol": "bias_relu", "tir.noalias": True})
        m = T.int64()
        C = T.match_buffer(c, (m, 4), "float32")
        Bias = T.match_buffer(bias, (4,), "float32")
        D = T.match_buffer(d, (m, 4), "float32")
        for i, j in T.grid(*C.shape):
            with T.block("D"):
                vi, vj = T.axis.remap("SS", [i, j])
                v: T.float32 = C[vi, vj] + Bias[vj]
                D[vi, vj] = T.max(v, T.float32(0))

    @R.function
    def main(x: R.Tensor(("m", 8), dtype="float32"), w: R.Tensor((8, 4), dtype="float32"),
             b: R.Tensor((4,), dtype="float32")) -> R.Tensor(("m", 4), dtype="float32"):
        m = T.int64()
        R.func_attr({"global_symbol": "main"})
        cls = Module
        with R.dataflow():
            lv = R.call_tir(cls.matmul, (x, w), out_sinfo=R.Tensor((m, 4), dtype="float32"))
            gv = R.call_tir(cls.bias_relu, (lv, b), out_sinfo=R.Tensor((m, 4), dtype="float32"))
            R.output(gv)
        return gv
'''


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype("float32")


MODULES = [
    ("add_one_module", ADD_ONE_MODULE, "main", lambda rng, n: [_f32(rng, n)],
     lambda x: (x + 1) * (x + 1)),
    ("matmul_bias_module", MATMUL_BIAS_MODULE, "main",
     lambda rng, n: [_f32(rng, n, 8), _f32(rng, 8, 4), _f32(rng, 4)],
     lambda x, w, b: np.maximum(x @ w + b, 0)),
]
