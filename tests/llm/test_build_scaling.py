"""Building the Llama engine scales with distinct kernels, not with layers:
identical decoder layers share their prim_funcs, so the kernels scheduled and
compiled for many layers are the ones for a couple of them."""
from __future__ import annotations

import pytest

import relaxscript as rx
from relaxscript import nn
from relaxscript.frontend.gguf import LlamaConfig
from relaxscript.llm.model import LlamaForCausalLM
from relaxscript.transform import FuseTIR
from tensorir import PrimFunc


def _config(layers: int) -> LlamaConfig:
    return LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=48, num_layers=layers, num_heads=4,
                       num_kv_heads=2, head_dim=8, rope_theta=500.0, rms_norm_eps=1e-6, context_length=64,
                       tie_word_embeddings=True, bos_id=None, eos_id=None)


def _fused_kernels(layers: int) -> int:
    """prim_funcs left after FuseTIR, the ones the schedules, codegen and gcc see."""
    model = LlamaForCausalLM(_config(layers), 64, {})
    mod = nn.export(model, model.export_spec()).mod
    for step in rx.get_pipeline("c"):
        mod = step(mod)
        if isinstance(step, FuseTIR):
            break
    return sum(isinstance(f, PrimFunc) for f in mod.functions.values())


# One layer gives fewer kernels (its ops fuse with the embedding's and the head's);
# from two layers on, every further layer reuses the second one's kernels.
def test_more_layers_give_the_same_kernels():
    assert _fused_kernels(5) == _fused_kernels(2)


@pytest.mark.slow
def test_thirty_layers_give_the_kernels_of_two():
    assert _fused_kernels(30) == _fused_kernels(2)


def _pipeline_node_visits(layers: int, monkeypatch) -> int:
    """IR nodes expanded by tensorir walks over the whole default C pipeline (a
    deterministic stand-in for its cost)."""
    from tensorir import functor
    visits = [0]
    iter_children = functor.iter_children

    def counting(node):
        visits[0] += 1
        return iter_children(node)
    model = LlamaForCausalLM(_config(layers), 64, {})
    mod = nn.export(model, model.export_spec()).mod
    with monkeypatch.context() as patch:
        patch.setattr(functor, "iter_children", counting)
        for step in rx.get_pipeline("c"):
            mod = step(mod)
    return visits[0]


def test_pipeline_cost_grows_about_linearly_with_layers(monkeypatch):
    two, four, eight = (_pipeline_node_visits(n, monkeypatch) for n in (2, 4, 8))
    per_layer_low = (four - two) / 2
    per_layer_high = (eight - four) / 4
    # 1.17 when measured; a walk per primitive over a kernel that grows with
    # the layers (the shared rotary/cache kernel) made it quadratic.
    assert per_layer_high < 1.5 * per_layer_low
