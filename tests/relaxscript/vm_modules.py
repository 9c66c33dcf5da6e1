"""Graph-level modules the VM tests build, with input makers for sizes ``n``, ``m``."""
import numpy as np

import relaxscript as rx

from tests.relaxscript.design_module import DESIGN_TEXT

HEADER = "from relaxscript import R\nfrom tensorir import T\n"

ELEMENTWISE = HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("m",), "float32")) -> R.Tensor(("n", "m"), "float32"):
        with R.dataflow():
            a = R.add(x, y)
            b = R.exp(a)
            c = R.multiply(b, x)
            d = R.nn.relu(c)
            e = R.subtract(d, y)
            R.output(e)
        return e
'''

MLP = HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 8), "float32"), w1: R.Tensor((8, 16), "float32"), b1: R.Tensor((16,), "float32"),
             w2: R.Tensor((16, 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        with R.dataflow():
            h = R.matmul(x, w1)
            h1 = R.add(h, b1)
            h2 = R.nn.relu(h1)
            out = R.matmul(h2, w2)
            R.output(out)
        return out
'''

NORMS = HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), g: R.Tensor(("m",), "float32"), b: R.Tensor(("m",), "float32")):
        with R.dataflow():
            s = R.nn.softmax(x, axis=-1)
            ln = R.nn.layer_norm(x, g, b, axes=[-1], epsilon=1e-5)
            out = R.add(s, ln)
            R.output(out, s)
        return (out, s)
'''

RESHAPE = HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32")) -> R.Tensor(("m", "n * 2"), "float32"):
        n = T.int64()
        m = T.int64()
        with R.dataflow():
            t = R.permute_dims(x, [1, 0])
            c = R.concat([t, t], axis=1)
            r = R.reshape(c, R.shape([m, n * 2]))
            out = R.multiply(r, r)
            R.output(out)
        return out
'''

SUBGRAPH = HEADER + DESIGN_TEXT

UNIQUE = HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "int64")):
        m = T.int64()
        with R.dataflow():
            u = R.unique(x)
            v = R.match_cast(u, R.Tensor((m,), "int64"))
            w = R.add(v, v)
            s = R.shape_of(w)
            R.output(w, s)
        return (w, s)
'''

STATIC_CHAIN_LENGTH = 100


def chain_module(length: int = STATIC_CHAIN_LENGTH, dim="n"):
    """``length`` tiny elementwise ops in a row (the overhead benchmark)."""
    lines = [f"            a{i + 1} = R.{'add' if i % 2 else 'multiply'}(a{i}, a{i})" for i in range(length)]
    shape = f'("{dim}",)' if isinstance(dim, str) else f"({dim},)"
    text = HEADER + f'''
@R.ir_module
class Module:
    @R.function
    def main(a0: R.Tensor({shape}, "float32")):
        with R.dataflow():
''' + "\n".join(lines) + f'''
            R.output(a{length})
        return a{length}
'''
    return rx.from_source(text)


def parse(text):
    return rx.from_source(text)


def inputs_for(name: str, rng: np.random.Generator, n: int, m: int):
    f32 = lambda *s: rng.standard_normal(s).astype("float32")  # noqa: E731
    if name == "ELEMENTWISE":
        return [f32(n, m), f32(m)]
    if name == "MLP":
        return [f32(n, 8), f32(8, 16), f32(16), f32(16, 4)]
    if name == "NORMS":
        return [f32(n, m), f32(m), f32(m)]
    if name == "RESHAPE":
        return [f32(n, m)]
    if name == "SUBGRAPH":
        return [f32(n, 4)]
    if name == "UNIQUE":
        return [rng.integers(0, max(1, m), size=n).astype("int64")]
    raise KeyError(name)


MODULES = {"ELEMENTWISE": ELEMENTWISE, "MLP": MLP, "NORMS": NORMS, "RESHAPE": RESHAPE,
           "SUBGRAPH": SUBGRAPH, "UNIQUE": UNIQUE}
