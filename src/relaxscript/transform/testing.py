"""Utilities for testing passes: random well-formed modules and a preservation check.

``random_dataflow_module(draw)`` builds (with hypothesis' ``draw``, e.g. inside
``@st.composite`` or from ``st.data()``) a module whose ``main`` takes tensors
with symbolic dims ``n``, ``m`` and chains elementwise ops, broadcast binaries,
reshape, permute_dims, sum/max reductions, full sum/max/mean reductions
followed by an elementwise op, softmax, matmul, split/concat,
constants (also constant-only chains), subgraph calls, match_casts (provable
and not), trivial var-to-var copies, tuple literals indexed back, and leaves
dead bindings and an unreachable function behind, so that every cleanup pass
has something to do. ``dataflow_modules()`` is the same as a strategy.

``assert_pass_preserves(pass_, mod)`` runs the pass and checks: the input is
not mutated, the output is well-formed, prints and parses back to an equal
module that prints the same text, and the reference interpreter gives the same results on random
inputs for several random values of the symbolic variables.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import tensorir as tir
from tensorir.structural import assert_structural_equal, structural_hash

from .. import op
from ..block_builder import BlockBuilder
from ..expr import Call, Constant, GlobalVar, Tuple, TupleGetItem, Var
from ..irmodule import IRModule
from ..struct_info import TensorStructInfo
from .pass_check import _same, public_functions, random_inputs

_UNARY = [op.exp, op.negative, op.nn.relu, op.tanh, op.sigmoid, op.abs]
_BINARY = [op.add, op.multiply, op.subtract, op.maximum]


def _add_helpers(bb: BlockBuilder) -> GlobalVar:
    """``helper(x: (p, q)) -> (p * q,)`` and an unreachable ``unused_helper``."""
    for name in ("helper", "unused_helper"):
        p, q = tir.size_var("p"), tir.size_var("q")
        x = Var("x", TensorStructInfo((p, q), "float32"))
        with bb.function(name, [x]):
            with bb.dataflow():
                lv = bb.emit(op.flatten(x))
                gv = bb.emit_output(op.nn.relu(lv))
            bb.emit_func_output(gv)
    return bb.get().get_global_var("helper")


class _Drawer:
    def __init__(self, draw, bb: BlockBuilder, helper: GlobalVar):
        self.draw, self.bb, self.helper = draw, bb, helper
        self.fresh = 0

    def _small_constant(self) -> Constant:
        value = self.draw(st.floats(-2, 2, width=16, allow_nan=False))
        return Constant(np.asarray([value], dtype="float32"))

    def step(self, pool: list) -> Var:
        draw, bb = self.draw, self.bb
        var = draw(st.sampled_from(pool))
        ndim = var.struct_info.ndim
        kinds = ["unary", "binary", "broadcast", "const_chain", "copy", "tuple", "flatten"]
        if ndim >= 1:
            kinds += ["reduce", "full_reduce", "softmax", "match_cast", "concat_split"]
        if ndim == 2:
            kinds += ["permute", "matmul", "call"]
        kind = draw(st.sampled_from(kinds))
        if kind == "unary":
            return bb.emit(draw(st.sampled_from(_UNARY))(var))
        if kind == "binary":
            same = [v for v in pool if tir.structural_equal(v.struct_info, var.struct_info, map_free_vars=False)]
            return bb.emit(draw(st.sampled_from(_BINARY))(var, draw(st.sampled_from(same))))
        if kind == "broadcast":
            if ndim == 0:
                return bb.emit(op.add(var, self._small_constant()))
            reduced = bb.emit(op.sum(var, axis=draw(st.integers(0, ndim - 1)), keepdims=True))
            return bb.emit(draw(st.sampled_from(_BINARY))(var, reduced))
        if kind == "const_chain":  # constant-only computation: FoldConstant's food
            folded = bb.emit(op.exp(self._small_constant()))
            folded = bb.emit(op.multiply(folded, self._small_constant()))
            return bb.emit(op.add(var, folded))
        if kind == "copy":
            return bb.emit(var)
        if kind == "tuple":
            other = draw(st.sampled_from(pool))
            tup = bb.emit(Tuple([var, other]))
            return bb.emit(TupleGetItem(tup, draw(st.integers(0, 1))))
        if kind == "flatten":
            return bb.emit(op.flatten(var))
        if kind == "reduce":
            fn = draw(st.sampled_from([op.sum, op.max]))
            return bb.emit(fn(var, axis=draw(st.integers(-ndim, ndim - 1)), keepdims=draw(st.booleans())))
        if kind == "full_reduce":  # every axis at once, then an op on the (0-d or all-ones) result
            fn = draw(st.sampled_from([op.sum, op.max, op.mean]))
            reduced = bb.emit(fn(var, keepdims=draw(st.booleans())))
            return bb.emit(draw(st.sampled_from(_UNARY))(reduced))
        if kind == "softmax":
            return bb.emit(op.nn.softmax(var, axis=draw(st.integers(-ndim, ndim - 1))))
        if kind == "permute":
            return bb.emit(op.permute_dims(var, draw(st.permutations(range(ndim)))))
        if kind == "matmul":
            return bb.emit(op.matmul(var, bb.emit(op.permute_dims(var, [1, 0]))))
        if kind == "call":
            return bb.emit(Call(self.helper, [var]))
        if kind == "concat_split":
            joined = bb.emit(op.concat([var, var], axis=0))
            parts = bb.emit(op.split(joined, 2, axis=0))
            return bb.emit(TupleGetItem(parts, draw(st.integers(0, 1))))
        return self._match_cast(var)

    def _match_cast(self, var: Var) -> Var:
        """Either a provable cast to the same shape, or forgetting the shape and matching a fresh var."""
        sinfo = var.struct_info
        if self.draw(st.booleans()):
            return self.bb.match_cast(var, TensorStructInfo(sinfo.shape, sinfo.dtype))
        self.fresh += 1
        k = tir.size_var(f"k{self.fresh}")
        coarse = self.bb.emit(op.flatten(var)) if sinfo.ndim != 1 else var
        return self.bb.match_cast(coarse, TensorStructInfo((k,), sinfo.dtype))


def random_dataflow_module(draw, max_blocks: int = 3, max_steps: int = 4) -> IRModule:
    """A random well-formed module (see the module docstring); ``draw`` is hypothesis' draw."""
    bb = BlockBuilder()
    helper = _add_helpers(bb)
    n = tir.size_var("n")
    m = tir.size_var("m")
    second = draw(st.sampled_from([3, m]))
    x = Var("x", TensorStructInfo((n, second), "float32"))
    y = Var("y", TensorStructInfo((n, second), "float32"))
    drawer = _Drawer(draw, bb, helper)
    with bb.function("main", [x, y]):
        pool = [x, y]
        for _ in range(draw(st.integers(1, max_blocks))):
            steps = draw(st.integers(1, max_steps))
            if draw(st.booleans()):
                with bb.dataflow():
                    local = list(pool)
                    for _ in range(steps):
                        local.append(drawer.step(local))
                    outputs = [bb.emit_output(local[-1])]
                    if draw(st.booleans()):  # an output that is a plain copy of another
                        outputs.append(bb.emit_output(outputs[0]))
                pool.extend(outputs)
            else:
                for _ in range(steps):
                    pool.append(drawer.step(pool))
        result = pool[-1] if draw(st.booleans()) else Tuple([pool[-1], pool[-2]])
        bb.emit_func_output(result)
    return bb.get()


