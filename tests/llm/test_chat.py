"""The chat command and its answer function, on the tiny random model with the NumPy reference."""
import io
import os
import subprocess
import sys

import numpy as np

from relaxscript.frontend.gguf import read_gguf
from relaxscript.llm.chat import answer, main, stop_ids
from relaxscript.llm.generation import GenerationStats
from relaxscript.llm.reference import NumpyLlama
from relaxscript.llm.tokenizer import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_answer_streams_the_greedy_reply(tiny_gguf_q4):
    gguf_file = read_gguf(tiny_gguf_q4)
    model, tokenizer = NumpyLlama(gguf_file, max_context=128), Tokenizer.from_gguf(gguf_file)
    messages = [{"role": "user", "content": "hello there"}]
    pieces, stats = [], GenerationStats()
    reply = answer(model, tokenizer, messages, max_new_tokens=10, on_text=pieces.append, stats=stats)
    assert "".join(pieces) == reply
    # the same tokens by hand: greedy from the templated prompt, cut at the first stop token
    prompt = tokenizer.encode(tokenizer.apply_chat_template(messages))
    model.reset()
    logits, ids = model.prefill(prompt), []
    while len(ids) < 10:
        token = int(np.argmax(logits))
        if token in stop_ids(tokenizer):
            break
        ids.append(token)
        logits = model.decode(token)
    assert reply == tokenizer.decode(ids, skip_special_tokens=True)
    assert stats.prompt_tokens == len(prompt) and stats.new_tokens == len(ids)
    assert stop_ids(tokenizer) == [2]          # eos is <|im_end|> in this file, as in SmolLM2


def test_command_line_prompt_and_interactive(tiny_gguf_f32):
    out = io.StringIO()
    assert main(["--model", tiny_gguf_f32, "--target", "numpy", "--prompt", "what is 42?",
                 "--max-new-tokens", "6"], out=out) == 0
    text = out.getvalue()
    assert "loaded for target 'numpy'" in text and "[prefill: " in text and "tokens/s | decode: " in text
    out = io.StringIO()
    assert main(["--model", tiny_gguf_f32, "--target", "numpy", "--max-new-tokens", "4", "--temperature", "0.8",
                 "--seed", "3"], out=out, inp=io.StringIO("hello\n\nsee you\n")) == 0
    assert out.getvalue().count("[prefill: ") == 2


def test_module_runs_as_a_command(tiny_gguf_f32):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), ROOT]))
    done = subprocess.run([sys.executable, "-m", "relaxscript.llm.chat", "--model", tiny_gguf_f32, "--target",
                           "numpy", "--prompt", "hi", "--max-new-tokens", "3"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "decode: " in done.stdout


def test_activations_option_reaches_the_model(tiny_gguf_q4):
    """``--activations`` picks the rounding of the matmul inputs: on the reference the q8 answer
    is the one of a NumpyLlama that rounds them, and differs in its logits from the exact one."""
    from relaxscript.llm.chat import load_model
    rounded, _ = load_model(tiny_gguf_q4, target="numpy", max_context=64, activations="q8")
    exact, _ = load_model(tiny_gguf_q4, target="numpy", max_context=64, activations="f32")
    assert (rounded.activations, exact.activations) == ("q8", "f32")
    prompt = [1, 5, 9, 14]
    assert not np.array_equal(rounded.prefill(prompt), exact.prefill(prompt))
    out = io.StringIO()
    assert main(["--model", tiny_gguf_q4, "--target", "numpy", "--activations", "q8", "--prompt", "hi",
                 "--max-new-tokens", "3"], out=out) == 0
