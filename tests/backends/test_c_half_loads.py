"""Widening float16 loads: the C emitter reads the bits and converts them with integer and
float operations gcc vectorizes (it does not vectorize ``_Float16`` loads on AVX2); the result
must be exact for every one of the 65536 float16 values, and the loop vectorized."""
import numpy as np

import relaxscript as rx


def widen_module():
    return rx.IRModule({"main": rx.from_source("""
from relaxscript import R
@R.function
def main(x: R.Tensor(("n",), "float16")):
    with R.dataflow():
        y = R.astype(x, "float32")
        R.output(y)
    return y
""")})


def test_every_float16_value_widens_exactly():
    exe = rx.build(widen_module(), target="c")
    assert "rs_half_to_float(" in exe.c_library.source.split("rs_kernel", 1)[1]
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    got = rx.VirtualMachine(exe)["main"](halves)
    expected = halves.astype(np.float32)
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(got[~nan].view(np.uint32), expected[~nan].view(np.uint32))   # -0.0 included
