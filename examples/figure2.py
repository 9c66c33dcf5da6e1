"""Figure 2 of the Relax paper in relaxscript's script form.

The graph-level ``main`` calls a loop-level prim_func (``call_tir``), a
library function (``call_dps_library``) and a graph-level subfunction, and
splits the result; every intermediate annotation is deduced symbolically
(``lv2: (n * 4,)``, ``lv3: Tuple((n * 2,), (n * 2,))``).

Run: ``python examples/figure2.py`` — parses the module, prints it (every
binding with its deduced annotation), checks that the printed text parses
back to an equal module, and runs it with the reference interpreter.
"""
import numpy as np

import relaxscript as rx
from backends.library import UnknownLibraryError, get_library, register_library
from relaxscript import R, function, ir_module
from tensorir import T, prim_func

RMS_NORM = "cutlass.rms_norm"


def rms_norm(x: np.ndarray, epsilon: float = 1e-5) -> np.ndarray:
    """NumPy stand-in for the CUTLASS kernel the figure calls."""
    scale = np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + epsilon)
    return (x / scale).astype(x.dtype)


@ir_module
class Module:
    @prim_func
    def exp(X: T.Buffer(("n", 4), "float32"), Y: T.Buffer(("n", 4), "float32")):
        n = T.int64()
        for i, j in T.grid(n, 4):
            with T.block("exp"):
                vi, vj = T.axis.remap("SS", [i, j])
                Y[vi, vj] = T.exp(X[vi, vj])

    @function
    def main(x: R.Tensor(("n", 4), "f32")) -> R.Tensor(("n * 2",), "f32"):
        n = R.sym_var()
        with R.dataflow():
            lv0 = R.call_tir(Module.exp, [x], R.Tensor((n, 4), "f32"))
            lv1 = R.call_dps_library("cutlass.rms_norm", [lv0], R.Tensor((n, 4), "f32"))
            f0 = Module.subfunc
            lv2 = f0(lv1)
            lv3 = R.split(lv2, indices_or_sections=2)
            lv4 = lv3[0]
            R.output(lv4)
        return lv4

    @function
    def subfunc(x: R.Tensor(("n", 4), "f32")) -> R.Tensor(("n * 4",), "f32"):
        n = R.sym_var()
        with R.dataflow():
            lv0 = R.flatten(x)
            lv1 = R.nn.relu(lv0)
            R.output(lv1)
        return lv1


def reference(x: np.ndarray) -> np.ndarray:
    flat = np.maximum(rms_norm(np.exp(x)).reshape(-1), 0)
    return flat[: flat.shape[0] // 2]


def main() -> None:
    text = Module.script()
    print(text)
    rx.assert_structural_equal(rx.from_source(text), Module)
    print("round trip: the printed text parses back to an equal module")

    try:
        get_library(RMS_NORM)
    except UnknownLibraryError:
        register_library(RMS_NORM, rms_norm)
    for n in (1, 3, 8):
        x = np.random.default_rng(n).standard_normal((n, 4)).astype("float32")
        out = rx.interpret(Module, "main", x)
        np.testing.assert_allclose(out, reference(x), rtol=1e-5, atol=1e-6)
        print(f"n = {n}: main(x) has shape {out.shape} and matches NumPy")


if __name__ == "__main__":
    main()
