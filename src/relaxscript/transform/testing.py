"""Utilities for testing passes: random well-formed modules and a preservation check.

``random_dataflow_module(draw)`` builds (with hypothesis' ``draw``, e.g. inside
``@st.composite`` or from ``st.data()``) a module whose ``main`` takes tensors
with symbolic dims ``n``, ``m`` and chains elementwise ops, broadcast binaries,
reshape, permute_dims, sum/max reductions, full sum/max/mean reductions
followed by an elementwise op, softmax, matmul, matmuls sharing their left operand with constant weights, split/concat,
constants (also constant-only chains), subgraph calls, match_casts (provable
and not), comparisons joined by logical and / or / xor / not choosing through
``where``, detours through int32 / int64 (division, floor division and floor
modulo of negative values by constants), trivial var-to-var copies, tuple
literals indexed back, and leaves
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
from .pass_check import _same, check_kept_privacy, public_functions, random_inputs

_UNARY = [op.exp, op.negative, op.nn.relu, op.tanh, op.sigmoid, op.abs]
_BINARY = [op.add, op.multiply, op.subtract, op.maximum]
_COMPARE = [op.less, op.less_equal, op.greater, op.greater_equal, op.equal, op.not_equal]
_LOGICAL = [op.logical_and, op.logical_or, op.logical_xor]


def _add_helpers(bb: BlockBuilder) -> GlobalVar:
    """``helper(x: (p, q)) -> (p * q,)`` and an unreachable ``unused_helper``, both private (as a
    script's ``@R.function(private=True)``: every pass must keep the flag)."""
    for name in ("helper", "unused_helper"):
        p, q = tir.size_var("p"), tir.size_var("q")
        x = Var("x", TensorStructInfo((p, q), "float32"))
        with bb.function(name, [x], private=True):
            with bb.dataflow():
                lv = bb.emit(op.flatten(x))
                gv = bb.emit_output(op.nn.relu(lv))
            bb.emit_func_output(gv)
    return bb.get().get_global_var("helper")


class _Drawer:
    def __init__(self, draw, bb: BlockBuilder, helper: GlobalVar, only=None):
        self.draw, self.bb, self.helper = draw, bb, helper
        self.only = only   # restrict the step kinds (None: all)
        self.fresh = 0

    def _small_constant(self) -> Constant:
        value = self.draw(st.floats(-2, 2, width=16, allow_nan=False))
        return Constant(np.asarray([value], dtype="float32"))

    def step(self, pool: list) -> Var:
        draw, bb = self.draw, self.bb
        var = draw(st.sampled_from(pool))
        ndim = var.struct_info.ndim
        kinds = ["unary", "binary", "broadcast", "const_chain", "copy", "tuple", "flatten", "logic",
                 "integer", "views", "wide_cast"]
        if ndim >= 1:
            kinds += ["reduce", "full_reduce", "softmax", "match_cast", "concat_split", "arg_reduce",
                      "more_reduce"]
        if ndim == 2:
            kinds += ["permute", "matmul", "call", "outer_broadcast"]
        if ndim >= 1 and isinstance(var.struct_info.shape[-1], tir.IntImm):
            kinds += ["shared_matmul"]
        if self.only is not None:
            if ndim >= 1:   # opt-in: its indices are often out of range (see _gather)
                kinds += ["gather"]
            kinds = [k for k in kinds if k in self.only] or kinds
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
        if kind == "logic":
            return self._logic(var, pool)
        if kind == "integer":
            return self._integer(var)
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
        if kind == "shared_matmul":
            return self._shared_matmul(var)
        if kind == "gather":
            return self._gather(var)
        if kind == "views":
            return self._views(var)
        if kind == "wide_cast":
            return self._wide_cast(var)
        if kind == "arg_reduce":   # index of the max / min along an axis, as float32 for the next steps
            fn = draw(st.sampled_from([op.argmax, op.argmin]))
            found = bb.emit(fn(var, axis=draw(st.integers(-ndim, ndim - 1)), keepdims=draw(st.booleans())))
            return bb.emit(op.astype(found, "float32"))
        if kind == "more_reduce":
            fn = draw(st.sampled_from([op.prod, op.min, op.mean, op.variance]))
            axes = draw(st.lists(st.integers(-ndim, ndim - 1), min_size=1, max_size=ndim,
                                 unique_by=lambda a: a % ndim))
            return bb.emit(fn(var, axis=axes, keepdims=draw(st.booleans())))
        if kind == "outer_broadcast":   # (1, m) against (n, 1): both size-1 dims broadcast
            row = bb.emit(op.sum(var, axis=[0], keepdims=True))
            column = bb.emit(op.max(var, axis=[-1], keepdims=True))
            if draw(st.booleans()):
                return bb.emit(draw(st.sampled_from(_BINARY))(row, column))
            shape = var.struct_info.shape
            return bb.emit(op.add(bb.emit(op.broadcast_to(draw(st.sampled_from([row, column])), shape)), var))
        if kind == "concat_split":
            joined = bb.emit(op.concat([var, var], axis=0))
            parts = bb.emit(op.split(joined, 2, axis=0))
            return bb.emit(TupleGetItem(parts, draw(st.integers(0, 1))))
        return self._match_cast(var)

    def _shared_matmul(self, var: Var) -> Var:
        """Two or three matmuls of ``var`` with constant weights (MergeParallelMatmul's food),
        added when their widths agree, else joined."""
        draw, bb = self.draw, self.bb
        depth = int(var.struct_info.shape[-1].value)
        widths = draw(st.lists(st.sampled_from([1, 2, 3]), min_size=2, max_size=3))
        rng = np.random.default_rng(draw(st.integers(0, 2 ** 16)))
        products = [bb.emit(op.matmul(var, Constant(rng.standard_normal((depth, w)).astype("float32"))))
                    for w in widths]
        if len(set(widths)) == 1:
            return bb.emit(op.add(products[0], products[-1]))
        return bb.emit(op.concat(products, axis=-1))

    def _gather(self, var: Var) -> Var:
        """take / gather_nd / scatter_nd / scatter_elements with int64 indices computed from
        ``var``'s values (``astype(clip(var * scale))``, negative ones included): depending on the
        inputs and the symbolic dims they are in range or not, and an index out of range must be
        an ``IndexOutOfRangeError`` on every target, as in the interpreter."""
        draw, bb = self.draw, self.bb
        ndim = var.struct_info.ndim
        scale = Constant(np.asarray(draw(st.sampled_from([0.5, 2.0, 4.0])), "float32"))
        limit = draw(st.sampled_from([3, 6]))
        scaled = bb.emit(op.clip(bb.emit(op.multiply(var, scale)), -limit, limit))
        finite = bb.emit(op.where(bb.emit(op.isfinite(var)), scaled, Constant(np.asarray(0.0, "float32"))))
        indices = bb.emit(op.astype(finite, "int64"))
        flat = bb.emit(op.flatten(indices)) if ndim != 1 else indices
        axis = draw(st.integers(0, ndim - 1))
        form = draw(st.sampled_from(["take", "gather_nd", "scatter_nd", "scatter_elements"]))
        if form == "take":
            return bb.emit(op.take(var, flat, axis=axis))
        if form == "scatter_elements":
            reduction = draw(st.sampled_from(["update", "add"]))
            return bb.emit(op.scatter_elements(var, indices, var, axis=axis, reduction=reduction))
        column = bb.emit(op.expand_dims(flat, -1))
        picked = bb.emit(op.gather_nd(var, column))
        if form == "gather_nd":
            return picked
        reduction = draw(st.sampled_from(["update", "add"]))
        return bb.emit(op.scatter_nd(var, column, picked, reduction=reduction))

    def _views(self, var: Var) -> Var:
        """A chain of 1-3 view-like ops with negative axes: expand_dims / squeeze, reshape (to the
        flat count, with a -1, splitting or regrouping dims), permute_dims, flatten."""
        draw, bb = self.draw, self.bb
        for _ in range(draw(st.integers(1, 3))):
            shape = list(var.struct_info.shape)
            ndim = len(shape)
            forms = ["expand_squeeze", "reshape_flat", "flatten"]
            if ndim >= 2:
                forms += ["reshape_infer", "reshape_regroup", "permute"]
            form = draw(st.sampled_from(forms))
            if form == "expand_squeeze":
                axis = draw(st.integers(-(ndim + 1), ndim))
                var = bb.emit(op.expand_dims(var, axis))
                how = draw(st.sampled_from(["keep", "axis", "all"]))
                if how == "axis":   # squeeze the unit dim again, by its negative position maybe
                    at = axis % (ndim + 1)
                    var = bb.emit(op.squeeze(var, axis=[draw(st.sampled_from([at, at - ndim - 1]))]))
                elif how == "all":   # without axes: the literal 1s go, symbolic dims stay even at 1
                    var = bb.emit(op.squeeze(var))
            elif form == "reshape_flat":
                var = bb.emit(op.reshape(var, [-1] if draw(st.booleans()) else [_count(shape)]))
            elif form == "flatten":
                var = bb.emit(op.flatten(var))
            elif form == "reshape_infer":   # (a, b, ...) -> (a, -1) or (-1, last)
                target = [shape[0], -1] if draw(st.booleans()) else [-1, shape[-1]]
                var = bb.emit(op.reshape(var, target))
            elif form == "reshape_regroup":   # (a, b) -> (b, a) or (a, 1, b): same count, other dims
                target = [shape[1], shape[0], *shape[2:]] if draw(st.booleans()) else [shape[0], 1, *shape[1:]]
                var = bb.emit(op.reshape(var, target))
            else:
                axes = draw(st.permutations(range(ndim)))
                var = bb.emit(op.permute_dims(var, [a - ndim if draw(st.booleans()) else a for a in axes]))
        return var

    def _wide_cast(self, var: Var) -> Var:
        """Floats scaled past the range of an integer dtype (and NaN / inf where ``var`` has
        them) cast to it and back; unsigned targets too (s13: they take NumPy's element-loop
        answer on every level, ``tensorir.float_casts``), negative values included."""
        draw, bb = self.draw, self.bb
        dtype = draw(st.sampled_from(["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                      "uint64", "bool"]))
        scale = Constant(np.asarray(draw(st.sampled_from([1.0, 100.0, 1e5, 1e12, 1e30, -3e9, -1e19])),
                                    "float32"))
        value = bb.emit(op.astype(bb.emit(op.multiply(var, scale)), dtype))
        return bb.emit(op.astype(value, "float32"))

    def _condition(self, var: Var, pool: list) -> Var:
        """A bool tensor: a comparison with a same-shaped var or a constant, maybe combined
        with another by and / or / xor, maybe negated."""
        draw, bb = self.draw, self.bb
        same = [v for v in pool if tir.structural_equal(v.struct_info, var.struct_info, map_free_vars=False)]

        def compare():
            other = draw(st.sampled_from(same)) if draw(st.booleans()) else self._small_constant()
            return bb.emit(draw(st.sampled_from(_COMPARE))(var, other))
        cond = compare()
        if draw(st.booleans()):
            cond = bb.emit(draw(st.sampled_from(_LOGICAL))(cond, compare()))
        if draw(st.booleans()):
            cond = bb.emit(op.logical_not(cond))
        return cond

    def _logic(self, var: Var, pool: list) -> Var:
        """``where(condition, var, other)`` with a condition built of comparisons and logic."""
        cond = self._condition(var, pool)
        other = self.draw(st.sampled_from([var, self.bb.emit(op.negative(var)), self._small_constant()]))
        return self.bb.emit(op.where(cond, var, other))

    def _integer(self, var: Var) -> Var:
        """A detour through an integer dtype: scale, make finite, convert (negative values
        included), divide / floor-divide / floor-mod by non-zero constants, compare, convert back."""
        draw, bb = self.draw, self.bb
        dtype = draw(st.sampled_from(["int32", "int64"]))
        # inf or NaN has no integer value (the conversion is undefined in C): such lanes become 0
        scaled = bb.emit(op.clip(bb.emit(op.multiply(var, Constant(np.asarray(10.0, "float32")))), -100, 100))
        finite = bb.emit(op.where(bb.emit(op.isfinite(var)), scaled, Constant(np.asarray(0.0, "float32"))))
        value = bb.emit(op.astype(finite, dtype))
        for _ in range(draw(st.integers(1, 3))):
            divisor = Constant(np.asarray(draw(st.sampled_from([-7, -3, -2, 2, 3, 5])), dtype))
            fn = draw(st.sampled_from([op.floor_divide, op.floor_mod, op.divide, op.add, op.multiply]))
            value = bb.emit(fn(value, divisor))
        if draw(st.booleans()):
            limit = Constant(np.asarray(draw(st.integers(-5, 5)), dtype))
            cond = bb.emit(draw(st.sampled_from(_COMPARE))(value, limit))
            value = bb.emit(op.where(cond, value, bb.emit(op.negative(value))))
        return bb.emit(op.astype(value, "float32"))

    def _match_cast(self, var: Var) -> Var:
        """Either a provable cast to the same shape, or forgetting the shape and matching a fresh var."""
        sinfo = var.struct_info
        if self.draw(st.booleans()):
            return self.bb.match_cast(var, TensorStructInfo(sinfo.shape, sinfo.dtype))
        self.fresh += 1
        k = tir.size_var(f"k{self.fresh}")
        coarse = self.bb.emit(op.flatten(var)) if sinfo.ndim != 1 else var
        return self.bb.match_cast(coarse, TensorStructInfo((k,), sinfo.dtype))


STEP_KINDS = ("unary", "binary", "broadcast", "const_chain", "copy", "tuple", "flatten", "logic",
              "integer", "reduce", "softmax", "match_cast", "concat_split", "permute", "matmul", "call",
              "shared_matmul", "gather", "views", "wide_cast", "arg_reduce", "more_reduce", "outer_broadcast")


def _count(shape) -> tir.PrimExpr:
    total = tir.IntImm(1) if not shape else shape[0]
    for d in shape[1:]:
        total = total * d
    return total


def random_dataflow_module(draw, max_blocks: int = 3, max_steps: int = 4, kinds=None) -> IRModule:
    """A random well-formed module (see the module docstring); ``draw`` is hypothesis' draw;
    ``kinds`` (a subset of STEP_KINDS) restricts the steps drawn; ``"gather"`` (data-dependent
    indices, often out of range) is drawn only when ``kinds`` names it."""
    bb = BlockBuilder()
    helper = _add_helpers(bb)
    n = tir.size_var("n")
    m = tir.size_var("m")
    second = draw(st.sampled_from([3, m]))
    x = Var("x", TensorStructInfo((n, second), "float32"))
    y = Var("y", TensorStructInfo((n, second), "float32"))
    drawer = _Drawer(draw, bb, helper, kinds)
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
def dataflow_modules(draw, max_blocks: int = 3, max_steps: int = 4, kinds=None):
    return random_dataflow_module(draw, max_blocks, max_steps, kinds)


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
    check_kept_privacy(name, mod, after)
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
