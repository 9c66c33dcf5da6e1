"""The decode layer's own pieces: the merged q/k/v projection (GGUF rows stacked at load) and the
one in-place kernel that rotates the new keys and appends keys and values to the caches."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript import nn
from relaxscript.frontend.gguf import llama_config, read_gguf
from relaxscript.llm import kv_cache
from relaxscript.llm.engine import Engine, _weight_formats, load_parameters
from relaxscript.llm.generation import generate
from relaxscript.llm.model import LlamaForCausalLM, gguf_sources, gguf_tensor
from relaxscript.llm.reference import NumpyLlama, apply_rope, rope_tables

KV, D, CAP = 2, 8, 12


class Append(nn.Module):
    """The caches with ``append_rotated`` applied: keys at ``ko``, values at ``vo`` of ``src``."""

    def __init__(self, ko, vo):
        super().__init__()
        self.ko, self.vo = ko, vo

    def forward(self, cache_k, cache_v, src, cos, sin, pos):
        (t,) = pos.struct_info.values
        new_k, new_v = kv_cache.append_rotated(cache_k, cache_v, src, self.ko, src, self.vo, cos, sin, t)
        return nn.emit(rx.op.add(rx.op.sum(new_k), rx.op.sum(new_v)), "total")


def _append_module(width, ko, vo):
    module = Append(ko, vo)
    spec = nn.ExportSpec(methods={"forward": {
        "cache_k": nn.Tensor(kv_cache.key_shape(CAP, KV, D), "float32"),
        "cache_v": nn.Tensor(kv_cache.value_shape(CAP, KV, D), "float32"),
        "src": nn.Tensor(("n", width), "float32"), "cos": nn.Tensor(("n", D // 2), "float32"),
        "sin": nn.Tensor(("n", D // 2), "float32"), "pos": nn.Shape(["t"])}},
        dims={"n": CAP, "t": CAP})
    return nn.export(module, spec).mod


_VMS = {}


@pytest.mark.parametrize("target", ["reference", "c"])
@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 5), t=st.integers(0, CAP), seed=st.integers(0, 2**16),
       layout=st.sampled_from([(40, 8, 24), (32, 0, 16), (16, 0, 0)]))
def test_rotated_append_equals_numpy(target, n, t, seed, layout):
    width, ko, vo = layout
    rng = np.random.default_rng(seed)
    cache_k = rng.standard_normal(kv_cache.key_shape(CAP, KV, D)).astype("float32")
    cache_v = rng.standard_normal(kv_cache.value_shape(CAP, KV, D)).astype("float32")
    src = rng.standard_normal((n, width)).astype("float32")
    cos, sin = rope_tables(np.arange(t, t + n), D, 10000.0)
    keys = apply_rope(src[:, ko:ko + KV * D].reshape(n, KV, D), cos, sin)
    values = src[:, vo:vo + KV * D].reshape(n, KV, D)
    want_k, want_v = cache_k.copy(), cache_v.copy()
    rows = max(0, min(n, CAP - t))            # rows past the capacity are never written
    want_k[:, :, t:t + rows] = keys[:rows].transpose(1, 2, 0)
    want_v[:, t:t + rows, :] = values[:rows].transpose(1, 0, 2)
    mod = _append_module(width, ko, vo)
    if target == "reference":
        rx.interpret(mod, "forward", cache_k, cache_v, src, cos, sin, (t,))
    else:
        if layout not in _VMS:
            _VMS[layout] = rx.VirtualMachine(rx.build(mod, target="c"))
        _VMS[layout]["forward"](cache_k, cache_v, src, cos, sin, (t,))
    np.testing.assert_allclose(cache_k, want_k, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(cache_v, want_v)


def test_columns_outside_the_source_are_refused():
    with pytest.raises(ValueError, match="columns 24 .. 40 are outside the 32 columns"):
        _append_module(32, 0, 24)


def test_stacked_qkv_rows_dequantize_to_the_three_projections(tiny_gguf_q4):
    gguf = read_gguf(tiny_gguf_q4)
    names = gguf_sources("layers.1.self_attn.qkv_proj.weight.scale")
    assert names == ("blk.1.attn_q.weight", "blk.1.attn_k.weight", "blk.1.attn_v.weight")
    merged = gguf_tensor(gguf, "layers.1.self_attn.qkv_proj.weight.data")
    parts = [gguf.tensor(name) for name in names]
    assert merged.qtype == parts[0].qtype == "Q4_1"
    np.testing.assert_array_equal(merged.dequantize(), np.concatenate([p.dequantize() for p in parts]))
    assert gguf_sources("layers.1.self_attn.o_proj.weight") == ("blk.1.attn_output.weight",)


def _engine(path, merge_qkv: bool, weights: str = "q4") -> Engine:
    gguf = read_gguf(path)
    config = llama_config(gguf)
    formats = _weight_formats(gguf) if weights == "q4" else {}
    model = LlamaForCausalLM(config, 32, formats, merge_qkv=merge_qkv)
    exported = nn.export(model, model.export_spec())
    arrays = load_parameters(gguf, exported.param_names, config, 32)
    return Engine(config, exported, rx.build(exported.mod, target="c"), arrays, capacity=32)


def test_merged_and_separate_projections_give_the_same_tokens(tiny_gguf_q4):
    merged, separate = _engine(tiny_gguf_q4, True), _engine(tiny_gguf_q4, False)
    assert any("qkv_proj" in n for n in merged.exported.param_names)
    assert not any("qkv_proj" in n for n in separate.exported.param_names)
    prompt = [5, 17, 33, 60, 2]
    assert merged.generate(prompt, max_new_tokens=6) == separate.generate(prompt, max_new_tokens=6)
    merged.reset()
    separate.reset()
    np.testing.assert_allclose(merged.prefill(prompt), separate.prefill(prompt), rtol=1e-4, atol=1e-4)


def test_separate_projections_follow_the_reference(tiny_gguf_q4):
    engine, reference = _engine(tiny_gguf_q4, False, "f32"), NumpyLlama(tiny_gguf_q4, max_context=32)
    prompt = [1, 2, 3, 40]
    assert engine.generate(prompt, max_new_tokens=6) == generate(reference, prompt, 6)


def test_caches_are_views_of_one_block():
    caches = kv_cache.allocate_caches(3, 16, 2, 8)
    assert [c.shape for c in caches[:2]] == [kv_cache.key_shape(16, 2, 8), kv_cache.value_shape(16, 2, 8)]
    assert len(caches) == 6 and all(c.base is caches[0].base and c.flags.c_contiguous for c in caches)
    assert not any(np.shares_memory(a, b) for i, a in enumerate(caches) for b in caches[i + 1:])
    assert all(not c.any() for c in caches)
