"""LegalizeOps' cache of legalizations (transform/legalize/call_cache.py): an equal call is
served from the cache (counted, not timed) and gives the module the uncached run gives; calls
that differ in one attribute, dtype, shape, symbolic fact or argument aliasing never share;
legalizations that emit helper bindings, and arguments the key cannot describe, are never
replayed."""
from __future__ import annotations

import numpy as np

import relaxscript as rx
import tensorir as tir
from relaxscript import op
from relaxscript.block_builder import BlockBuilder
from relaxscript.expr import Call, Tuple, Var
from relaxscript.struct_info import TensorStructInfo, TupleStructInfo
from relaxscript.transform import LegalizeOps
from relaxscript.transform.legalize import get_legalize
from relaxscript.transform.legalize.call_cache import call_signature
from tensorir.functor import collect

from .test_legalize_util import assert_close, random_array


def _module(sinfos, make_calls):
    """``main(p0, p1, ...)`` emitting ``make_calls(params)`` (a list) and returning them as a tuple."""
    params = [Var(f"p{i}", s) for i, s in enumerate(sinfos)]
    bb = BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            outs = [bb.emit(c) for c in make_calls(params)]
            out = bb.emit_output(Tuple(outs))
        bb.emit_func_output(out)
    return bb.get()


def _legalize(mod):
    legalize = LegalizeOps()
    return legalize(mod), legalize.cache_stats


def _callees(mod):
    calls = [c for c in collect(mod["main"], lambda n: isinstance(n, Call))
             if getattr(c.op, "name", None) == "relax.call_tir"]
    return [c.args[0].name_hint for c in calls]


def _uncached(mod):
    """The module legalized with every call in its own run (no call can hit the cache)."""
    out = mod
    legalize = get_legalize
    seen = 0
    while True:
        calls = [c for c in collect(out["main"], lambda n: isinstance(n, Call))
                 if getattr(c.op, "name", "").startswith("relax.") and c.op.name != "relax.call_tir"
                 and legalize(c.op.name) is not None]
        if not calls:
            return out
        target = calls[0]
        out = LegalizeOps(customize={target.op.name: _only(target)})(out)
        seen += 1
        assert seen < 20


def _only(target):
    """A customization legalizing ``target`` alone (other calls of its op are kept)."""
    fn = get_legalize(target.op.name)

    def legalize(ctx, call):
        same = all(a is b for a, b in zip(call.args, target.args)) and len(call.args) == len(target.args)
        return fn(ctx, call) if same else None
    return legalize


def test_second_equal_call_is_served_from_the_cache_and_matches_the_uncached_result():
    n, m = tir.size_var("n"), tir.size_var("m")
    sinfos = [TensorStructInfo((n, 64), "float32"), TensorStructInfo((m, 64), "float32")]
    mod = _module(sinfos, lambda p: [op.fake_quantize(p[0]), op.fake_quantize(p[1])])
    legalized, stats = _legalize(mod)
    assert (stats.hits, stats.misses) == (1, 1)
    assert _callees(legalized) == ["fake_quantize_q8_0", "fake_quantize_q8_0"]
    rx.assert_structural_equal(legalized, _uncached(mod))
    rng = np.random.default_rng(0)
    for rows in ((1, 3), (4, 2)):
        arrays = [random_array(rng, (r, 64), "float32") for r in rows]
        assert_close(rx.interpret(mod, "main", *arrays), rx.interpret(legalized, "main", *arrays))


def test_hit_passes_its_own_symbolic_vars_through_tir_vars():
    n, m = tir.size_var("n"), tir.size_var("m")
    sinfos = [TensorStructInfo((n * 4,), "float32"), TensorStructInfo((m * 4,), "float32")]
    mod = _module(sinfos, lambda p: [op.exp(p[0]), op.exp(p[1])])
    legalized, stats = _legalize(mod)
    assert stats.hits == 1
    calls = [c for c in collect(legalized["main"], lambda x: isinstance(x, Call))
             if getattr(c.op, "name", None) == "relax.call_tir"]
    assert [c.args[2].values[0] for c in calls] == [n, m]
    rx.assert_structural_equal(legalized, _uncached(mod))
    rng = np.random.default_rng(1)
    arrays = [random_array(rng, (8,), "float32"), random_array(rng, (20,), "float32")]
    assert_close(rx.interpret(mod, "main", *arrays), rx.interpret(legalized, "main", *arrays))


def _misses_only(sinfos, make_calls):
    legalized, stats = _legalize(_module(sinfos, make_calls))
    assert stats.hits == 0, stats
    return legalized


def test_calls_differing_in_one_attribute_do_not_share():
    n = tir.size_var("n")
    x = TensorStructInfo((n, 8), "float32")
    legalized = _misses_only([x], lambda p: [op.sum(p[0], axis=[0]), op.sum(p[0], axis=[1])])
    assert len(set(_callees(legalized))) == 2
    legalized = _misses_only([x], lambda p: [op.clip(p[0], 0.0, 1.0), op.clip(p[0], -0.0, 1.0)])
    assert len(set(_callees(legalized))) == 1   # 0.0 and -0.0: equal prim_funcs, distinct keys
    _misses_only([x], lambda p: [op.sum(p[0], axis=[1], keepdims=True),
                                 op.sum(p[0], axis=[1], keepdims=False)])


