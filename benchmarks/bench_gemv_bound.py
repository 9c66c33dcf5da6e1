"""What bounds the decode GEMVs: the generated int8-activation kernels (``quantized_gemv.gemv_source``
with ``activations="q8_0"``) on SmolLM2's shapes, timed by a standalone C driver next to a plain
read loop over the same bytes.

For each shape the driver times, with the team sizes given (1 and 2 threads by default):

- ``cached``: one weight copy called again and again (it stays in L2/L3): the kernel's compute rate;
- ``stream``: enough copies cycled (``--stream-mb``) that every call reads from DRAM, as in a real
  decode step where 96 MB of weights pass per token;
- ``old``: the same, for the kernel generated with ``RELAXSCRIPT_GEMV_ROW_WALK=0`` (the register-
  blocked column split; with ``--baseline avx512-off`` instead ``RELAXSCRIPT_GEMV_AVX512=0``: the AVX2
  walks where the kernel has AVX-512 ones), its calls alternating with ``stream``'s so both
  see the same load;
  with ``--scales compare`` instead the kernel with float32 scales (``stream`` then has float16
  scales, GGUF's own: 2 bytes a block and column less to read);
- ``read``: an OpenMP sum of 64-bit words over the same copies with the same thread split and one
  parallel region per call: what streaming those bytes costs with no compute;
- ``empty``: a parallel region doing nothing: the team's fork/join cost per call.

``RS_BENCH_HUGEPAGES=1`` in the environment puts the copies in transparent huge pages (``madvise``), as
the engine's weights are (``relaxscript/llm/weight_arena.py``); without it they are in 4 KiB pages.

Times are medians (and 10th percentiles) over many calls, in microseconds, with the GB/s of weight
bytes (codes + scales + mins, each kernel its own scale dtype's). ``--scales f16`` times both
kernels with float16 scales. Run it on a quiet machine: other processes' memory traffic lowers
every column.
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
from backends.c.quantized_gemv import detect_features, gemv_source  # noqa: E402
from native_helpers import KERNEL_PRELUDE, TIMING_C, build_driver  # noqa: E402

# (name, in_features, out_features, format): SmolLM2-135M's decode projections (q/k/v merged)
SHAPES = [("qkv", 576, 960, "q4_1"), ("o_proj", 576, 576, "q4_1"), ("gate/up", 576, 1536, "q4_1"),
          ("down", 1536, 576, "q4_1"), ("lm_head", 576, 49152, "q8_0")]


DRIVER = TIMING_C + r"""static volatile uint64_t sink;

static uint64_t read_words(const uint64_t* p, int64_t n) {
  uint64_t total = 0;
  #pragma omp parallel num_threads(rs_threads()) reduction(+:total)
  {
    const int64_t team = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t lo = n * me / team, hi = n * (me + 1) / team;
    uint64_t a = 0, b = 0, c = 0, d = 0;
    for (int64_t i = lo; i + 3 < hi; i += 4) { a += p[i]; b += p[i + 1]; c += p[i + 2]; d += p[i + 3]; }
    total += a ^ b ^ c ^ d;
  }
  return total;
}

static void empty_region(void) {
  #pragma omp parallel num_threads(rs_threads())
  { sink += 0; }
}

/* usage: driver kernel baseline rows cols code_bytes scale_count has_min copies calls threads
          kernel_half baseline_half (1: that kernel reads float16 scales) */
