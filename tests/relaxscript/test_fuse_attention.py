"""FuseAttention: softmax(q @ kt * scale + mask) @ v -> one online-softmax kernel.

Before/Expected for the matches (additive, causal triu, where-condition and
unmasked forms; grouped-query rows; decode over a cache), near misses that
must stay as they are, and hypothesis runs of the built C module and both
interpreters against NumPy with the sequence lengths bound to 1, tile
multiples and values no tile divides.
"""
from __future__ import annotations

import textwrap
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.expr import Call
from relaxscript.transform import FuseAttention
from relaxscript.transform.attention_kernel import (TILE, AttentionMask, AttentionSpec, KeySource, attention_layout,
                                                    attention_kernel, attention_source)
from tensorir.schedule_rules.attention import ATTENTION_ATTR, ATTENTION_LAYOUT_ATTR

HEADS, HEAD_DIM, VALUE_DIM = 2, 8, 4


def _module(body: str, params: str, shape_vars=("n", "m"), extra: str = "") -> str:
    decls = "\n".join(f"        {v} = T.int64()" for v in shape_vars)
    return f'''
@R.ir_module
class Module:
{extra}
    @R.function
    def main({params}):
{decls}
        with R.dataflow():
{textwrap.indent(textwrap.dedent(body).strip(), " " * 12)}
            R.output(out)
        return out
'''


QKV = (f'q: R.Tensor(({HEADS}, "n", {HEAD_DIM}), "float32"), '
       f'kt: R.Tensor(({HEADS}, {HEAD_DIM}, "m"), "float32"), '
       f'v: R.Tensor(({HEADS}, "m", {VALUE_DIM}), "float32")')

MASKED = _module('''
    scores = R.matmul(q, kt)
    scaled = R.multiply(scores, R.const(0.35, "float32"))
    masked = R.add(mask, scaled)
    probs = R.nn.softmax(masked, axis=-1)
    out = R.matmul(probs, v)
''', QKV + ', mask: R.Tensor(("n", "m"), "float32")')

CAUSAL = _module('''
    scores = R.matmul(q, kt)
    scaled = R.multiply(R.const(0.35, "float32"), scores)
    mask = R.triu(R.full(R.shape([n, n]), R.const(-1e9, "float32")), k=1)
    masked = R.add(scaled, mask)
    probs = R.nn.softmax(masked, axis=-1)
    out = R.matmul(probs, v)
''', QKV.replace('"m"', '"n"'), shape_vars=("n",))

WHERE = _module('''
    scores = R.matmul(q, kt)
    masked = R.where(allowed, scores, R.const(-1e30, "float32"))
    probs = R.nn.softmax(masked, axis=2)
    out = R.matmul(probs, v)
''', QKV + ', allowed: R.Tensor((1, "m"), "bool")')

PLAIN = _module('''
    scores = R.matmul(q, kt)
    probs = R.nn.softmax(scores, axis=-1)
    out = R.matmul(probs, v)
''', QKV)

# Grouped-query decode over a cache: 4 query heads share 2 kv heads, queries of one kv head
# are its rows (the layout of the SmolLM2 model); keys/values are cache views permuted.
GQA_DECODE = _module('''
    keys = R.permute_dims(cache_k, [1, 2, 0])
    values = R.permute_dims(cache_v, [1, 0, 2])
    grouped = R.reshape(R.permute_dims(R.reshape(q, R.shape([n, 2, 2, 8])), [1, 2, 0, 3]), R.shape([2, 2 * n, 8]))
    scores = R.matmul(grouped, keys)
    scaled = R.multiply(scores, R.const(0.125, "float32"))
    probs = R.nn.softmax(scaled, axis=-1)
    out = R.matmul(probs, values)
''', 'q: R.Tensor(("n", 4, 8), "float32"), cache_k: R.Tensor(("t", 2, 8), "float32"), '
     'cache_v: R.Tensor(("t", 2, 8), "float32")', shape_vars=("n", "t"))


def _fused_calls(mod) -> int:
    import tensorir as tir
    return len(tir.collect(mod["main"], lambda e: isinstance(e, Call) and
                           getattr(e.op, "name", "") == "relax.call_tir"))


def _ops(mod) -> list[str]:
    import tensorir as tir
    return sorted(c.op.name for c in tir.collect(mod["main"], lambda e: isinstance(e, Call)))


# ---------------------------------------------------------------- Before / Expected
def _expected(body: str, params: str, spec: AttentionSpec, shape_vars=("n", "m")):
    kernel = textwrap.indent(attention_source(spec), "    ")
    mod = rx.from_source(_module(body, params, shape_vars, extra=kernel))
    kernel = mod["fused_attention"].with_attr(ATTENTION_ATTR, True)
    return mod.with_function("fused_attention", kernel.with_attr(ATTENTION_LAYOUT_ATTR, attention_layout(spec)))


def _spec(mask=None, scale=None, **dims):
    base = dict(B=HEADS, N=None, D=HEAD_DIM, M=None, DV=VALUE_DIM)
    base.update(dims)
    return AttentionSpec(base, scale, mask)


