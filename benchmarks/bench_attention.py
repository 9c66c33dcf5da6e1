"""Fused attention on and off: the Llama-style prefill workload, same process, same inputs.

Builds ``rx.get_pipeline("c")`` with and without ``FuseAttention`` and times
both executables interleaved (one call of each per round, so a busy machine
slows both alike), median ms per n. Also reports the statically planned
activation memory (StaticPlanBlockMemory's storages over all functions,
kernel workspaces included, sized at the bound of n).

``--alone`` times the attention by itself, three ways: the generated C kernel
(backends/c/attention.py), the fused loop nest it replaces
(``RELAXSCRIPT_GENERATED_ATTENTION=0``) and the unfused BLAS path; on the
workload's form (8 heads x 64, causal additive mask, prefill n) and on the
SmolLM2 form (3 kv heads x 3 query heads x 64 over a KV cache of 2048, causal
``where``): decode at contexts 16/256/1024 and prefill of 16/64/256 tokens.

    python benchmarks/bench_attention.py [--sizes 1,32,128,512] [--rounds 15] [--alone]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from benchmarks.workloads import WORKLOADS  # noqa: E402

import relaxscript as rx  # noqa: E402
from relaxscript.analysis import memory_plan_info  # noqa: E402
from relaxscript.transform import FuseAttention  # noqa: E402


def pipelines() -> dict:
    # the default pipeline fuses only decode-shaped attention; "fused" lifts that bound
    default = rx.get_pipeline("c")
    every = [FuseAttention() if isinstance(p, FuseAttention) else p for p in default]
    return {"fused": every, "unfused": [p for p in default if not isinstance(p, FuseAttention)]}


def planned_bytes(mod, pipeline) -> int:
    """Activation bytes StaticPlanBlockMemory reserves over all functions (storages are sized
    at the bound of n, so this holds for every n)."""
    for p in pipeline:
        mod = p(mod)
    return sum(plan.planned_bytes_at_bounds or 0 for plan in memory_plan_info(mod).values())


HEADS, HEAD_DIM, KV_HEADS, GROUP, CAPACITY = 8, 64, 3, 3, 2048

PREFILL_ALONE = f'''
@R.ir_module
class Module:
    @R.function
    def main(qh: R.Tensor(({HEADS}, "n", {HEAD_DIM}), "float32"), k: R.Tensor(("n", {HEADS}, {HEAD_DIM}), "float32"),
             v: R.Tensor(("n", {HEADS}, {HEAD_DIM}), "float32")):
        n = T.int64(upper=2048)
        with R.dataflow():
            kt = R.permute_dims(k, [1, 2, 0])
            vh = R.permute_dims(v, [1, 0, 2])
            scores = R.multiply(R.matmul(qh, kt), R.const({1.0 / HEAD_DIM ** 0.5!r}, "float32"))
            mask = R.triu(R.full(R.shape([n, n]), R.const(-1e9, "float32")), k=1)
            probs = R.nn.softmax(R.add(scores, mask), axis=-1)
            out = R.matmul(probs, vh)
            R.output(out)
        return out
'''

LLM_ALONE = f'''
@R.ir_module
class Module:
    @R.function
    def main(q: R.Tensor(({KV_HEADS}, {GROUP}, "n", {HEAD_DIM}), "float32"),
             kt: R.Tensor(({KV_HEADS}, {HEAD_DIM}, {CAPACITY}), "float32"),
             vt: R.Tensor(({KV_HEADS}, {CAPACITY}, {HEAD_DIM}), "float32"), pos: R.Shape(["t"])):
        n = T.int64(upper=2048)
        t = T.int64(upper=2048)
        with R.dataflow():
            grouped = R.reshape(q, R.shape([{KV_HEADS}, {GROUP} * n, {HEAD_DIM}]))
            keys = R.strided_slice(kt, R.shape([2]), R.shape([0]), R.shape([t + n]), R.shape([1]))
            values = R.strided_slice(vt, R.shape([1]), R.shape([0]), R.shape([t + n]), R.shape([1]))
            scores = R.multiply(R.matmul(grouped, keys), R.const({1.0 / HEAD_DIM ** 0.5!r}, "float32"))
            scores = R.reshape(scores, R.shape([{KV_HEADS}, {GROUP}, n, T.min(t + n, {CAPACITY})]))
            key_pos = R.arange(R.prim_value(0), R.prim_value(T.min(t + n, {CAPACITY})), R.prim_value(1), dtype="int64")
            query_pos = R.reshape(R.arange(R.prim_value(t), R.prim_value(t + n), R.prim_value(1), dtype="int64"),
                                  R.shape([n, 1]))
            scores = R.where(R.less_equal(key_pos, query_pos), scores, R.const(-1e30, "float32"))
            probs = R.reshape(R.nn.softmax(scores, axis=-1),
                              R.shape([{KV_HEADS}, {GROUP} * n, T.min(t + n, {CAPACITY})]))
            out = R.matmul(probs, values)
            R.output(out)
        return out
'''


def _alone_builds(source: str) -> dict:
    """name -> main of the attention built generated / as the fused loop nest / unfused."""
    mod = rx.from_source(source)
    plans = pipelines()
    built = {}
    for name, pipeline, generated in (("generated", plans["fused"], "1"), ("loop nest", plans["fused"], "0"),
                                      ("unfused", plans["unfused"], "1")):
        previous = os.environ.get("RELAXSCRIPT_GENERATED_ATTENTION")
        os.environ["RELAXSCRIPT_GENERATED_ATTENTION"] = generated
        try:
            built[name] = rx.VirtualMachine(rx.build(mod, target="c", pipeline=list(pipeline)))["main"]
        finally:
            if previous is None:
                del os.environ["RELAXSCRIPT_GENERATED_ATTENTION"]
            else:
                os.environ["RELAXSCRIPT_GENERATED_ATTENTION"] = previous
    return built


CLOCK = time.perf_counter


def _time_alone(label: str, mains: dict, inputs: list, rounds: int) -> None:
    results = {name: np.asarray(run(*inputs)) for name, run in mains.items()}
    for name, value in results.items():
        np.testing.assert_allclose(value, results["unfused"], rtol=1e-3, atol=1e-4, err_msg=name)
    times = {name: [] for name in mains}
    for _ in range(rounds):
        for name, run in mains.items():
            start = CLOCK()
            run(*inputs)
            times[name].append(CLOCK() - start)
    us = {name: 1e6 * float(np.median(t)) for name, t in times.items()}
    print(f"{label:>22} " + " ".join(f"{us[name]:>10.1f}" for name in mains)
          + f" {us['unfused'] / us['generated']:>8.2f}x {us['loop nest'] / us['generated']:>8.2f}x", flush=True)


def alone(rounds: int) -> None:
    rng = np.random.default_rng(0)
    f = lambda *shape: rng.standard_normal(shape).astype(np.float32)  # noqa: E731
    header = (f"{'':>22} {'generated':>10} {'loop nest':>10} {'unfused':>10} {'vs unf.':>9} {'vs nest':>9}")
    clock = "CPU" if CLOCK is time.process_time else "wall"
    print(f"attention alone, median {clock} us over {rounds} interleaved rounds")
    print(f"Llama workload form ({HEADS} heads x {HEAD_DIM}, causal additive mask)\n{header}")
    mains = _alone_builds(PREFILL_ALONE)
    for n in (1, 32, 128, 512):
        _time_alone(f"prefill n={n}", mains, [f(HEADS, n, HEAD_DIM), f(n, HEADS, HEAD_DIM), f(n, HEADS, HEAD_DIM)],
                    rounds)
    print(f"SmolLM2 form ({KV_HEADS} kv heads x {GROUP} queries x {HEAD_DIM}, cache of {CAPACITY})\n{header}")
    mains = _alone_builds(LLM_ALONE)
    cache = [f(KV_HEADS, HEAD_DIM, CAPACITY), f(KV_HEADS, CAPACITY, HEAD_DIM)]
    for t in (16, 256, 1024):
        _time_alone(f"decode context {t}", mains, [f(KV_HEADS, GROUP, 1, HEAD_DIM), *cache, (t - 1,)], rounds)
    for n in (16, 64, 256):
        _time_alone(f"prefill {n} tokens", mains, [f(KV_HEADS, GROUP, n, HEAD_DIM), *cache, (0,)], rounds)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,32,128,512")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--alone", action="store_true", help="time the attention by itself (see above)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="with --alone: the process's CPU time instead of wall time (on a loaded machine, "
                             "with RELAXSCRIPT_NUM_THREADS=1, the work one thread does, waiting excluded)")
    args = parser.parse_args(argv)
    if args.alone:
        global CLOCK
        CLOCK = time.process_time if args.cpu_time else time.perf_counter
        alone(args.rounds)
        return
    workload = WORKLOADS["llama"]
    mod = rx.from_source(workload.source)
    plans = pipelines()
    mains = {name: rx.VirtualMachine(rx.build(mod, target="c", pipeline=list(p)))["main"]
             for name, p in plans.items()}
    mib = {name: planned_bytes(mod, p) / 2**20 for name, p in plans.items()}
    print(f"{workload.description}; median ms over {args.rounds} interleaved rounds")
    print(f"planned activation memory: fused {mib['fused']:.2f} MiB, unfused {mib['unfused']:.2f} MiB")
    print(f"{'n':>5} {'fused ms':>10} {'unfused ms':>11} {'speedup':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        inputs = workload.inputs(n)
        reference = workload.numpy_fn(*inputs)
        times = {name: [] for name in mains}
        for run in mains.values():
            np.testing.assert_allclose(np.asarray(run(*inputs)), reference, rtol=1e-3, atol=1e-3)
        for _ in range(args.rounds):
            for name, run in mains.items():
                start = time.perf_counter()
                run(*inputs)
                times[name].append(time.perf_counter() - start)
        ms = {name: 1e3 * float(np.median(t)) for name, t in times.items()}
        print(f"{n:>5} {ms['fused']:>10.2f} {ms['unfused']:>11.2f} {ms['unfused'] / ms['fused']:>7.2f}x",
              flush=True)


if __name__ == "__main__":
    main()