int main(int argc, char** argv) {
  const int which = atoi(argv[1]), baseline = atoi(argv[2]);
  const int64_t rows = atoll(argv[3]), cols = atoll(argv[4]), code_bytes = atoll(argv[5]), scales = atoll(argv[6]);
  const int has_min = atoi(argv[7]);
  const int copies = atoi(argv[8]), calls = atoi(argv[9]);
  rs_team_size = atoi(argv[10]);
  const int half[2] = {atoi(argv[11]), atoi(argv[12])};
  /* a copy: codes | float32 scales (and mins) | float16 scales (and mins), the same values */
  const int64_t set = scales * (has_min ? 2 : 1);
  const int64_t weight_bytes = code_bytes + 4 * set;
  const int64_t stride = (weight_bytes + 2 * set + 4095) / 4096 * 4096;
  const int64_t huge = 2 << 20;   /* RS_BENCH_HUGEPAGES=1: the copies in transparent huge pages */
  uint8_t* arena = aligned_alloc(huge, (stride * copies + huge - 1) / huge * huge);
  if (getenv("RS_BENCH_HUGEPAGES") && atoi(getenv("RS_BENCH_HUGEPAGES")))
    madvise(arena, (stride * copies + huge - 1) / huge * huge, MADV_HUGEPAGE);
  srand(1);
  for (int64_t i = 0; i < stride * copies; ++i) arena[i] = (uint8_t)rand();
  for (int c = 0; c < copies; ++c) {
    float* s = (float*)(arena + c * stride + code_bytes);
    _Float16* h = (_Float16*)(arena + c * stride + weight_bytes);
    for (int64_t i = 0; i < set; ++i) { s[i] = (float)(rand() % 1000) * 1e-4f; h[i] = (_Float16)s[i]; }
  }
  float* x = aligned_alloc(64, rows * 4);
  float* y = aligned_alloc(64, (cols + 16) * 4);
  for (int64_t i = 0; i < rows; ++i) x[i] = (float)(rand() % 2001 - 1000) * 1e-3f;
  double* t[2] = {malloc(sizeof(double) * calls), malloc(sizeof(double) * calls)};
  /* cached: one copy; stream: kernel and baseline alternate over the cycled copies; read; empty */
  const char* modes[4] = {"cached", "stream", "read", "empty"};
  for (int mode = 0; mode < 4; ++mode) {
    for (int i = -copies; i < calls; ++i) for (int v = 0; v < (mode == 1 ? 2 : 1); ++v) {
      const int c = mode == 0 ? 0 : (2 * (i + copies) + v) % copies;
      uint8_t* base = arena + c * stride;
      void* buffers[5];
      const int h = half[mode == 1 ? v : 0];
      uint8_t* scale_at = base + code_bytes + (h ? 4 * set : 0);
      buffers[0] = base; buffers[1] = scale_at;
      buffers[2] = has_min ? (void*)(scale_at + (h ? 2 : 4) * scales) : (void*)x;
      buffers[3] = has_min ? (void*)x : (void*)y; buffers[4] = y;
      const double t0 = now_us();
      if (mode < 2) KERNEL(v ? baseline : which, buffers);
      else if (mode == 2) sink += read_words((const uint64_t*)base, weight_bytes / 8);
      else empty_region();
      const double t1 = now_us();
      if (i >= 0) t[v][i] = t1 - t0;
    }
    for (int v = 0; v < (mode == 1 ? 2 : 1); ++v) {
      qsort(t[v], calls, sizeof(double), cmp);
      printf("%s%s %.3f %.3f\n", modes[mode], v ? "_baseline" : "", t[v][calls / 2], t[v][calls / 10]);
    }
  }
  return 0;
}
"""


# --baseline -> the switches the 'old' column's kernel is generated under
BASELINES = {"row-walk-off": {"RELAXSCRIPT_GEMV_ROW_WALK": "0"}, "avx512-off": {"RELAXSCRIPT_GEMV_AVX512": "0"}}
SCALES = {"f32": ("float32", "float32"), "f16": ("float16", "float16"), "compare": ("float16", "float32")}
# --scales -> (the kernel's, the baseline's scale dtype)


def build(shapes, workdir: Path, scales: str = "f32", baseline: str = "row-walk-off") -> Path:
    """One driver holding each shape's kernel as generated now (``kernel_<i>``) and its baseline
    (``kernel_<i + 100>``, which the stream column alternates with): as generated with
    ``RELAXSCRIPT_GEMV_ROW_WALK=0``, or with ``scales="compare"`` the kernel with float32 scales
    where ``kernel_<i>`` reads float16 ones; with ``baseline="avx512-off"`` as generated with
    ``RELAXSCRIPT_GEMV_AVX512=0`` (the AVX2 walks where the kernel has AVX-512 ones)."""
    features = detect_features()
    parts, cases = [KERNEL_PRELUDE, HALF_TO_FLOAT_C], []
    kernel_dtype, baseline_dtype = SCALES[scales]
    for i, (_name, rows, cols, fmt) in enumerate(shapes):
        roles = {"codes": 0, "scale": 1, "min": 2, "x": 3, "y": 4} if fmt == "q4_1" else \
            {"codes": 0, "scale": 1, "x": 2, "y": 4}
        off = {} if scales == "compare" else BASELINES[baseline]
        variants = ((i, {}, kernel_dtype), (i + 100, off, baseline_dtype))
        for index, settings, scale_dtype in variants:
            switches = tuple(name for setting in BASELINES.values() for name in setting)
            saved = {name: os.environ.pop(name, None) for name in switches}
            os.environ.update(settings)
            try:
                parts.append(gemv_source(f"kernel_{index}", fmt, rows, cols, roles, features, activations="q8_0",
                                         scale_dtype=scale_dtype))
            finally:
                for name, value in saved.items():
                    os.environ.pop(name, None)
                    if value is not None:
                        os.environ[name] = value
            cases.append(f"case {index}: kernel_{index}(b, 0); break;")
    parts.append("static void KERNEL(int which, void* const* b) { switch (which) { "
                 + " ".join(cases) + " } }")
    parts.append(DRIVER)
    return build_driver(workdir, parts)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--stream-mb", type=int, default=256)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--only", default="", help="comma-separated shape names")
    parser.add_argument("--keep", default="", help="directory to keep the driver source in")
    parser.add_argument("--scales", choices=sorted(SCALES), default="f32",
                        help="the scales' dtype: f32 or f16 (kernel and row-walk-off baseline), or compare: "
                             "the kernel with float16 scales against float32 scales (the 'old' column)")
    parser.add_argument("--baseline", choices=sorted(BASELINES), default="row-walk-off",
                        help="the 'old' column's kernel: the register-blocked column split, or the AVX2 walks "
                             "instead of the AVX-512 ones")
    args = parser.parse_args(argv)
    shapes = [s for s in SHAPES if not args.only or s[0] in args.only.split(",")]
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="gemv_bound_"))
    workdir.mkdir(parents=True, exist_ok=True)
    binary = build(shapes, workdir, args.scales, args.baseline)
    kernel_dtype, baseline_dtype = SCALES[args.scales]
    old = "f32 sc us" if args.scales == "compare" else "old us"
    print(f"scales: kernel {kernel_dtype}, baseline ({old.split(' us')[0]}) {baseline_dtype}")
    print(f"{'shape':10s} {'thr':>3s} {'MB':>6s} | {'cached us':>9s} {'GB/s':>5s} | {'stream us':>9s} {'GB/s':>5s}"
          f" | {old:>9s} {'GB/s':>5s} | {'read us':>8s} {'GB/s':>5s} | {'fork us':>7s}")
    for name, rows, cols, fmt in SHAPES:
        if (name, rows, cols, fmt) not in shapes:
            continue
        which = shapes.index((name, rows, cols, fmt))
        code_bytes = rows * cols // (2 if fmt != "q8_0" else 1)
        scales = rows // 32 * cols
        has_min = fmt == "q4_1"

        def weight_bytes(dtype: str) -> int:
            return code_bytes + (2 if dtype == "float16" else 4) * scales * (2 if has_min else 1)
        nbytes, base_bytes = weight_bytes(kernel_dtype), weight_bytes(baseline_dtype)
        copies = max(2, (args.stream_mb << 20) // weight_bytes("float32"))
        for threads in [int(t) for t in args.threads.split(",")]:
            env = dict(os.environ, OMP_WAIT_POLICY="active", OMP_PROC_BIND="true")
            out = subprocess.run([str(binary), str(which), str(which + 100), str(rows), str(cols), str(code_bytes),
                                  str(scales), str(int(has_min)), str(copies), str(args.calls), str(threads),
                                  str(int(kernel_dtype == "float16")), str(int(baseline_dtype == "float16"))],
                                 capture_output=True, text=True, check=True, env=env).stdout
            result = {line.split()[0]: (float(line.split()[1]), float(line.split()[2]))
                      for line in out.splitlines()}

            def rate(us: float, nbytes: int = nbytes) -> float:
                return nbytes / us / 1e3
            print(f"{name:10s} {threads:3d} {nbytes / 1e6:6.2f}"
                  f" | {result['cached'][0]:9.1f} {rate(result['cached'][0]):5.1f}"
                  f" | {result['stream'][0]:9.1f} {rate(result['stream'][0]):5.1f}"
                  f" | {result['stream_baseline'][0]:9.1f} {rate(result['stream_baseline'][0], base_bytes):5.1f}"
                  f" | {result['read'][0]:8.1f} {rate(result['read'][0], weight_bytes('float32')):5.1f}"
                  f" | {result['empty'][0]:7.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
