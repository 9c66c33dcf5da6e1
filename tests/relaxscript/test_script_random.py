"""Random well-formed modules built with the BlockBuilder round-trip through print/parse.

Programs chain unary, binary, reshape/flatten, reduction, permute, astype,
softmax, split and tuple ops over symbolic shapes (with facts), mix dataflow
and plain blocks, add match_casts that introduce fresh symbolic variables,
constants, and subgraph calls to a helper function of the module.
"""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from relaxscript import op
from relaxscript.script import print_module
from relaxscript.struct_info import TensorStructInfo

UNARY = [op.exp, op.negative, op.nn.relu, op.tanh, op.sigmoid, op.nn.silu, op.abs]
BINARY = [op.add, op.multiply, op.subtract, op.maximum]
REDUCE = [op.sum, op.mean, op.max]


def tensor_sinfo(var) -> TensorStructInfo:
    return var.struct_info


def add_helper(bb: rx.BlockBuilder) -> rx.GlobalVar:
    """``helper(x: (p, q)) -> (p * q,)``: flatten then relu, in a dataflow block."""
    p, q = tir.size_var("p"), tir.size_var("q")
    x = rx.Var("x", TensorStructInfo((p, q), "float32"))
    with bb.function("helper", [x]):
        with bb.dataflow():
            lv = bb.emit(op.flatten(x))
            gv = bb.emit_output(op.nn.relu(lv))
        bb.emit_func_output(gv)
    return bb.get().get_global_var("helper")


class ProgramDrawer:
    def __init__(self, draw, bb: rx.BlockBuilder, helper: rx.GlobalVar):
        self.draw, self.bb, self.helper = draw, bb, helper
        self.fresh = 0

    def step(self, pool: list) -> rx.Var:
        var = self.draw(st.sampled_from(pool))
        sinfo = tensor_sinfo(var)
        ndim, dtype = sinfo.ndim, sinfo.dtype
        kinds = ["unary", "binary", "const", "reshape", "astype", "tuple"]
        if ndim >= 1:
            kinds += ["reduce", "softmax", "match_cast"]
        if ndim >= 2:
            kinds += ["permute"]
        if ndim == 2 and dtype == "float32":
            kinds += ["call"]
        if ndim >= 1 and sinfo.shape is not None:
            kinds += ["split"]
        kind = self.draw(st.sampled_from(kinds))
        bb = self.bb
        if kind == "unary":
            return bb.emit(self.draw(st.sampled_from(UNARY))(var))
        if kind == "binary":
            same = [v for v in pool if tir.structural_equal(v.struct_info, sinfo, map_free_vars=False)]
            return bb.emit(self.draw(st.sampled_from(BINARY))(var, self.draw(st.sampled_from(same))))
        if kind == "const":
            value = np.asarray(self.draw(st.floats(-4, 4, width=16)), dtype=dtype)
            if self.draw(st.booleans()):
                value = value.reshape(1)  # broadcasts against any non-scalar tensor
            return bb.emit(op.add(var, rx.Constant(value)))
        if kind == "reshape":
            return bb.emit(op.flatten(var))
        if kind == "astype":
            return bb.emit(op.astype(var, self.draw(st.sampled_from(["float16", "float32"]))))
        if kind == "tuple":
            other = self.draw(st.sampled_from(pool))
            tup = bb.emit(rx.Tuple([var, other]))
            return bb.emit(rx.TupleGetItem(tup, self.draw(st.integers(0, 1))))
        if kind == "reduce":
            axis = self.draw(st.integers(-ndim, ndim - 1))
            fn = self.draw(st.sampled_from(REDUCE))
            return bb.emit(fn(var, axis=axis, keepdims=self.draw(st.booleans())))
        if kind == "softmax":
            return bb.emit(op.nn.softmax(var, axis=self.draw(st.integers(-ndim, ndim - 1))))
        if kind == "permute":
            return bb.emit(op.permute_dims(var, self.draw(st.permutations(range(ndim)))))
        if kind == "call":
            return bb.emit(rx.Call(self.helper, [var]))
        if kind == "split":
            return bb.emit(rx.TupleGetItem(bb.emit(op.split(var, 1, axis=0)), 0))
        # match_cast: forget the shape, then re-introduce it with a fresh variable
        self.fresh += 1
        k = tir.size_var(f"k{self.fresh}", upper=self.draw(st.sampled_from([None, 64])))
        coarse = bb.emit(op.unique(var)) if self.draw(st.booleans()) else var
        shape = (k,) if coarse is not var else (k,) + tuple(sinfo.shape[1:] if sinfo.shape else ())
        if coarse is var and sinfo.shape is None:
            shape = None
        return bb.match_cast(coarse, TensorStructInfo(shape, tensor_sinfo(coarse).dtype,
                                                      -1 if shape else tensor_sinfo(coarse).ndim))


@st.composite
def random_modules(draw):
    bb = rx.BlockBuilder()
    helper = add_helper(bb)
    n = tir.size_var("n", upper=draw(st.sampled_from([None, 4096])),
                     multiple_of=draw(st.sampled_from([None, 8])))
    m = tir.size_var("m")
    second = draw(st.sampled_from([4, m]))
    x = rx.Var("x", TensorStructInfo((n, second), "float32"))
    y = rx.Var("y", TensorStructInfo((n, second), "float32"))
    drawer = ProgramDrawer(draw, bb, helper)
    with bb.function("main", [x, y]):
        pool = [x, y]
        for _ in range(draw(st.integers(1, 3))):
            steps = draw(st.integers(1, 4))
            if draw(st.booleans()):
                with bb.dataflow():
                    local = list(pool)
                    for _ in range(steps):
                        local.append(drawer.step(local))
                    out = bb.emit_output(local[-1])
                pool.append(out)
            else:
                for _ in range(steps):
                    pool.append(drawer.step(pool))
        bb.emit_func_output(pool[-1])
    return bb.get()


@settings(max_examples=100, deadline=None)
@given(random_modules())
def test_random_modules_round_trip(mod):
    text = print_module(mod)
    parsed = rx.from_source(text)
    rx.assert_structural_equal(parsed, mod)
    assert print_module(parsed) == text
