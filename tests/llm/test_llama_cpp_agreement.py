"""llama.cpp's own reading of small random GGUF files of every architecture we run agrees with
ours: the reference's logits, the engine's greedy tokens, the tokenizer's ids.

Runs where llama-cpp-python is installed (the bench session: ``nox -s bench`` builds it;
``.nox/bench/bin/python -m pytest tests/llm/test_llama_cpp_agreement.py``); skipped elsewhere.
An independent implementation settles what the files mean (rotary style, biases, the split),
which our own reference cannot: for qwen2 the reference with the adjacent-pair rotation is 26%
of the largest logit away from llama.cpp, without the biases 89%; as read, 0.02%.
"""
import dataclasses

import numpy as np
import pytest

from relaxscript.frontend.gguf import ARCHITECTURES, llama_config, read_gguf
from relaxscript.llm.engine import Engine
from relaxscript.llm.reference import NumpyLlama
from relaxscript.llm.tokenizer import Tokenizer
from tests.llm.gguf_files import CORPUS, write_random_llama_gguf

llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python (the bench session's peer) is not installed")

IDS = list(range(3, 60, 3))
PROMPT = [5, 17, 33, 60, 2, 9, 11]


def _file(tmp_path, arch, qtypes):
    name = f"{arch}_{qtypes if isinstance(qtypes, str) else '_'.join(qtypes)}.gguf"
    return write_random_llama_gguf(tmp_path / name, architecture=arch, qtypes=qtypes, tie_embeddings=False,
                                   seed=5, rope_theta=1e6 if arch == "qwen2" else 1e4)


def _llama_cpp(path):
    return llama_cpp.Llama(model_path=str(path), n_ctx=64, logits_all=True, verbose=False, n_threads=1)


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_reference_logits_equal_llama_cpp(tmp_path, arch):
    path = _file(tmp_path, arch, "F32")
    llm = _llama_cpp(path)
    llm.eval(IDS)
    theirs = np.array(llm.scores[:len(IDS)])
    ours = NumpyLlama(path, max_context=64).forward(IDS)
    scale = np.abs(theirs).max()
    assert np.abs(ours - theirs).max() < 2e-3 * scale
    config = llama_config(read_gguf(path))
    if config.qkv_bias:   # the same comparison sees either mistake
        gguf_file = read_gguf(path)
        weights = {name: t.dequantize() for name, t in gguf_file.tensors.items()}
        other = "pairs" if config.rope_style == "halves" else "halves"
        wrong = NumpyLlama(dataclasses.replace(config, rope_style=other), weights, max_context=64).forward(IDS)
        assert np.abs(wrong - theirs).max() > 0.05 * scale


@pytest.mark.parametrize("arch, qtypes, weights", [("qwen2", "F32", "f32"), ("qwen2", ("Q4_1", "Q8_0"), "q4"),
                                                   ("qwen2", "Q8_0", "q4"), ("llama", ("Q4_1", "Q8_0"), "q4")])
def test_engine_greedy_tokens_equal_llama_cpp(tmp_path, arch, qtypes, weights):
    path = _file(tmp_path, arch, qtypes)
    ours = Engine.from_gguf(path, weights=weights, max_context=64).generate(PROMPT, max_new_tokens=16)
    theirs = []
    for token in _llama_cpp(path).generate(PROMPT, temp=0.0, top_k=1, reset=True):
        theirs.append(token)
        if len(theirs) == len(ours):
            break
    assert ours == theirs


def test_qwen2_tokenizer_equals_llama_cpp(tmp_path):
    path = _file(tmp_path, "qwen2", "F32")
    ours, llm = Tokenizer.from_gguf(path), _llama_cpp(path)
    for text in (CORPUS, "what is 1990 or 42? it's THE END\n\n  see you", "hello there,   the quick fox 777\n"):
        assert ours.encode(text, add_bos=False) == llm.tokenize(text.encode(), add_bos=False, special=False)
