"""The machine's float32 multiply-add peak: GFLOP/s of a C loop that does nothing else.

Independent accumulator chains (enough to cover the FMA latency on two ports), one vector register
each: 64-byte vectors where the compiler targets AVX-512, 32-byte ones otherwise. Built here with
gcc ``-march=native``; each thread runs its own chains; the best of several passes. A GEMM can
at most reach this, so a target stated against a peer (0.8x onnxruntime) can be read against
what the cores can do at all.

    python benchmarks/machine_peak.py [--threads 1 2]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from native_helpers import load_c  # noqa: E402

PEAK_C = r"""
#include <omp.h>
#if defined(__AVX512F__)
typedef float vf __attribute__((vector_size(64)));
#define CHAINS 24
#else
typedef float vf __attribute__((vector_size(32)));
#define CHAINS 12
#endif
/* iterations x CHAINS multiply-adds of a vector per thread; returns the lanes per vector */
int fma_loop(long iterations, int threads, float *sink) {
    float total = 0.0f;
    #pragma omp parallel num_threads(threads) reduction(+:total)
    {
        vf acc[CHAINS], mul, add;
        for (int i = 0; i < (int)(sizeof(vf) / sizeof(float)); ++i) { mul[i] = 0.999f; add[i] = 0.001f; }
        for (int c = 0; c < CHAINS; ++c) acc[c] = mul * (float)c;
        for (long it = 0; it < iterations; ++it) {
            #pragma GCC unroll 24
            for (int c = 0; c < CHAINS; ++c) acc[c] = acc[c] * mul + add;
            __asm__("" : "+x"(mul));   /* keeps the loop from being folded away */
        }
        for (int c = 0; c < CHAINS; ++c) total += acc[c][0];
    }
    *sink = total;
    return (int)(sizeof(vf) / sizeof(float)) * CHAINS;
}
"""


def _loop():
    lib = load_c(PEAK_C, "-O2")
    lib.fma_loop.restype = ctypes.c_int
    lib.fma_loop.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    return lib.fma_loop


def peak_gflops(threads: int, passes: int = 5, iterations: int = 4_000_000) -> float:
    """Best GFLOP/s (a multiply-add counts 2) of ``threads`` threads over ``passes`` passes."""
    fma_loop, sink, best = _loop(), ctypes.c_float(), float("inf")
    for _ in range(passes):
        start = time.perf_counter()
        lanes = fma_loop(iterations, threads, ctypes.byref(sink))
        best = min(best, time.perf_counter() - start)
    return 2.0 * lanes * iterations * threads / best / 1e9


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    for threads in parser.parse_args().threads:
        print(f"float32 multiply-add peak, {threads} thread(s): {peak_gflops(threads):.1f} GFLOP/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
