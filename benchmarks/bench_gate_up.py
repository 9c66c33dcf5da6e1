"""Gate and up as one GEMV launch (the pair epilogue) against two launches, in one standalone C driver.

SmolLM2's MLP input projections at decode: ``y = silu(x @ gate) * (x @ up)`` with 576 x 1536 q4_1
weights, float16 scales and 8-bit activations, as the engine runs them:

- ``merged``: one ``quantized_gemv.gemv_source`` kernel over the 576 x 3072 weight (gate columns, then up
  columns) with the pair epilogue ``silu(rs_prod) * rs_prod_hi``;
- ``separate``: the gate kernel (epilogue ``silu``, writing ``g``) then the up kernel (epilogue
  ``rs_prod * g[c]``), each over its own 576 x 1536 weight: what the model ran before.

Each round calls both, in alternating order, on copies of the weights cycled through ``--stream-mb``
(so each call reads its weights from memory, as in a decode step; ``--stream-mb 0``: one copy, cached),
for each team size. Printed per team: medians, 10th percentiles and minima of wall microseconds, and
the median of the per-round difference. The outputs of the two are compared once (they sum the same
integers with the same float operations: equal, but for the silu's ``expf`` compiled in another loop).

    python benchmarks/bench_gate_up.py [--threads 1,2] [--calls 2000] [--stream-mb 256] [--l1d-kib N]

``--l1d-kib N`` generates the kernels for an L1 of N KiB instead of this machine's (32: the merged
row is too wide for one row walk, which then walks each block's halves in turn, as on Zen 3).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from backends.c.codegen import HALF_TO_FLOAT_C  # noqa: E402
from backends.c.quantized_gemv import ColumnEpilogue, VectorFeatures, detect_features, gemv_source  # noqa: E402
from backends.c.status import C_DEFINES  # noqa: E402
from native_helpers import KERNEL_PRELUDE, TIMING_C, build_driver  # noqa: E402

ROWS, COLS = 576, 1536
SILU = "rs_prod / (1.0f + expf(-rs_prod))"
EPILOGUES = {
    "merged": ColumnEpilogue((), ("const float rs_g = " + SILU + ";",), "rs_g * rs_prod_hi"),
    "gate": ColumnEpilogue((), ("const float rs_g = " + SILU + ";",), "rs_g"),
    "up": ColumnEpilogue(("const float* restrict rs_gate = (const float*)rs_buffers[5];",), (),
                         "rs_prod * rs_gate[rs_col]"),
}


DRIVER = TIMING_C + r"""static void report(const char* name, double* t, int n) {
  double s = 0; for (int i = 0; i < n; ++i) s += t[i];
  qsort(t, n, sizeof(double), cmp);
  printf("%s %.3f %.3f %.3f\n", name, t[n / 2], t[n / 10], t[0]);
}

