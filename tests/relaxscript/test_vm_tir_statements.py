"""A prim_func with a while loop, an assert and vector code, called from a Relax function: the VM
runs it on every CPU target, and a failing assert reaches the caller as an exception."""
import numpy as np
import pytest

import relaxscript as rx
from tensorir.errors import KernelAssertionError

SOURCE = '''
@R.ir_module
class M:
    @T.prim_func
    def scale_prefix(x: T.Buffer(("n",), "float32"), out: T.Buffer(("n",), "float32")):
        n = T.int64()
        assert n % 4 == 0, "the length must be a multiple of 4"
        k = T.decl_buffer((1,), "int64")
        k[0] = T.int64(0)
        while k[0] < n and x[k[0]] > T.float32(0):
            k[0] = k[0] + 1
        for i in range(n // 4):
            out[T.Ramp(i * 4, 1, 4)] = x[T.Ramp(i * 4, 1, 4)] * T.Broadcast(T.Cast("float32", k[0]), 4)

    @R.function
    def main(x: R.Tensor(("n",), "float32")) -> R.Tensor(("n",), "float32"):
        n = T.int64()
        with R.dataflow():
            y = R.call_tir(M.scale_prefix, (x,), out_sinfo=R.Tensor((n,), "float32"))
            R.output(y)
        return y
'''


@pytest.fixture(scope="module", params=["c", "interp", "opencl"])
def vm(request):
    return rx.VirtualMachine(rx.build(rx.from_source(SOURCE), target=request.param))


@pytest.mark.parametrize("seed", range(4))
def test_results_match_numpy(vm, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(4 * int(rng.integers(1, 9))).astype("float32")
    x[: int(rng.integers(0, len(x)))] = np.abs(x[:1]) + 1   # a positive prefix of random length
    positive = x > 0
    run = len(x) if positive.all() else int(np.argmin(positive))
    np.testing.assert_allclose(np.asarray(vm["main"](x)), x * np.float32(run), rtol=1e-6)


def test_a_failing_assert_raises_from_the_vm(vm):
    with pytest.raises(KernelAssertionError, match="the length must be a multiple of 4"):
        vm["main"](np.ones(6, "float32"))
