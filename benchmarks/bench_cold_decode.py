"""Cold decode steps (every cache evicted first) of the LLM engine against the same moment's read of
the weights' bytes, per team size, for variants built in one process whose steps alternate.

Why this shape: the 2-core host is shared, its memory bandwidth moves by 2x within minutes, and
the adaptive team (no thread count set) runs one thread whenever another process is runnable; a
one-thread step against a two-thread read says nothing about the kernels. So every cold step is
timed right after a read of the same bytes with the same team size (``bench_llm.CacheEvictor``),
and variants rotate step by step. Hot steps (the same token again, caches warm) are timed after
each cold one.

Variants (``--variants``, any of):

- ``base``: the GEMVs generated with ``RELAXSCRIPT_GEMV_STREAM_PREFETCH=0`` (no prefetch of a
  block's scales and mins, nor of a thread's first codes) and runs without prefetch hints;
- ``kernels``: the GEMVs as generated now, runs without hints;
- ``hints``: the GEMVs as generated now and runs that prefetch the next call's first weight lines
  (``kernel_runs.prefetch_hints``, ``--hint-bytes`` per weight);
- ``arena``: ``kernels`` with the weights in one huge-page block (``llm/weight_arena``; the others
  have ``RELAXSCRIPT_WEIGHT_ARENA=0``: one NumPy array per tensor);
- ``all``: the arena, the kernels and the hints.

The team size is fixed per step through the runtime's team cell (``RELAXSCRIPT_NUM_THREADS`` is set
to the largest of ``--teams``). The first cold step's logits of every variant are compared
(prefetches change no result: they must be identical; the exit status is 1 otherwise).

    python benchmarks/bench_cold_decode.py [--model FILE] [--context 16] [--rounds 30] [--teams 1,2]
        [--variants base,kernels,hints] [--hint-bytes 2048]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _cpu_columns(pairs) -> str:
    """One thread's CPU time of the cold step and of the read before it (medians, ms) and their ratio:
    time the other processes' threads held the core is not in it."""
    import numpy as np
    c, r = (np.asarray([p[i] for p in pairs]) * 1e3 for i in (0, 1))
    return f" | {np.median(c):8.3f} {np.median(r):8.3f} {np.median(r) / np.median(c):5.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--context", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--teams", default="1,2")
    parser.add_argument("--variants", default="base,kernels,hints")
    parser.add_argument("--hint-bytes", type=int, default=None)
    args = parser.parse_args()
    teams = [int(t) for t in args.teams.split(",")]
    os.environ["RELAXSCRIPT_NUM_THREADS"] = str(max(teams))

    import numpy as np

    from bench_llm import CacheEvictor, weight_bytes_per_token
    from profile_decode import default_model

    from backends import threading as team_threads
    from backends.c.kernel_runs import HINT_BYTES
    from relaxscript.llm.engine import Engine

    path = args.model or default_model()
    hint_bytes = HINT_BYTES if args.hint_bytes is None else args.hint_bytes
    # variant -> (RELAXSCRIPT_GEMV_STREAM_PREFETCH, hint bytes, RELAXSCRIPT_WEIGHT_ARENA)
    settings = {"base": ("0", 0, "0"), "kernels": ("1", 0, "0"), "hints": ("1", hint_bytes, "0"),
                "arena": ("1", 0, "1"), "all": ("1", hint_bytes, "1")}
    names = args.variants.split(",")
    engines = {}
    for name in names:
        stream, hints, arena = settings[name]
        switches = {"RELAXSCRIPT_GEMV_STREAM_PREFETCH": stream, "RELAXSCRIPT_WEIGHT_ARENA": arena}
        saved = {key: os.environ.get(key) for key in switches}
        os.environ.update(switches)
        try:
            engine = Engine.from_gguf(path, target="c", weights="q4", max_context=args.context + 8,
                                      tokenizer=False, warm_up=False)
        finally:
            for key, value in saved.items():
                os.environ.pop(key)
                if value is not None:
                    os.environ[key] = value
        engine._vm.kernels.prefetch_hint_bytes = hints   # before this engine's frames are linked
        ids = np.arange(200, 200 + args.context + 1) % engine.config.vocab_size
        engine.reset()
        engine.prefill(ids[:args.context])
        engines[name] = engine
        engine._vm.kernels.prefetch_hint_bytes = None
    # engines built from the same sources share one kernel module: each links its frames above,
    # with its own setting; the decode frame links on the first decode, so run one per engine now
    evict, weight_bytes = CacheEvictor(max(teams)), weight_bytes_per_token(path)
    team = team_threads.team()
    token = int(ids[args.context])
    probe = np.ones(weight_bytes // 4, dtype=np.float32)   # the read: as many bytes as the weights
    first = {}
    for name, engine in engines.items():
        engine._vm.kernels.prefetch_hint_bytes = settings[name][1]
        evict()
        engine.position = args.context
        first[name] = np.array(engine.decode(token))
        engine._vm.kernels.prefetch_hint_bytes = None
    same = all(np.array_equal(first[names[0]], v) for v in first.values())
    print(f"weights per step {weight_bytes / 1e6:.1f} MB; load average before {os.getloadavg()[0]:.2f}; "
          f"logits of the variants identical: {same}")
    cold = {(n, t): [] for n in names for t in teams}
    hot = {(n, t): [] for n in names for t in teams}
    reads = {(n, t): [] for n in names for t in teams}
    cpu = {(n, t): [] for n in names for t in teams}   # team 1: the calling thread's CPU time (cold, read)
    for r in range(args.rounds):
        for threads in teams:
            team.current = threads
            evict.threads = threads
            order = names[r % len(names):] + names[:r % len(names)]
            for name in order:
                engine = engines[name]
                evict()
                start, cpu_start = time.perf_counter(), time.thread_time()
                evict.read_sum(probe.ctypes.data, probe.size, threads)
                reads[name, threads].append(time.perf_counter() - start)
                cpu_read = time.thread_time() - cpu_start
                evict()
                engine.position = args.context
                start, cpu_start = time.perf_counter(), time.thread_time()
                engine.decode(token)
                cold[name, threads].append(time.perf_counter() - start)
                cpu[name, threads].append((time.thread_time() - cpu_start, cpu_read))
                engine.position = args.context
                start = time.perf_counter()
                engine.decode(token)
                hot[name, threads].append(time.perf_counter() - start)
    print(f"{args.rounds} rounds, load average after {os.getloadavg()[0]:.2f}; ms, median / min; "
          "read: the same bytes from memory just before the step, same team")
    print(f"{'team':>4s} {'variant':8s} | {'cold med':>8s} {'min':>6s} | {'hot med':>7s} {'min':>6s} | "
          f"{'read med':>8s} {'min':>6s} | {'read/cold':>9s} {'per-step':>8s}")
    for threads in teams:
        for name in names:
            c, h, rd = (np.asarray(v[name, threads]) * 1e3 for v in (cold, hot, reads))
            print(f"{threads:4d} {name:8s} | {np.median(c):8.3f} {c.min():6.3f} | {np.median(h):7.3f} {h.min():6.3f} | "
                  f"{np.median(rd):8.3f} {rd.min():6.3f} | {np.median(rd) / np.median(c):9.2f} "
                  f"{np.median(rd / c):8.2f}" + (_cpu_columns(cpu[name, threads]) if threads == 1 else ""))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