def test_calls_differing_in_dtype_or_shape_do_not_share():
    n = tir.size_var("n")
    sinfos = [TensorStructInfo((n, 8), "float32"), TensorStructInfo((n, 8), "float64"),
              TensorStructInfo((n, 16), "float32"), TensorStructInfo((8, n), "float32")]
    legalized = _misses_only(sinfos, lambda p: [op.exp(x) for x in p])
    assert len(set(_callees(legalized))) == 4


def test_calls_differing_in_a_symbolic_fact_do_not_share():
    n, m = tir.size_var("n", upper=16), tir.size_var("m", upper=32)
    k = tir.size_var("k", multiple_of=32)
    sinfos = [TensorStructInfo((n, 64), "float32"), TensorStructInfo((m, 64), "float32"),
              TensorStructInfo((k, 64), "float32")]
    _misses_only(sinfos, lambda p: [op.fake_quantize(x) for x in p])


def test_repeated_symbolic_var_and_aliased_arguments_are_part_of_the_key():
    n, m = tir.size_var("n"), tir.size_var("m")
    square = TensorStructInfo((n, n), "float32")
    rect = TensorStructInfo((n, m), "float32")
    _misses_only([square, rect], lambda p: [op.exp(p[0]), op.exp(p[1])])
    a, b = TensorStructInfo((n, 4), "float32"), TensorStructInfo((n, 4), "float32")
    mod = _module([a, b], lambda p: [op.add(p[0], p[0]), op.add(p[0], p[1])])
    sig_same = call_signature(get_legalize("relax.add"), op.add(*[Var("x", a)] * 2))
    x, y = Var("x", a), Var("y", b)
    sig_two = call_signature(get_legalize("relax.add"), op.add(x, y))
    assert sig_same.key != sig_two.key
    legalized, stats = _legalize(mod)
    assert stats.hits == 0
    rng = np.random.default_rng(2)
    arrays = [random_array(rng, (3, 4), "float32"), random_array(rng, (3, 4), "float32")]
    assert_close(rx.interpret(mod, "main", *arrays), rx.interpret(legalized, "main", *arrays))


def test_renamed_symbolic_vars_with_equal_facts_share_a_key():
    legalize = get_legalize("relax.exp")
    n, m = tir.size_var("n", upper=8), tir.size_var("m", upper=8)
    first = call_signature(legalize, op.exp(Var("x", TensorStructInfo((n, 2 * n), "float32"))))
    second = call_signature(legalize, op.exp(Var("y", TensorStructInfo((m, 2 * m), "float32"))))
    assert first.key == second.key and first.vars == [n] and second.vars == [m]
    other = call_signature(get_legalize("relax.sigmoid"),
                           op.sigmoid(Var("y", TensorStructInfo((m, 2 * m), "float32"))))
    assert other.key != second.key


def test_legalization_emitting_helper_bindings_is_not_replayed():
    n = tir.size_var("n")
    part = TensorStructInfo((n, 4), "float32")
    pair = TupleStructInfo([part, part])
    legalized, stats = _legalize(_module([pair, pair], lambda p: [op.concat(p[0]), op.concat(p[1])]))
    assert stats.hits == 0 and stats.misses == 2
    rng = np.random.default_rng(3)
    arrays = [tuple(random_array(rng, (2, 4), "float32") for _ in range(2)) for _ in range(2)]
    mod = _module([pair, pair], lambda p: [op.concat(p[0]), op.concat(p[1])])
    assert_close(rx.interpret(mod, "main", *arrays), rx.interpret(legalized, "main", *arrays))


def test_tuple_argument_is_not_cached():
    n = tir.size_var("n")
    part = TensorStructInfo((n, 4), "float32")
    _, stats = _legalize(_module([part, part], lambda p: [op.concat([p[0], p[1]]),
                                                        op.concat([p[0], p[1]])]))
    assert stats.hits == 0 and stats.uncacheable == 2


def test_custom_legalization_with_a_side_binding_runs_for_every_call():
    exp = get_legalize("relax.exp")

    def with_side_binding(ctx, call):
        ctx.bb.emit(op.negative(call.args[0]), "side")   # an extra binding a replay would lose
        return exp(ctx, call)

    n = tir.size_var("n")
    x = TensorStructInfo((n, 4), "float32")
    mod = _module([x, x], lambda p: [op.exp(p[0]), op.exp(p[1])])
    legalize = LegalizeOps(customize={"relax.exp": with_side_binding})
    legalized = legalize(mod)
    assert legalize.cache_stats.hits == 0 and legalize.cache_stats.misses == 2
    sides = [b for blk in legalized["main"].body.blocks for b in blk.bindings
             if b.var.name_hint.startswith("side")]
    assert len(sides) == 2
