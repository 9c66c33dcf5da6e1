"""Time the graph-level pipeline front half and count kernels before/after fusion.

1. LegalizeOps -> AnnotateTIROpPattern -> FuseOps -> FuseTIR on the 2-layer
   Llama-style module, timed per pass by ``PassContext(time_passes=True)``
   (target: < 1 s in total).
2. Kernel counts (prim_funcs in the module and call_tir sites in the graph
   functions) after legalization and after fusion for the MLP block, the
   layer_norm -> scale -> softmax chain, and one Llama-style decoder layer.

    python benchmarks/bench_pipeline.py [--repeat 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from timing import format_table  # noqa: E402
from workloads import LLAMA_CONFIG, MLP_SOURCE, NORM_SOURCE, llama  # noqa: E402

import relaxscript as rx  # noqa: E402
from relaxscript.expr import Call, Function  # noqa: E402
from tensorir import PrimFunc  # noqa: E402
from tensorir.functor import collect  # noqa: E402

PIPELINE_TARGET_S = 1.0
FRONT_PASSES = ("LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR")


def front_half():
    """The passes this benchmark times, in pipeline order."""
    t = rx.transform
    return [getattr(t, name)() for name in FRONT_PASSES]


def run_timed(mod):
    with rx.transform.PassContext(time_passes=True) as ctx:
        start = time.perf_counter()
        for p in front_half():
            mod = p(mod)
        total = time.perf_counter() - start
    return mod, total, ctx


def kernel_counts(mod) -> tuple[int, int]:
    """(prim_funcs in the module, call_tir call sites across the graph functions)."""
    prim_funcs = sum(isinstance(f, PrimFunc) for f in mod.functions.values())
    sites = 0
    for func in mod.functions.values():
        if isinstance(func, Function):
            sites += len(collect(func, lambda node: isinstance(node, Call)
                                 and getattr(node.op, "name", None) == "relax.call_tir"))
    return prim_funcs, sites


def count_row(name: str, mod) -> list[str]:
    legalized = rx.transform.LegalizeOps()(mod)
    fused = rx.transform.FuseTIR()(rx.transform.FuseOps()(rx.transform.AnnotateTIROpPattern()(legalized)))
    before, after = kernel_counts(legalized), kernel_counts(fused)
    return [name, str(before[0]), str(after[0]), str(before[1]), str(after[1])]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs of the pipeline")
    args = parser.parse_args(argv)

    source = llama.llama_source(LLAMA_CONFIG)
    mod = rx.from_source(source)
    runs = [run_timed(mod)[1:] for _ in range(max(1, args.repeat))]
    totals = [total for total, _ in runs]
    median = statistics.median(totals)
    _, median_ctx = sorted(runs, key=lambda run: run[0])[len(runs) // 2]
    print(f"2-layer Llama-style module: {' -> '.join(FRONT_PASSES)}")
    print(f"first run {totals[0] * 1e3:.1f} ms, median of {len(totals)} runs {median * 1e3:.1f} ms "
          f"(target < {PIPELINE_TARGET_S:.0f} s: {'met' if median < PIPELINE_TARGET_S else 'MISSED'})")
    print("per pass (the median run):")
    print(median_ctx.timing_report())

    one_layer = llama.LlamaConfig(hidden=LLAMA_CONFIG.hidden, heads=LLAMA_CONFIG.heads,
                                  ffn=LLAMA_CONFIG.ffn, layers=1, max_len=LLAMA_CONFIG.max_len)
    rows = [count_row("MLP block (matmul+bias, gelu, matmul+bias, residual)", rx.from_source(MLP_SOURCE)),
            count_row("layer_norm -> *0.125 -> softmax over (n, 4096)", rx.from_source(NORM_SOURCE)),
            count_row("one Llama-style decoder layer", llama.build_module(one_layer))]
    print("\nkernels before / after fusion (prim_funcs in the module, call_tir sites in graph functions):")
    print(format_table(["module", "prim_funcs before", "after", "call_tir sites before", "after"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