@st.composite
def dataflow_modules(draw, max_blocks: int = 3, max_steps: int = 4):
    return random_dataflow_module(draw, max_blocks, max_steps)


def assert_pass_preserves(pass_, mod: IRModule, samples: int = 3, seed: int = 0,
                          rtol: float = 1e-4, atol: float = 1e-5) -> IRModule:
    """Run ``pass_`` on ``mod`` and check what every pass must keep (see the module docstring).

    Returns the transformed module. Raises AssertionError naming the pass and the failed check.
    """
    from ..analysis import check_well_formed
    from ..interpreter import interpret
    from ..script.parser import from_source
    name = getattr(pass_, "name", type(pass_).__name__)
    text_before, hash_before = mod.script(), structural_hash(mod)
    after = pass_(mod)
    assert mod.script() == text_before and structural_hash(mod) == hash_before, \
        f"pass {name} mutated its input module"
    check_well_formed(after)
    text_after = after.script()
    again = from_source(text_after)
    try:
        assert_structural_equal(again, after)
    except AssertionError as err:
        raise AssertionError(f"output of pass {name} does not round-trip through print/parse: {err}") from err
    assert again.script() == text_after, f"output of pass {name} prints differently after print/parse"
    rng = np.random.default_rng(seed)
    for func_name in public_functions(mod):
        assert func_name in after, f"pass {name} removed the public function {func_name!r}"
        for _ in range(samples):
            args = random_inputs(mod[func_name], rng)
            expected = interpret(mod, func_name, *args)
            actual = interpret(after, func_name, *args)
            assert _same(expected, actual, rtol, atol), (
                f"pass {name} changed the result of {func_name!r} for inputs of shapes "
                f"{[getattr(a, 'shape', a) for a in args]}")
    return after


__all__ = ["random_dataflow_module", "dataflow_modules", "assert_pass_preserves"]
