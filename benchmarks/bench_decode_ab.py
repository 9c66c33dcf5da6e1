"""Decode-step A/B of the LLM engine in one process: variants' steps alternate, so all see the same load.

Variants (built in this process, the same GGUF file, each its own engine and KV cache):

- ``before``: kernels generated with ``RELAXSCRIPT_GEMV_AVX512=0`` (the AVX2 walks) and a VM
  that links every kernel call as its own step (``kernel_runs=False``);
- ``runs``: the same kernels, runs of kernel calls joined into one native call (the VM's default);
- ``after``: the kernels as generated now (the AVX-512 walks where gcc targets AVX-512: the q8_0 VNNI
  walk, the 512-bit q4 row walk) and runs;
- ``separate``: as ``after``, with gate and up as two GEMV launches (``RELAXSCRIPT_MERGE_GATE_UP=0``),
  where ``after`` runs them as one launch with the ``silu(gate) * up`` pair epilogue;
- ``kv16`` / ``kvq8``: as ``after`` with the float16 / the 8-bit KV cache (``kv_cache="q8"``: its logits
  differ by the rounding, so only variants with the first one's cache are compared).

For each context, every variant prefills the same tokens, then ``--rounds`` decode steps at that
position alternate between the variants (the order rotates each round); medians, 10th percentiles and
minima in ms, and tokens/s from the medians. The logits of the first step are compared: the AVX-512
walks sum the same integers and scale them with the same float operations as the AVX2 ones, so
they are expected identical (a difference is reported and the exit status is 1).

    python benchmarks/bench_decode_ab.py [--model FILE] [--contexts 16,256] [--rounds 200]
        [--variants before,runs,after] [--clock wall|cpu]

``--prefill TOKENS`` times prefills of that many tokens instead (the variants alternating the same way,
``--rounds`` of them; their last logits compared).
``--clock cpu`` times each step in the calling thread's CPU time (with ``RELAXSCRIPT_NUM_THREADS=1``
the whole step runs there: time other processes held the core is left out).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from profile_decode import default_model  # noqa: E402

VARIANTS = {"before": ("0", False), "runs": ("0", True), "after": ("1", True), "separate": ("1", True, "0"),
            "kv16": ("1", True, "1", "f16"), "kvq8": ("1", True, "1", "q8")}


def make_engine(path: str, context: int, vnni: str, runs: bool, merge_gate_up: str = "1", kv_cache: str = "f16"):
    from relaxscript.llm.engine import Engine
    switches = {"RELAXSCRIPT_GEMV_AVX512": vnni, "RELAXSCRIPT_MERGE_GATE_UP": merge_gate_up}
    saved = {name: os.environ.get(name) for name in switches}
    os.environ.update(switches)
    try:
        engine = Engine.from_gguf(path, target="c", weights="q4", max_context=context, kv_cache=kv_cache)
    finally:
        for name, value in saved.items():
            if value is None:
                del os.environ[name]
            else:
                os.environ[name] = value
    engine._vm.kernel_runs = runs
    engine._decode_step.pool.clear()    # frames linked by the warm-up, before the setting
    engine._prefill_step.pool.clear()
    return engine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--contexts", default="16,256")
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--variants", default="before,runs,after")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    parser.add_argument("--prefill", type=int, default=0)
    args = parser.parse_args()
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    path = args.model or default_model()
    contexts = [int(c) for c in args.contexts.split(",")]
    names = args.variants.split(",")
    capacity = max(max(contexts), args.prefill) + 8
    engines = {name: make_engine(path, capacity, *VARIANTS[name]) for name in names}
    ids = np.arange(200, 200 + capacity) % 49152
    print(f"threads: {os.environ.get('RELAXSCRIPT_NUM_THREADS', 'adaptive')}; load average before "
          f"{os.getloadavg()[0]:.2f}")
    ok = True
    if args.prefill:
        return 0 if prefill_rounds(engines, names, ids, args, clock) else 1
    for context in contexts:
        first = {}
        for name, engine in engines.items():
            engine.reset()
            engine.prefill(ids[:context])
            first[name] = np.asarray(engine.decode(int(ids[context])))
        peers = [n for n in names if VARIANTS[n][3:] == VARIANTS[names[0]][3:]]    # the same KV cache
        same = all(np.array_equal(first[names[0]], first[n]) for n in peers)
        ok &= same
        times = {name: [] for name in names}
        for r in range(args.rounds):
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                engine = engines[name]
                engine.position = context
                start = clock()
                engine.decode(int(ids[context]))
                times[name].append(clock() - start)
        print(f"\ndecode @{context}: logits of the variants identical: {same}; {args.rounds} rounds, "
              f"{args.clock} clock, load average {os.getloadavg()[0]:.2f}")
        print_times(names, times, tokens=1)
    return 0 if ok else 1


def print_times(names: list, times: dict, tokens: int) -> None:
    """Each variant's median, 10th percentile and minimum (ms) and tokens/s from the median."""
    print(f"{'variant':8s} {'median ms':>9s} {'p10 ms':>7s} {'min ms':>7s} {'tokens/s':>8s}")
    for name in names:
        t = np.asarray(times[name]) * 1e3
        print(f"{name:8s} {np.median(t):9.3f} {np.percentile(t, 10):7.3f} {t.min():7.3f} "
              f"{tokens * 1e3 / np.median(t):8.1f}")


def prefill_rounds(engines: dict, names: list, ids, args, clock) -> bool:
    tokens = ids[:args.prefill]
    last, times = {}, {name: [] for name in names}
    for r in range(args.rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            engines[name].reset()
            start = clock()
            last[name] = np.asarray(engines[name].prefill(tokens))
            times[name].append(clock() - start)
    same = all(np.array_equal(last[names[0]], v) for v in last.values())
    spread = max(float(np.abs(last[names[0]] - v).max()) for v in last.values())
    print(f"\nprefill of {args.prefill} tokens: last logits identical: {same} (largest difference {spread:.2e}); "
          f"{args.rounds} rounds, {args.clock} clock, load average {os.getloadavg()[0]:.2f}")
    print_times(names, times, tokens=args.prefill)
    return same


if __name__ == "__main__":
    sys.exit(main())
