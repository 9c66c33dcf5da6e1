"""Per-instruction profile of one benchmark workload (benchmarks/workloads.py) through the VM.

Wraps each linked step of ``main``'s frame with a timer and prints, per instruction
(kernel or library name), the mean time per call of ``main``, next to the plain call's
median. Where the time of a small workload goes: kernels, library calls, checks
(MatchValues), allocations and the VM between them.

    python benchmarks/profile_workload.py llama 1 [--calls 200] [--top 25] [--relax-weights args] [--clock cpu]

``--clock cpu`` times each step in this thread's CPU time and runs one thread
(RELAXSCRIPT_NUM_THREADS=1, set before the first kernel runs): on a machine
other processes load, wall time counts their slices, CPU time does not.
"""
from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import median_ms  # noqa: E402
from workloads import WORKLOADS  # noqa: E402

import relaxscript as rx  # noqa: E402
from relaxscript.vm.linker import Frame  # noqa: E402


def step_label(ins) -> str:
    """An instruction's class and the kernel or library it calls."""
    target = getattr(ins, "kernel", "") or getattr(ins, "library", "") or getattr(ins, "name", "") or ""
    return f"{type(ins).__name__}:{target}" if isinstance(target, str) else type(ins).__name__


def timed_step(step, label: str, spent: dict, counts: dict, clock):
    """``step`` that adds its time (``clock``) to ``spent[label]`` and counts itself in ``counts[label]``."""
    def run():
        start = clock()
        nxt = step()
        spent[label] += clock() - start
        counts[label] += 1
        return nxt
    return run


def profile(name: str, n: int, calls: int, bound_weights: bool = True, pipeline=None,
            clock=time.perf_counter) -> tuple[float, float, list]:
    """(median ms of a plain call, instrumented ms per call, [(label, ms per call, count)]);
    ``clock`` times the steps and the instrumented calls."""
    workload = WORKLOADS[name]
    vm = rx.VirtualMachine(rx.build(workload.module(bound_weights), target="c", pipeline=pipeline))
    main = vm["main"]
    args = workload.activations(n) if bound_weights else workload.inputs(n)
    plain = median_ms(functools.partial(main, *args), budget_s=1.0, warmup_s=0.25)
    spent, counts = collections.defaultdict(float), collections.Counter()

    def timed(step, label):
        return timed_step(step, label, spent, counts, clock)
    for func_name in vm.exe.functions:   # every function: main calls others (the Llama layers)
        runtime = vm.function(func_name)
        frame = runtime.pool.pop() if runtime.pool else Frame(runtime.code, vm)
        labels = [f"{func_name}/{step_label(ins)}" for ins in runtime.func.code]
        # one step per instruction (a plain frame joins runs of kernel calls into one step)
        frame.steps[:] = [timed(step, labels[pc]) for pc, step in enumerate(frame.instruction_steps)]
        runtime.pool.append(frame)
    for _ in range(5):
        main(*args)
    spent.clear()
    counts.clear()
    start = clock()
    for _ in range(calls):
        main(*args)
    instrumented = (clock() - start) / calls * 1e3
    rows = sorted(((label, spent[label] / calls * 1e3, counts[label] // calls) for label in spent),
                  key=lambda row: -row[1])
    return plain, instrumented, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workload", choices=sorted(WORKLOADS))
    parser.add_argument("n", type=int)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--relax-weights", choices=("bound", "args"), default="bound",
                        help="weights as constants of the build (as bench_models.py) or per-call arguments")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="cpu: this thread's CPU time on one thread (robust to other processes' load)")
    args = parser.parse_args()
    clock = time.perf_counter
    if args.clock == "cpu":
        os.environ["RELAXSCRIPT_NUM_THREADS"] = "1"
        clock = time.thread_time
    plain, instrumented, rows = profile(args.workload, args.n, args.calls, args.relax_weights == "bound",
                                        clock=clock)
    print(f"{args.workload} n={args.n}: {plain:.3f} ms per call (median, wall), instrumented {instrumented:.3f} ms "
          f"({args.clock}), "
          f"sum of steps {sum(ms for label, ms, _ in rows if '/CallFunc' not in label):.3f} ms "
          f"(calls of functions include their steps), {sum(c for _, _, c in rows)} steps per call")
    for label, ms, count in rows[:args.top]:
        print(f"{ms:8.4f} ms  x{count:3d}  {label}")


if __name__ == "__main__":
    main()
