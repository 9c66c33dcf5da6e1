"""Quantized linear layers on the C backend: decode GEMV GB/s vs the machine's read
bandwidth, and prefill GEMM GFLOP/s vs OpenBLAS float32, on SmolLM2-135M's shapes.

Each layer is ``y = x @ R.dequantize(codes, scales[, mins])`` (float32 scales, as
``repack`` gives them) compiled by the normal
pipeline (the dequantize fuses into the product kernel). Decode cycles through
enough copies of each weight to exceed the last-level cache, so its GB/s is the
rate the codes stream from memory, as in a real decode step (about 96 MB of
quantized weights per token for the whole model). Timings on a shared machine
are noisy; compare numbers from one run.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

# NumPy's OpenBLAS (the sgemm column) gets the same 2 threads as our kernels unless told
# otherwise; its default (every core) collapses on a busy machine. Set before NumPy loads.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "2")

import numpy as np  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

import relaxscript as rx  # noqa: E402
from relaxscript.quantization import quantize_numpy  # noqa: E402
from timing import format_table, median_ms  # noqa: E402

# (name, in_features, out_features, format): SmolLM2-135M's projections and tied LM head
SHAPES = [("attn_q / attn_output", 576, 576, "q4_1"), ("attn_k / attn_v", 576, 192, "q4_1"),
          ("ffn_gate / ffn_up", 576, 1536, "q4_1"), ("ffn_down", 1536, 576, "q4_1"),
          ("lm_head (tied embd)", 576, 49152, "q8_0")]
# the model's decode kernels that fuse a stage after the product (SmolLM2's MLP and residuals):
# (name, in, out, format, extra (1, out) float32 inputs, Relax lines after ``y = x @ w``)
EPILOGUE_SHAPES = [
    ("ffn_gate + silu", 576, 1536, "q4_1", [], ["y = R.nn.silu(y)"]),
    ("ffn_up * silu(gate)", 576, 1536, "q4_1", ["g"], ["y = R.multiply(g, y)"]),
    ("attn_output + residual", 576, 576, "q4_1", ["h"], ["y = R.add(h, y)"]),
    ("ffn_down + residual", 1536, 576, "q4_1", ["h"], ["y = R.add(h, y)"]),
]
STREAM_BYTES = 256 << 20     # copies of a weight cycled through per decode measurement


def read_bandwidth_gbs(nbytes: int = 512 << 20) -> float:
    """NumPy's sum over a large float32 array: the machine's sequential read rate."""
    data = np.ones(nbytes // 4, np.float32)
    data.sum()
    return nbytes / (median_ms(data.sum, min_runs=3, max_runs=5, budget_s=2.0) / 1e3) / 1e9


def linear_module(fmt: str, rows: int, cols: int, tokens: str, extra: tuple = (), epilogue: tuple = ()):
    packed, dtype = (rows // 2, "uint8") if fmt == "q4_1" else (rows, "int8")
    mins = f', qm: R.Tensor(({rows // 32}, {cols}), "float32")' if fmt == "q4_1" else ""
    others = "".join(f', {name}: R.Tensor(({tokens}, {cols}), "float32")' for name in extra)
    stages = "".join(f"\n        {line}" for line in epilogue)
    return rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(x: R.Tensor(({tokens}, {rows}), "float32"), qd: R.Tensor(({packed}, {cols}), "{dtype}"),
         qs: R.Tensor(({rows // 32}, {cols}), "float32"){mins}{others}):
    with R.dataflow():
        y = R.matmul(x, R.dequantize(qd, qs{", qm" if mins else ""}, format="{fmt}")){stages}
        R.output(y)
    return y
""")})


def build_decode(fmt: str, k: int, n: int, generated: bool, extra: tuple = (), epilogue: tuple = ()):
    """The one-token layer compiled with the generated gemv kernel, or with the loop nest."""
    previous = os.environ.get("RELAXSCRIPT_GENERATED_KERNELS")
    os.environ["RELAXSCRIPT_GENERATED_KERNELS"] = "1" if generated else "0"
    try:
        return rx.VirtualMachine(rx.build(linear_module(fmt, k, n, "1", extra, epilogue), target="c"))["main"]
    finally:
        if previous is None:
            del os.environ["RELAXSCRIPT_GENERATED_KERNELS"]
        else:
            os.environ["RELAXSCRIPT_GENERATED_KERNELS"] = previous


