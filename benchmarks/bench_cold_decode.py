"""Cold decode steps (every cache evicted first) of the LLM engine against the same moment's read of
the weights' bytes, per team size, for variants built in one process whose steps alternate.

Why this shape: the 2-core host is shared, its memory bandwidth moves by 2x within minutes, and the
adaptive team (no thread count set) runs one thread whenever another process is runnable; a
one-thread step against a two-thread read says nothing about the kernels. So every cold step is
timed right after a read of as many bytes (a NumPy array: huge pages) with the same team size, after
an eviction (``bench_llm.CacheEvictor``), and the variants rotate step by step. A hot step (the same
token again, caches warm) follows each cold one. With a team of one the calling thread's CPU time of
the cold step and of the read are printed too: time other processes held the core is not in them.

Variants (``--variants``, any of):

- ``split``: every parameter its own NumPy array (``RELAXSCRIPT_WEIGHT_ARENA=0``: 4 KiB pages for
  every tensor under NumPy's 4 MiB huge-page threshold, the layers);
- ``arena``: the engine's default, every parameter in one huge-page block (``llm/weight_arena``).

The team size is fixed per step through the runtime's team cell (``RELAXSCRIPT_NUM_THREADS`` is set
to the largest of ``--teams``). The first step's logits of the variants are compared (the same
values in other memory: they must be identical; the exit status is 1 otherwise).

    python benchmarks/bench_cold_decode.py [--model FILE] [--context 16] [--rounds 30] [--teams 1,2]
        [--variants split,arena]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SETTINGS = {"split": {"RELAXSCRIPT_WEIGHT_ARENA": "0"}, "arena": {"RELAXSCRIPT_WEIGHT_ARENA": "1"}}


def _cpu_columns(pairs) -> str:
    """The thread's CPU time of the cold step and of the read before it (medians, ms), their ratio."""
    import numpy as np
    cold, read = (np.asarray([p[i] for p in pairs]) * 1e3 for i in (0, 1))
    return f" | {np.median(cold):8.3f} {np.median(read):8.3f} {np.median(read) / np.median(cold):5.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--context", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--teams", default="1,2")
    parser.add_argument("--variants", default="split,arena")
    args = parser.parse_args()
    teams = [int(t) for t in args.teams.split(",")]
    os.environ["RELAXSCRIPT_NUM_THREADS"] = str(max(teams))

    import numpy as np

    from bench_llm import CacheEvictor, weight_bytes_per_token
    from profile_decode import default_model

    from backends import threading as team_threads
    from relaxscript.llm.engine import Engine

    path = args.model or default_model()
    names = args.variants.split(",")
    engines = {}
    for name in names:
        saved = {key: os.environ.get(key) for key in SETTINGS[name]}
        os.environ.update(SETTINGS[name])
        try:
            engines[name] = Engine.from_gguf(path, target="c", weights="q4", max_context=args.context + 8,
                                             tokenizer=False)
        finally:
            for key, value in saved.items():
                os.environ.pop(key)
                if value is not None:
                    os.environ[key] = value
    ids = np.arange(200, 200 + args.context + 1) % engines[names[0]].config.vocab_size
    token = int(ids[args.context])
    evict, weight_bytes = CacheEvictor(max(teams)), weight_bytes_per_token(path)
    probe = np.ones(weight_bytes // 4, dtype=np.float32)   # the read: as many bytes as the weights
    team = team_threads.team()
    first = {}
    for name, engine in engines.items():
        engine.reset()
        engine.prefill(ids[:args.context])
        first[name] = np.array(engine.decode(token))
    same = all(np.array_equal(first[names[0]], v) for v in first.values())
    print(f"weights per step {weight_bytes / 1e6:.1f} MB; load average before {os.getloadavg()[0]:.2f}; "
          f"logits of the variants identical: {same}")
    keys = [(n, t) for n in names for t in teams]
    cold, hot, reads, cpu = ({k: [] for k in keys} for _ in range(4))
    for r in range(args.rounds):
        for threads in teams:
            team.current = threads
            evict.threads = threads
            for name in names[r % len(names):] + names[:r % len(names)]:
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
    print(f"{args.rounds} rounds, load average after {os.getloadavg()[0]:.2f}; ms, median / min; read: as many "
          "bytes from memory just before the step, same team; team 1: CPU time (cold, read, read/cold)")
    print(f"{'team':>4s} {'variant':8s} | {'cold med':>8s} {'min':>6s} | {'hot med':>7s} {'min':>6s} | "
          f"{'read med':>8s} {'min':>6s} | {'read/cold':>9s} {'per-step':>8s} | {'cpu cold':>8s} {'cpu read':>8s} "
          f"{'ratio':>5s}")
    for threads in teams:
        for name in names:
            c, h, rd = (np.asarray(v[name, threads]) * 1e3 for v in (cold, hot, reads))
            print(f"{threads:4d} {name:8s} | {np.median(c):8.3f} {c.min():6.3f} | {np.median(h):7.3f} {h.min():6.3f} | "
                  f"{np.median(rd):8.3f} {rd.min():6.3f} | {np.median(rd) / np.median(c):9.2f} "
                  f"{np.median(rd / c):8.2f}" + (_cpu_columns(cpu[name, threads]) if threads == 1 else ""))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
