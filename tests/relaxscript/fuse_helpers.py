"""Kernels and program builders shared by the fusion tests (test_fuse_*.py).

Every kernel works on float32 tensors of shape ``(rows, 4)`` with its own
symbolic ``rows`` var, so any kernel can consume any value of a program;
``b`` (4,) and ``w`` (4, 4) are extra parameters. The NumPy twin of each
kernel is the oracle for the random-program tests.
"""
from __future__ import annotations

import numpy as np

import relaxscript as rx
import tensorir as tir
from relaxscript.op import call_tir, reshape
from relaxscript.struct_info import TensorStructInfo
from tensorir import compute as te
from tensorir import expr as E
from tensorir.analysis import PatternKind, analyze_pattern

F32 = "float32"

_OPAQUE_SOURCE = '''
@T.prim_func
def flip_opaque(x: T.Buffer(("n", 4), "float32"), y: T.Buffer(("n", 4), "float32")):
    n = T.int64()
    for i, j in T.grid(n, 4):
        with T.block("flip"):
            vi, vj = T.axis.remap("SS", [i, j])
            y[vi, 3 - vj] = x[vi, vj] * T.float32(2)
'''


def _unary(name, fn):
    n = tir.size_var("n")
    x = te.placeholder((n, 4), F32, "x")
    return te.create_prim_func([x, te.compute((n, 4), lambda i, j: fn(x[i, j]), "y")], name=name)


def _binary(name, other_shape, fn):
    n = tir.size_var("n")
    x = te.placeholder((n, 4), F32, "x")
    o = te.placeholder(other_shape(n), F32, "o")
    return te.create_prim_func([x, o, te.compute((n, 4), lambda i, j: fn(x, o, i, j), "y")], name=name)


def _rownorm():
    n = tir.size_var("n")
    x = te.placeholder((n, 4), F32, "x")
    k = te.reduce_axis(4, "k")
    s = te.compute((n,), lambda i: te.reduce_sum(x[i, k], [k]), "s")
    y = te.compute((n, 4), lambda i, j: x[i, j] - s[i] * tir.FloatImm(0.25, F32), "y")
    return te.create_prim_func([x, y], name="rownorm", intermediates=[s])


def _matmul():
    n = tir.size_var("n")
    x = te.placeholder((n, 4), F32, "x")
    w = te.placeholder((4, 4), F32, "w")
    k = te.reduce_axis(4, "k")
    y = te.compute((n, 4), lambda i, j: te.reduce_sum(x[i, k] * w[k, j], [k]), "y")
    return te.create_prim_func([x, w, y], name="mm")


def make_kernels() -> dict:
    """name -> (prim_func, operand kinds ("v" value, "b" bias, "w" weight), NumPy twin)."""
    f = lambda v: tir.FloatImm(v, F32)  # noqa: E731
    kernels = {
        "relu": (_unary("relu", lambda v: E.max_(v, f(0.0))), "v", lambda a: np.maximum(a, 0)),
        "scale": (_unary("scale", lambda v: v * f(0.5) + f(0.25)), "v", lambda a: a * 0.5 + 0.25),
        "add": (_binary("add", lambda n: (n, 4), lambda x, o, i, j: x[i, j] + o[i, j]), "vv",
                lambda a, b: a + b),
        "bias": (_binary("bias", lambda n: (4,), lambda x, o, i, j: x[i, j] + o[j]), "vb",
                 lambda a, b: a + b),
        "flip": (_unary_injective(), "v", lambda a: a[:, ::-1]),
        "rownorm": (_rownorm(), "v", lambda a: a - a.sum(axis=1, keepdims=True) * 0.25),
        "mm": (_matmul(), "vw", lambda a, w: a @ w),
        "flip_opaque": (tir.from_source(_OPAQUE_SOURCE), "v", lambda a: a[:, ::-1] * 2),
    }
    return kernels


def _unary_injective():
    n = tir.size_var("n")
    x = te.placeholder((n, 4), F32, "x")
    return te.create_prim_func([x, te.compute((n, 4), lambda i, j: x[i, 3 - j], "y")], name="flip")


EXPECTED_KINDS = {"relu": PatternKind.ElementWise, "scale": PatternKind.ElementWise,
                  "add": PatternKind.ElementWise, "bias": PatternKind.ElementWise,
                  "flip": PatternKind.Injective, "rownorm": PatternKind.Reduction,
                  "mm": PatternKind.OutputWiseFusible, "flip_opaque": PatternKind.Opaque}


def check_kernel_kinds(kernels) -> None:
    for name, (func, _, _) in kernels.items():
        assert analyze_pattern(func) == EXPECTED_KINDS[name], name