def decode_rows(budget: float, times: dict, generated: bool = True) -> list[list[str]]:
    rng = np.random.default_rng(0)
    rows = []
    for name, k, n, fmt in SHAPES:
        run = build_decode(fmt, k, n, generated)
        tensors = quantize_numpy(rng.standard_normal((k, n)).astype(np.float32), fmt, "float32")
        nbytes = sum(t.nbytes for t in tensors)
        copies = [tuple(t.copy() for t in tensors) for _ in range(max(1, STREAM_BYTES // nbytes))]
        x = rng.standard_normal((1, k)).astype(np.float32)
        turn = iter(range(1 << 62))

        def step():
            run(x, *copies[next(turn) % len(copies)])
        ms = median_ms(step, min_runs=20, max_runs=2000, budget_s=budget, warmup_s=0.2)
        weight_f32 = np.float32(0).nbytes * k * n
        rows.append([name, fmt, f"{k}x{n}", f"{nbytes / 1e6:.2f}", f"{ms * 1e3:.0f}",
                     f"{nbytes / ms / 1e6:.1f}", f"{weight_f32 / nbytes:.1f}x"])
        times[name] = ms
    return rows


def activation_rows(budget: float) -> list[list[str]]:
    """Float32 input against 8-bit activations (``R.fake_quantize`` in front: the kernel rounds
    x and uses integer dot products), built side by side and timed in alternation, each call
    on a different copy of the weight (a copy the other variant just read would be cached)."""
    from relaxscript.transform.quantize_activations import QuantizeActivations
    rng = np.random.default_rng(3)
    rows = []
    for name, k, n, fmt in SHAPES:
        mod = linear_module(fmt, k, n, "1")
        runs = [rx.VirtualMachine(rx.build(m, target="c"))["main"] for m in (mod, QuantizeActivations()(mod))]
        tensors = quantize_numpy(rng.standard_normal((k, n)).astype(np.float32), fmt, "float32")
        nbytes = sum(t.nbytes for t in tensors)
        copies = [tuple(t.copy() for t in tensors) for _ in range(max(2, STREAM_BYTES // nbytes))]
        x = rng.standard_normal((1, k)).astype(np.float32)
        turn = iter(range(1 << 62))
        samples: list[list[float]] = [[], []]
        deadline = time.perf_counter() + 2 * budget
        while time.perf_counter() < deadline or len(samples[1]) < 20:
            for run, taken in zip(runs, samples):
                weights = copies[next(turn) % len(copies)]
                start = time.perf_counter()
                run(x, *weights)
                taken.append(time.perf_counter() - start)
        ms = [float(np.median(t)) * 1e3 for t in samples]
        rows.append([name, fmt, f"{k}x{n}", f"{ms[0] * 1e3:.0f}", f"{nbytes / ms[0] / 1e6:.1f}",
                     f"{ms[1] * 1e3:.0f}", f"{nbytes / ms[1] / 1e6:.1f}", f"{ms[0] / ms[1]:.2f}x"])
    return rows


def epilogue_rows(budget: float) -> list[list[str]]:
    """The fused kernels with an epilogue, loop nest and generated kernel side by side."""
    rng = np.random.default_rng(2)
    rows = []
    for name, k, n, fmt, extra, epilogue in EPILOGUE_SHAPES:
        tensors = quantize_numpy(rng.standard_normal((k, n)).astype(np.float32), fmt, "float32")
        nbytes = sum(t.nbytes for t in tensors)
        copies = [tuple(t.copy() for t in tensors) for _ in range(max(1, STREAM_BYTES // nbytes))]
        x = rng.standard_normal((1, k)).astype(np.float32)
        others = [rng.standard_normal((1, n)).astype(np.float32) for _ in extra]
        row = [name, f"{k}x{n}"]
        for generated in (False, True):
            run = build_decode(fmt, k, n, generated, tuple(extra), tuple(epilogue))
            turn = iter(range(1 << 62))

            def step():
                run(x, *copies[next(turn) % len(copies)], *others)
            ms = median_ms(step, min_runs=20, max_runs=2000, budget_s=budget, warmup_s=0.2)
            row += [f"{ms * 1e3:.0f}", f"{nbytes / ms / 1e6:.1f}"]
        rows.append(row + [f"{float(row[2]) / float(row[4]):.2f}x"])
    return rows


def prefill_rows(tokens: list[int], budget: float) -> list[list[str]]:
    rng = np.random.default_rng(1)
    rows = []
    for name, k, n, fmt in SHAPES[:4]:
        run = rx.VirtualMachine(rx.build(linear_module(fmt, k, n, '"n"'), target="c"))["main"]
        tensors = quantize_numpy(rng.standard_normal((k, n)).astype(np.float32), fmt, "float32")
        dense = rng.standard_normal((k, n)).astype(np.float32)
        for count in tokens:
            x = rng.standard_normal((count, k)).astype(np.float32)
            ours = median_ms(lambda: run(x, *tensors), budget_s=budget)
            blas = median_ms(lambda: x @ dense, budget_s=budget)
            flops = 2 * count * k * n
            rows.append([name, fmt, f"{k}x{n}", str(count), f"{ours:.3f}", f"{flops / ours / 1e6:.1f}",
                         f"{flops / blas / 1e6:.1f}"])
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, nargs="+", default=[16, 64, 256])
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per measurement")
    parser.add_argument("--decode-only", action="store_true", help="skip the prefill table")
    parser.add_argument("--activations-only", action="store_true",
                        help="only the float32-input vs 8-bit-activation decode table")
    parser.add_argument("--quick", action="store_true", help="prefill at 16 and 64 tokens, short budgets")
    args, _ = parser.parse_known_args(argv)
    if args.quick:
        args.tokens, args.budget = [16, 64], 0.3
    threads = os.environ.get("RELAXSCRIPT_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS") or "auto"
    print(f"threads: {threads} (NumPy's OpenBLAS: OPENBLAS_NUM_THREADS="
          f"{os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}); load average {os.getloadavg()[0]:.1f}")
    start = time.perf_counter()
    bandwidth = read_bandwidth_gbs()
    print(f"machine read bandwidth (NumPy sum over 512 MB): {bandwidth:.1f} GB/s")
    if args.activations_only:
        print("\ndecode GEMV, float32 input vs 8-bit activations (integer dot products), same run:")
        print(format_table(["layer", "format", "in x out", "f32 us", "GB/s", "q8 us", "GB/s", "speedup"],
                           activation_rows(args.budget)))
        return
    for generated in (False, True):
        kind = "generated micro-kernel" if generated else "scheduled loop nest"
        print(f"\ndecode GEMV ({kind}), x (1, in) @ quantized (in, out), weights streamed from memory:")
        times: dict[str, float] = {}
        rows = decode_rows(args.budget, times, generated)
        print(format_table(["layer", "format", "in x out", "MB", "us", "GB/s", "vs f32 bytes"], rows))
        whole_model(bandwidth, times)
    print("\ndecode GEMV, float32 input vs 8-bit activations (integer dot products), same run:")
    print(format_table(["layer", "format", "in x out", "f32 us", "GB/s", "q8 us", "GB/s", "speedup"],
                       activation_rows(args.budget)))
    print("\ndecode GEMV with a fused epilogue (the model's MLP and residual kernels), same run:")
    print(format_table(["kernel", "in x out", "loop nest us", "GB/s", "generated us", "GB/s", "speedup"],
                       epilogue_rows(args.budget)))
    if args.decode_only:
        return
    print("\nprefill GEMM, x (n, in) @ quantized (in, out) vs OpenBLAS sgemm on a float32 weight:")
    print(format_table(["layer", "format", "in x out", "n", "ms", "GFLOP/s", "sgemm GFLOP/s"],
                       prefill_rows(args.tokens, args.budget)))
    print(f"\n({time.perf_counter() - start:.0f} s)")


def whole_model(bandwidth: float, times: dict) -> None:
    model_mb = 30 * (2 * 576 * 576 + 2 * 576 * 192 + 3 * 576 * 1536) * 24 / 32 / 1e6 + 576 * 49152 * 36 / 32 / 1e6
    # per layer: q and output, k and v, gate and up, down; then the LM head
    matmul_ms = 30 * sum(times[name] * count for name, count in zip([s[0] for s in SHAPES[:4]], (2, 2, 2, 1))) \
        + times[SHAPES[4][0]]
    print(f"whole model: {model_mb:.0f} MB of codes and scales per token; at the machine's {bandwidth:.1f} GB/s "
          f"the streaming limit is {bandwidth * 1e3 / model_mb:.0f} tokens/s; these kernels take "
          f"{matmul_ms:.1f} ms per token ({1e3 / matmul_ms:.0f} tokens/s, "
          f"{model_mb / matmul_ms:.1f} GB/s, {model_mb / matmul_ms / bandwidth:.2f}x the read rate; "
          "attention and norms not counted)")


if __name__ == "__main__":
    main()
