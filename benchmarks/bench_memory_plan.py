"""Paper Table 2: activation memory of successive prefills, static plan vs runtime pool.

A Llama-style decoder (hidden 512, 8 heads of 64, SwiGLU 1408, 2 layers,
sequence length ``n`` with ``upper=1024``) is written with graph-level ops,
legalized to call_tirs, and lowered with CallTIRRewrite. Two programs then
run prefills of n = 128, 256, 512, 1024 in succession, each sharing one
runtime pool (exact-size reuse of freed blocks) across the runs:

- without planning: every tensor is freed right after its last use
  (KillAfterLastUse) and the pool recycles blocks of exactly the same size;
- with planning: StaticPlanBlockMemory sizes every storage at n = 1024, so
  each run requests the same storages and the pool serves them again.

The reported number is the total bytes the pool obtained from the system
over all four runs (float32 here; the paper measures float16 Llama3-8B).
Run: ``python benchmarks/bench_memory_plan.py [--quick]``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path[:0] = [str(Path(__file__).resolve().parents[1] / "src")]

import relaxscript as rx  # noqa: E402
import relaxscript.interpreter as interp  # noqa: E402

HIDDEN, HEADS, HEAD_DIM, FFN, LAYERS, UPPER = 512, 8, 64, 1408, 2, 1024


def _layer(i: int, x: str) -> tuple[list[str], str, str]:
    p = f"l{i}_"
    lines = f"""
            {p}h = R.nn.rms_norm({x}, {p}g1, axes=-1, epsilon=1e-5)
            {p}q = R.matmul({p}h, {p}wq)
            {p}k = R.matmul({p}h, {p}wk)
            {p}v = R.matmul({p}h, {p}wv)
            {p}qh = R.permute_dims(R.reshape({p}q, R.shape([n, {HEADS}, {HEAD_DIM}])), axes=[1, 0, 2])
            {p}kt = R.permute_dims(R.reshape({p}k, R.shape([n, {HEADS}, {HEAD_DIM}])), axes=[1, 2, 0])
            {p}vh = R.permute_dims(R.reshape({p}v, R.shape([n, {HEADS}, {HEAD_DIM}])), axes=[1, 0, 2])
            {p}s = R.multiply(R.matmul({p}qh, {p}kt), R.const({HEAD_DIM ** -0.5}, "float32"))
            {p}masked = R.add({p}s, R.triu(R.full(R.shape([n, n]), R.const(-1e9, "float32")), k=1))
            {p}p = R.nn.softmax({p}masked, axis=-1)
            {p}o = R.reshape(R.permute_dims(R.matmul({p}p, {p}vh), axes=[1, 0, 2]), R.shape([n, {HIDDEN}]))
            {p}x1 = R.add({x}, R.matmul({p}o, {p}wo))
            {p}h2 = R.nn.rms_norm({p}x1, {p}g2, axes=-1, epsilon=1e-5)
            {p}act = R.multiply(R.nn.silu(R.matmul({p}h2, {p}wg)), R.matmul({p}h2, {p}wu))
            {p}x2 = R.add({p}x1, R.matmul({p}act, {p}wd))"""
    params = [f"{p}g1: R.Tensor(({HIDDEN},), \"float32\")", f"{p}g2: R.Tensor(({HIDDEN},), \"float32\")"]
    params += [f"{p}{w}: R.Tensor(({HIDDEN}, {HIDDEN}), \"float32\")" for w in ("wq", "wk", "wv", "wo")]
    params += [f"{p}{w}: R.Tensor(({HIDDEN}, {FFN}), \"float32\")" for w in ("wg", "wu")]
    params += [f"{p}wd: R.Tensor(({FFN}, {HIDDEN}), \"float32\")"]
    return params, lines, f"{p}x2"


def decoder_source() -> str:
    params, body, x = [], "", "x"
    for i in range(LAYERS):
        layer_params, lines, x = _layer(i, x)
        params += layer_params
        body += lines
    signature = ", ".join(['x: R.Tensor(("n", 512), "float32")'] + params)
    return f"""
@R.ir_module
class Module:
    @R.function
    def main({signature}) -> R.Tensor(("n", 512), "float32"):
        n = T.int64(upper={UPPER})
        with R.dataflow():{body}
            R.output({x})
        return {x}
"""


def weights(mod, rng) -> list[np.ndarray]:
    out = []
    for param in mod["main"].params[1:]:
        shape = tuple(int(d.value) for d in param.struct_info.shape)
        scale = 1.0 if len(shape) == 1 else shape[0] ** -0.5
        out.append((rng.standard_normal(shape) * scale).astype("float32"))
    return out


def run_prefills(mod, lengths, ws, rng):
    pool = interp.PooledAllocator()
    per_run, outputs = [], []
    with interp.use_allocator(pool):
        for n in lengths:
            x = rng.standard_normal((n, HIDDEN)).astype("float32")
            outputs.append(rx.interpret(mod, "main", x, *ws))
            per_run.append(interp.last_run_stats().allocated_bytes)
    return per_run, pool.total_allocated_bytes, outputs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="prefill lengths 8, 16, 32, 64 (upper 64)")
    args = parser.parse_args()
    global UPPER
    lengths = (128, 256, 512, 1024)
    if args.quick:
        UPPER, lengths = 64, (8, 16, 32, 64)

    start = time.perf_counter()
    mod = rx.from_source(decoder_source())
    legal = rx.transform.LegalizeOps()(mod)
    lowered = rx.transform.CallTIRRewrite()(legal)
    pooled = rx.transform.KillAfterLastUse()(lowered)
    planned = rx.transform.StaticPlanBlockMemory()(lowered)
    compile_s = time.perf_counter() - start
    info = rx.analysis.memory_plan_info(planned)["main"]
    print(f"decoder: {LAYERS} layers, hidden {HIDDEN}, {HEADS} heads x {HEAD_DIM}, "
          f"SwiGLU {FFN}, n <= {UPPER}")
    print(f"compile (legalize + rewrite + plan): {compile_s:.2f} s; "
          f"{sum(len(s.tensors) for s in info.storages)} tensors planned into {len(info.storages)} "
          f"storages of constant size, {len(info.unplanned)} unplanned (returned) tensor(s)")
    print(f"static plan: {info.planned_bytes_at_bounds / 2**20:.2f} MiB at n = {UPPER}")

    ws = weights(mod, np.random.default_rng(0))
    start = time.perf_counter()
    base_runs, base_total, base_out = run_prefills(pooled, lengths, ws, np.random.default_rng(1))
    plan_runs, plan_total, plan_out = run_prefills(planned, lengths, ws, np.random.default_rng(1))
    run_s = time.perf_counter() - start
    for a, b in zip(base_out, plan_out):
        np.testing.assert_allclose(b, a, rtol=1e-4, atol=1e-4)

    print(f"\nsuccessive prefills n = {', '.join(map(str, lengths))} ({run_s:.1f} s in the interpreter)")
    print(f"{'':34}" + "".join(f"{f'n={n}':>11}" for n in lengths) + f"{'total':>12}")
    for label, runs, total in (("runtime pool (w/o planning) MiB", base_runs, base_total),
                               ("static plan  (w/. planning) MiB", plan_runs, plan_total)):
        print(f"{label:34}" + "".join(f"{r / 2**20:11.2f}" for r in runs) + f"{total / 2**20:12.2f}")
    print(f"\nreduction of allocated activation memory: {100 * (1 - plan_total / base_total):.1f}% "
          "(paper Table 2, Llama3-8B prefill: 22%)")


if __name__ == "__main__":
    main()