def build_program(steps, flatten: bool, cast_at: int | None, outputs):
    """A module whose ``main(x, b, w)`` runs ``steps`` = [(kernel, operand indices)] in one
    dataflow block. ``flatten``: x is (n, 8) reshaped to (n * 2, 4) first (shapes
    become expressions); ``cast_at``: before that step, match_cast the newest
    value to a fresh (m, 4) and continue in m. ``outputs``: indices of values
    returned (a tuple when several). Returns (module, NumPy oracle)."""
    kernels = make_kernels()
    bb = rx.BlockBuilder()
    n, m = tir.size_var("n"), tir.size_var("m")
    x = rx.Var("x", TensorStructInfo((n, 8) if flatten else (n, 4), F32))
    b = rx.Var("b", TensorStructInfo((4,), F32))
    w = rx.Var("w", TensorStructInfo((4, 4), F32))
    gvars = {name: bb.add_func(func, name) for name, (func, _, _) in kernels.items()}
    with bb.function("main", [x, b, w]):
        with bb.dataflow():
            rows = n * 2 if flatten else n
            values = [bb.emit(reshape(x, (rows, 4)), "xf")] if flatten else [x]
            for index, (name, operands) in enumerate(steps):
                if index == cast_at:
                    rows = m
                    values.append(bb.match_cast(values[-1], TensorStructInfo((m, 4), F32), "mc"))
                    operands = [len(values) - 1] + list(operands[1:])
                args = _operands(kernels[name][1], operands, values, b, w)
                values.append(bb.emit(call_tir(gvars[name], args, TensorStructInfo((rows, 4), F32)), "lv"))
            picked = [values[i % len(values)] for i in outputs]
            out = bb.emit_output(picked[0] if len(picked) == 1 else rx.Tuple(picked), "gv")
        bb.emit_func_output(out)
    mod = bb.get()

    def oracle(xv, bv, wv):
        vals = [xv.reshape(-1, 4)]
        for index, (name, operands) in enumerate(steps):
            if index == cast_at:
                vals.append(vals[-1])
                operands = [len(vals) - 1] + list(operands[1:])
            _, kinds, twin = kernels[name]
            args = [{"v": lambda i: vals[i % len(vals)], "b": lambda i: bv, "w": lambda i: wv}[k](i)
                    for k, i in zip(kinds, operands)]
            vals.append(twin(*args).astype(F32))
        picked = [vals[i % len(vals)] for i in outputs]
        return picked[0] if len(picked) == 1 else tuple(picked)
    return mod, oracle


def _operands(kinds, operands, values, b, w):
    args = []
    for kind, index in zip(kinds, operands):
        args.append({"v": values[index % len(values)], "b": b, "w": w}[kind])
    return args


def random_inputs(rng, n: int, flatten: bool):
    x = rng.standard_normal((n, 8) if flatten else (n, 4)).astype(F32)
    return x, rng.standard_normal(4).astype(F32), rng.standard_normal((4, 4)).astype(F32)


def assert_same(actual, expected, rtol=1e-5, atol=1e-5) -> None:
    if isinstance(expected, tuple):
        assert isinstance(actual, tuple) and len(actual) == len(expected)
        for a, e in zip(actual, expected):
            np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
    else:
        np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol)


def count_call_tir(mod, func: str = "main") -> int:
    from tensorir.functor import collect
    return len(collect(mod[func], lambda c: isinstance(c, rx.Call)
                       and getattr(c.op, "name", None) == "relax.call_tir"))


def count_kernel_calls(mod, func: str = "main") -> int:
    """call_tir sites plus calls of primitive subgraph functions (each one kernel)."""
    from tensorir.functor import collect
    calls = collect(mod[func], lambda c: isinstance(c, rx.Call))
    return sum(1 for c in calls if getattr(c.op, "name", None) == "relax.call_tir"
               or (isinstance(c.op, rx.GlobalVar) and mod[c.op.name_hint].attrs.get("primitive")))


def norm_scale_softmax_source(width: int) -> str:
    """layer_norm -> * 0.125 -> softmax over ``(n, width)``: the issue's chain (b)."""
    return f'''
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", {width}), "float32"), g: R.Tensor(({width},), "float32"),
             b: R.Tensor(({width},), "float32")) -> R.Tensor(("n", {width}), "float32"):
        n = T.int64()
        with R.dataflow():
            lv0 = R.nn.layer_norm(x, g, b, axes=-1)
            lv1 = R.multiply(lv0, R.const(0.125, "float32"))
            lv2 = R.nn.softmax(lv1, axis=-1)
            R.output(lv2)
        return lv2
'''