def test_additive_mask_becomes_one_kernel_call():
    after = FuseAttention()(rx.from_source(MASKED))
    spec = _spec(AttentionMask("add", ("N", "M"), "float32"), float(np.float32(0.35)))
    expected = _expected('''
        out = R.call_tir(cls.fused_attention, (q, kt, v, mask), out_sinfo=R.Tensor((2, n, 4), dtype="float32"))
    ''', QKV + ', mask: R.Tensor(("n", "m"), "float32")', spec)
    rx.assert_structural_equal(after, expected)


def test_causal_triu_mask_is_computed_in_the_kernel():
    # the triu of a constant is a compare of the row and key indices: no (n, n) operand
    after = FuseAttention()(rx.from_source(CAUSAL))
    causal = ("T.if_then_else(__M__ - __N__ >= T.int64(1), T.float32(-1000000000.0), "
              "T.float32(0.0))")
    spec = _spec(AttentionMask("add", (), "float32", 0.0, causal), float(np.float32(0.35)), M=None)
    expected = _expected('''
        out = R.call_tir(cls.fused_attention, (q, kt, v), out_sinfo=R.Tensor((2, n, 4), dtype="float32"))
    ''', QKV.replace('"m"', '"n"'), spec, shape_vars=("n",))
    rx.assert_structural_equal(after, expected)


def test_where_condition_and_unscaled_scores():
    after = FuseAttention()(rx.from_source(WHERE))
    spec = _spec(AttentionMask("where", (1, "M"), "bool", float(np.float32(-1e30))))
    expected = _expected('''
        out = R.call_tir(cls.fused_attention, (q, kt, v, allowed), out_sinfo=R.Tensor((2, n, 4), dtype="float32"))
    ''', QKV + ', allowed: R.Tensor((1, "m"), "bool")', spec)
    rx.assert_structural_equal(after, expected)


def test_unmasked_attention():
    after = FuseAttention()(rx.from_source(PLAIN))
    expected = _expected('''
        out = R.call_tir(cls.fused_attention, (q, kt, v), out_sinfo=R.Tensor((2, n, 4), dtype="float32"))
    ''', QKV, _spec())
    rx.assert_structural_equal(after, expected)


def test_grouped_query_decode_reads_the_cache_through_its_permutes():
    # keys and values are read in the cache's own (t, kv, d) layout: the permutes vanish
    after = FuseAttention()(rx.from_source(GQA_DECODE))
    assert _fused_calls(after) == 1
    assert not {"relax.nn.softmax", "relax.matmul"} & set(_ops(after))
    assert _ops(after).count("relax.permute_dims") == 1    # only the queries' regrouping
    kernel = after["fused_attention"]
    assert kernel.attrs[ATTENTION_ATTR]
    spec = AttentionSpec(dict(B=2, N=None, D=8, M=None, DV=8), 0.125, None,
                         keys=KeySource(("M", "B", "D")), values=KeySource(("M", "B", "DV")))
    rx.assert_structural_equal(kernel, attention_kernel(spec))


NEAR_MISSES = {
    "softmax over the query axis": MASKED.replace("axis=-1", "axis=1"),
    "probabilities also returned": MASKED.replace("R.output(out)", "R.output(out, probs)")
                                         .replace("return out", "return (out, probs)"),
    "scores used twice": MASKED.replace("masked = R.add(mask, scaled)",
                                        "masked = R.add(mask, R.add(scaled, scores))"),
    "scale is a tensor": MASKED.replace('R.const(0.35, "float32")', "mask"),
    "float64 operands": PLAIN.replace('"float32"', '"float64"'),
    "mask subtracted": MASKED.replace("R.add(mask, scaled)", "R.subtract(scaled, mask)"),
    "where with the scores as the fill": WHERE.replace("R.where(allowed, scores, R.const(-1e30, \"float32\"))",
                                                       "R.where(allowed, R.const(-1e30, \"float32\"), scores)"),
}


@pytest.mark.parametrize("name", sorted(NEAR_MISSES))
def test_near_misses_are_left_alone(name):
    try:
        mod = rx.from_source(NEAR_MISSES[name])
    except (ValueError, SyntaxError) as err:  # a variant the type rules already refuse
        pytest.fail(f"near miss {name!r} does not parse: {err}")
    rx.assert_structural_equal(FuseAttention()(mod), mod)


@pytest.mark.parametrize("kind", ["causal", "where", "gqa"])
def test_every_pipeline_stage_of_attention_round_trips(kind):
    from tests.relaxscript.test_pipeline_roundtrip import assert_every_stage_round_trips
    assert_every_stage_round_trips(rx.from_source(SOURCES[kind]))


def test_pipeline_fuses_attention_before_library_dispatch():
    names = [type(p).__name__ for p in rx.get_pipeline("c")]
    assert names.index("FuseAttention") < names.index("DispatchLibrary")


