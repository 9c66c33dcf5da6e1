"""Sampling (greedy, temperature, top-k, top-p with a seed) and the generation loop."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from relaxscript.frontend.gguf import read_gguf
from relaxscript.llm.generation import GenerationStats, generate
from relaxscript.llm.reference import NumpyLlama
from relaxscript.llm.sampling import Sampler, SamplingParams, greedy, token_probabilities

logit_vectors = st.lists(st.floats(-20, 20, allow_nan=False), min_size=1, max_size=30).map(
    lambda xs: np.array(xs, dtype=np.float32))


@settings(max_examples=60, deadline=None)
@given(logits=logit_vectors, k=st.integers(1, 40), temperature=st.floats(0.1, 3.0))
def test_top_k_keeps_the_k_most_likely(logits, k, temperature):
    probs = token_probabilities(logits, SamplingParams(temperature=temperature, top_k=k))
    kept = np.flatnonzero(probs > 0)
    assert len(kept) <= min(k, logits.size) and abs(probs.sum() - 1) < 1e-9
    # nothing dropped is more likely than anything kept
    dropped = np.setdiff1d(np.arange(logits.size), kept)
    if dropped.size and kept.size:
        assert logits[dropped].max() <= logits[kept].min()
    # within the kept set the ratios are the tempered softmax's
    expected = np.exp((logits[kept].astype(np.float64) - logits[kept].max()) / temperature)
    np.testing.assert_allclose(probs[kept], expected / expected.sum(), rtol=1e-9)


@settings(max_examples=60, deadline=None)
@given(logits=logit_vectors, p=st.floats(0.01, 1.0))
def test_top_p_keeps_the_smallest_set_reaching_p(logits, p):
    full = token_probabilities(logits, SamplingParams())
    probs = token_probabilities(logits, SamplingParams(top_p=p))
    kept = np.flatnonzero(probs > 0)
    # by logit, ties by id: two logits apart by a subnormal have equal probabilities
    order = np.argsort(-np.asarray(logits), kind="stable")
    # the kept tokens are a prefix of the most likely ones, their mass reaches p, one fewer does not
    assert set(kept) == set(order[:kept.size])
    assert full[kept].sum() >= p * (1 - 1e-9)
    assert kept.size == 1 or full[order[:kept.size - 1]].sum() < p
    np.testing.assert_allclose(probs[kept], full[kept] / full[kept].sum(), rtol=1e-9)


def test_sampling_frequencies_and_seed():
    logits = np.log(np.array([0.5, 0.3, 0.15, 0.05]))
    sampler = Sampler(SamplingParams(top_k=3), seed=123)
    counts = np.bincount([sampler(logits) for _ in range(4000)], minlength=4)
    assert counts[3] == 0
    np.testing.assert_allclose(counts[:3] / 4000, np.array([0.5, 0.3, 0.15]) / 0.95, atol=0.03)
    first = Sampler(SamplingParams(temperature=2.0), seed=5)
    second = Sampler(SamplingParams(temperature=2.0), seed=5)
    assert [first(logits) for _ in range(30)] == [second(logits) for _ in range(30)]
    assert {Sampler(SamplingParams(top_k=2), seed=s)(logits) for s in range(40)} == {0, 1}
    assert greedy(np.array([1.0, 3.0, 3.0])) == 1


def test_sampling_arguments_are_checked():
    with pytest.raises(ValueError, match="temperature must be a positive number"):
        SamplingParams(temperature=-1)
    with pytest.raises(ValueError, match="top_k must be an integer >= 1"):
        SamplingParams(top_k=0)
    with pytest.raises(ValueError, match=r"top_p must be in \(0, 1\]"):
        SamplingParams(top_p=1.5)
    with pytest.raises(ValueError, match="logits contain NaN"):
        greedy(np.array([0.0, np.nan]))


@pytest.fixture(scope="module")
def model(tiny_gguf_q4):
    return NumpyLlama(read_gguf(tiny_gguf_q4), max_context=64)


def _greedy_by_hand(model, prompt, steps):
    model.reset()
    out = []
    logits = model.forward(prompt)[-1]
    for _ in range(steps):
        out.append(int(np.argmax(logits)))
        logits = model.forward([out[-1]])[-1]
    return out


def test_greedy_generation_and_streaming(model):
    prompt = [1, 10, 20, 30]
    streamed = []
    stats = GenerationStats()
    new = generate(model, prompt, 12, on_token=streamed.append, stats=stats)
    assert model.position == len(prompt) + 11     # the last token is not fed back
    assert new == streamed == _greedy_by_hand(model, prompt, 12)
    assert len(new) == 12 and stats.prompt_tokens == 4 and stats.decode_steps == 11


def test_stop_tokens_and_no_early_stop(model):
    prompt = [1, 10, 20, 30]
    full = generate(model, prompt, 20)
    assert len(full) == 20                          # never stops early unless asked
    stop = full[5]
    cut = generate(model, prompt, 20, stop_ids=[stop])
    assert cut == full[:full.index(stop)]
    with_eos = generate(model, prompt, 20, stop_at_eos=True)
    assert model.eos_id not in with_eos and with_eos == full[:len(with_eos)]


def test_seeded_sampling_is_reproducible(model):
    prompt = [1, 50, 51]
    # the tied random embedding makes the model peaky: a high temperature spreads the draws
    a = generate(model, prompt, 10, temperature=20.0, top_k=20, seed=7)
    b = generate(model, prompt, 10, temperature=20.0, top_k=20, seed=7)
    assert a == b and len(a) == 10
    others = {tuple(generate(model, prompt, 10, temperature=20.0, top_k=20, seed=s)) for s in range(3)}
    assert len(others) > 1


def test_generation_arguments_are_checked(model):
    with pytest.raises(ValueError, match="the prompt is empty"):
        generate(model, [], 3)
    with pytest.raises(ValueError, match="need a context of 70 tokens, the model's bound is 64"):
        generate(model, list(range(1, 41)), 31)
    with pytest.raises(ValueError, match="seed is given but no sampling argument"):
        generate(model, [1], 3, seed=1)
    assert generate(model, [1], 0) == []