/* usage: driver copies calls threads. A copy: merged codes | scales | mins, then gate's and up's. */
int main(int argc, char** argv) {
  const int copies = atoi(argv[1]), calls = atoi(argv[2]);
  rs_team_size = atoi(argv[3]);
  const int64_t K = ROWS, F = COLS, blocks = K / 32;
  const int64_t merged_bytes = K / 2 * 2 * F + 2 * 2 * blocks * 2 * F, half_bytes = merged_bytes / 2;
  const int64_t stride = (2 * merged_bytes + 4095) / 4096 * 4096;
  const int64_t huge = 2 << 20;
  uint8_t* arena = aligned_alloc(huge, (stride * copies + huge - 1) / huge * huge);
  madvise(arena, (stride * copies + huge - 1) / huge * huge, MADV_HUGEPAGE);
  srand(1);
  for (int64_t i = 0; i < stride * copies; ++i) arena[i] = (uint8_t)rand();
  for (int c = 0; c < copies; ++c) {
    uint8_t* base = arena + c * stride;
    /* merged | gate | up, each codes (K/2 x width) then float16 scales and mins (2 blocks x width);
       gate and up hold the merged weight's halves; scales are small positive halves */
    uint16_t* s = (uint16_t*)(base + K / 2 * 2 * F);
    for (int64_t i = 0; i < 2 * blocks * 2 * F; ++i) s[i] = (uint16_t)(0x1400 + rand() % 0x400);
    uint8_t* m = base; uint8_t* g = base + merged_bytes; uint8_t* u = g + half_bytes;
    for (int64_t r = 0; r < K / 2; ++r) {
      memcpy(g + r * F, m + r * 2 * F, F); memcpy(u + r * F, m + r * 2 * F + F, F); }
    const uint16_t* ms = (const uint16_t*)(m + K / 2 * 2 * F);
    uint16_t* gs = (uint16_t*)(g + K / 2 * F); uint16_t* us = (uint16_t*)(u + K / 2 * F);
    for (int64_t r = 0; r < 2 * blocks; ++r) {
      memcpy(gs + r * F, ms + r * 2 * F, 2 * F); memcpy(us + r * F, ms + r * 2 * F + F, 2 * F); }
  }
  float* x = aligned_alloc(64, K * 4);
  float* y = aligned_alloc(64, (F + 16) * 4);
  float* y2 = aligned_alloc(64, (F + 16) * 4);
  float* gate = aligned_alloc(64, (F + 16) * 4);
  for (int64_t i = 0; i < K; ++i) x[i] = (float)(rand() % 2001 - 1000) * 1e-3f;
  double* t[3] = {malloc(sizeof(double) * calls), malloc(sizeof(double) * calls), malloc(sizeof(double) * calls)};
  for (int i = -copies; i < calls; ++i) {
    const int c = (i + copies) % copies;
    uint8_t* m = arena + c * stride; uint8_t* g = m + merged_bytes; uint8_t* u = g + half_bytes;
    void* merged[5] = {m, m + K / 2 * 2 * F, m + K / 2 * 2 * F + 2 * blocks * 2 * F, x, y};
    void* gb[5] = {g, g + K / 2 * F, g + K / 2 * F + 2 * blocks * F, x, gate};
    void* ub[6] = {u, u + K / 2 * F, u + K / 2 * F + 2 * blocks * F, x, y2, gate};
    double d[2];
    for (int v = 0; v < 2; ++v) {
      const int which = (i + v) & 1;
      const double t0 = now_us();
      if (which == 0) kernel_merged(merged, 0); else { kernel_gate(gb, 0); kernel_up(ub, 0); }
      d[which] = now_us() - t0;
    }
    if (i >= 0) { t[0][i] = d[0]; t[1][i] = d[1]; t[2][i] = d[1] - d[0]; }
  }
  float worst = 0.0f;
  for (int64_t j = 0; j < F; ++j) {
    const float e = fabsf(y[j] - y2[j]) / (1e-3f + fabsf(y2[j]));
    if (!(e <= worst)) worst = e;
  }
  printf("relative_difference %g 0 0\n", worst);
  report("merged", t[0], calls); report("separate", t[1], calls); report("saved", t[2], calls);
  return 0;
}
"""


def build(workdir: Path, l1d_kib: int = 0) -> Path:
    features = detect_features()
    if l1d_kib:
        features = VectorFeatures(features.name, features.vector_bytes, features.registers, l1d_kib << 10)
    roles = {"codes": 0, "scale": 1, "min": 2, "x": 3, "y": 4}
    parts = [C_DEFINES, KERNEL_PRELUDE, HALF_TO_FLOAT_C, f"#define ROWS {ROWS}\n#define COLS {COLS}"]
    for name, epilogue in EPILOGUES.items():
        cols = 2 * COLS if name == "merged" else COLS
        parts.append(gemv_source(f"kernel_{name}", "q4_1", ROWS, cols, roles, features, epilogue, "q8_0",
                                 "float16", pair=name == "merged"))
    parts.append(DRIVER)
    return build_driver(workdir, parts)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--stream-mb", type=int, default=256)
    parser.add_argument("--l1d-kib", type=int, default=0)
    args = parser.parse_args(argv)
    binary = build(Path(tempfile.mkdtemp(prefix="gate_up_")), args.l1d_kib)
    copy_bytes = 2 * (ROWS // 2 * 2 * COLS + 2 * 2 * ROWS // 32 * 2 * COLS)
    copies = max(1, (args.stream_mb << 20) // copy_bytes)
    print(f"q4_1 {ROWS} x 2 x {COLS}, float16 scales, 8-bit activations; {copies} copies "
          f"({'cached' if copies == 1 else 'streamed'}); load average {os.getloadavg()[0]:.2f}")
    print(f"{'thr':>3s} | {'merged us':>9s} {'p10':>6s} {'min':>6s} | {'separate us':>11s} {'p10':>6s} {'min':>6s}"
          f" | {'saved us (median of rounds)':>27s}")
    for threads in [int(t) for t in args.threads.split(",")]:
        env = dict(os.environ, OMP_WAIT_POLICY="active", OMP_PROC_BIND="true")
        out = subprocess.run([str(binary), str(copies), str(args.calls), str(threads)],
                             capture_output=True, text=True, check=True, env=env).stdout
        r = {line.split()[0]: [float(v) for v in line.split()[1:]] for line in out.splitlines()}
        m, s, d = r["merged"], r["separate"], r["saved"]
        print(f"{threads:3d} | {m[0]:9.2f} {m[1]:6.2f} {m[2]:6.2f} | {s[0]:11.2f} {s[1]:6.2f} {s[2]:6.2f}"
              f" | {d[0]:27.2f}   (outputs differ by {r['relative_difference'][0]:.1e} relative)", flush=True)


if __name__ == "__main__":
    main()