# ---------------------------------------------------------------- numerics
def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _reference(kind, args):
    if kind == "gqa":
        q, ck, cv = args
        n = q.shape[0]
        grouped = q.reshape(n, 2, 2, 8).transpose(1, 2, 0, 3).reshape(2, 2 * n, 8)
        return _softmax(grouped @ ck.transpose(1, 2, 0) * np.float32(0.125)) @ cv.transpose(1, 0, 2)
    q, kt, v = args[:3]
    scores = q @ kt
    if kind == "masked":
        scores = scores * np.float32(0.35) + args[3]
    elif kind == "causal":
        n = q.shape[1]
        scores = scores * np.float32(0.35) + np.triu(np.full((n, n), -1e9, np.float32), k=1)
    elif kind == "where":
        scores = np.where(args[3], scores, np.float32(-1e30))
    return _softmax(scores) @ v


SOURCES = {"masked": MASKED, "causal": CAUSAL, "where": WHERE, "plain": PLAIN, "gqa": GQA_DECODE}


def _inputs(kind, n, m, rng):
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    if kind == "gqa":
        return [f(n, 4, 8), f(m, 2, 8), f(m, 2, 8)]
    if kind == "causal":
        m = n
    args = [f(HEADS, n, HEAD_DIM), f(HEADS, HEAD_DIM, m), f(HEADS, m, VALUE_DIM)]
    if kind == "masked":
        args.append(np.where(rng.random((n, m)) < 0.3, np.float32(-1e9), f(n, m)).astype(np.float32))
    elif kind == "where":
        allowed = rng.random((1, m)) < 0.7
        allowed[0, rng.integers(m)] = True  # every row keeps a key
        args.append(allowed)
    return args


@lru_cache(maxsize=None)
def _compiled(kind):
    mod = rx.from_source(SOURCES[kind])
    return rx.VirtualMachine(rx.build(mod, target="c"))["main"]


LENGTHS = st.sampled_from([1, 2, 7, TILE - 1, TILE, TILE + 1, 2 * TILE + 5])


@settings(max_examples=12, deadline=None)
@given(kind=st.sampled_from(sorted(SOURCES)), n=LENGTHS, m=LENGTHS, seed=st.integers(0, 2**16))
def test_fused_kernel_built_for_c_matches_numpy(kind, n, m, seed):
    args = _inputs(kind, n, m, np.random.default_rng(seed))
    out = np.asarray(_compiled(kind)(*args))
    np.testing.assert_allclose(out, _reference(kind, args), rtol=1e-4, atol=1e-5)


@settings(max_examples=6, deadline=None)
@given(kind=st.sampled_from(sorted(SOURCES)), n=st.sampled_from([1, 3]), m=st.sampled_from([1, 5, TILE + 2]),
       seed=st.integers(0, 2**16))
def test_fused_module_interpreted_matches_numpy(kind, n, m, seed):
    """The pass's output under the graph-level interpreter (which runs the kernel in the
    loop-level interpreter) equals NumPy, as does the unfused module."""
    mod = rx.from_source(SOURCES[kind])
    fused = FuseAttention()(mod)
    assert _fused_calls(fused) == 1
    args = _inputs(kind, n, m, np.random.default_rng(seed))
    expected = _reference(kind, args)
    np.testing.assert_allclose(np.asarray(rx.interpret(fused, "main", *args)), expected, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.asarray(rx.interpret(mod, "main", *args)), expected, rtol=1e-4, atol=1e-5)


def test_pipeline_fuses_every_query_length():
    # The default pipeline's FuseAttention takes prefill (symbolic query) as well as decode: the
    # generated C kernel measured faster than the BLAS matmuls around a softmax at every n.
    (fuse,) = [p for p in rx.get_pipeline("c") if isinstance(p, FuseAttention)]
    assert fuse.max_query_rows is None
    assert "fused_attention" in fuse(rx.from_source(GQA_DECODE)).script()


def test_max_query_rows_fuses_only_short_queries():
    # The bound still selects decode-shaped attention (a constant query of at most 16 rows).
    gated = FuseAttention(max_query_rows=16)
    one_token = (GQA_DECODE.replace('("n", 4, 8)', '(1, 4, 8)').replace("[n, 2, 2, 8]", "[1, 2, 2, 8]")
                 .replace("[2, 2 * n, 8]", "[2, 2, 8]"))
    decode = rx.from_source(one_token)
    assert "fused_attention" in gated(decode).script()
    symbolic = rx.from_source(GQA_DECODE)   # n query tokens: prefill-shaped, left alone
    rx.assert_structural_equal(gated(symbolic), symbolic)
    prefill = rx.from_source(MASKED)
    rx.assert_structural_equal(gated(prefill), prefill)
    assert "fused_attention" in FuseAttention()(prefill).script()
    with pytest.raises(ValueError, match="max_query_rows"):
        FuseAttention(max_query_rows=0)


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_c_builds_allocate_no_scratch_for_the_generated_attention(kind):
    # the generator keeps its row statistics in registers: the loop nest's scratch (row max, sum,
    # rescale, score tile) stays inside the kernel instead of becoming graph-level workspaces
    text = rx.build(rx.from_source(SOURCES[kind]), target="c").as_text()
    assert "fused_attention" in text and "_ws_out1" not in text
    interp = rx.build(rx.from_source(SOURCES[kind]), target="interp").as_text()
    assert "_ws_out1" in interp or "fused_attention" not in interp   # the nest's own form keeps them
