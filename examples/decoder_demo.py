"""The relaxscript demo: one build of a Llama-style decoder serves every sequence length.

The decoder (examples/llama_decoder.py: RMSNorm, RoPE, causal attention,
SwiGLU; default 2 layers, hidden 512, 8 heads, FFN 1408, n <= 1024) is
written in relaxscript's Python DSL with a symbolic sequence length ``n``.
The demo parses it, compiles it ONCE with ``rx.build(mod, target="c")``,
runs that one executable for several ``n``, and prints a report: time per
call, the kernels left after fusion, the static memory plan, the compile
time, and checks against the reference interpreter (small ``n``) and an
independent NumPy implementation (every ``n``). Any mismatch exits 1.

    python examples/decoder_demo.py            # the default config
    python examples/decoder_demo.py --quick    # a tiny config, a few n (used by the tests)
    python examples/decoder_demo.py --target opencl   # the same decoder on OpenCL (PoCL: a CPU device)
    python examples/decoder_demo.py --target "cuda -arch=sm_90"   # PTX via NVRTC; runs where a GPU exists
"""
from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
import traceback

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
for _path in (os.path.join(HERE, ".."), os.path.join(HERE, "..", "src")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import relaxscript as rx  # noqa: E402
from examples.llama_decoder import (TINY, LlamaConfig, llama_source, main_args,  # noqa: E402
                                    make_weights, numpy_reference)
from relaxscript.expr import Call, Function  # noqa: E402
from tensorir import PrimFunc  # noqa: E402
from tensorir.functor import collect  # noqa: E402

RTOL, ATOL = 2e-3, 2e-3                  # float32 kernels vs the float64 NumPy oracle
INTERP_RTOL, INTERP_ATOL = 1e-4, 1e-4    # float32 vs float32 reference interpreter
FULL_SIZES, QUICK_SIZES = (1, 16, 64, 128, 256), (1, 5, 16)
FULL_INTERP_MAX_N, QUICK_INTERP_MAX_N = 16, 16
# Kernels run OpenMP loops and matmuls call OpenBLAS; both pools spin, so these settings matter.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OPENBLAS_NUM_THREADS")


class Report:
    """Collects the sections, the skipped pieces and the failures of one demo run."""

    def __init__(self):
        self.skipped: list[str] = []
        self.failures: list[str] = []

    @staticmethod
    def section(title: str) -> None:
        print(f"\n== {title}", flush=True)

    def skip(self, what: str, why: str) -> None:
        self.skipped.append(f"{what}: {why}")
        print(f"   SKIPPED {what}: {why}")

    def fail(self, what: str, err: BaseException | str) -> None:
        message = err if isinstance(err, str) else f"{type(err).__name__}: {err}"
        first_line = message.splitlines()[0] if message else ""
        self.failures.append(f"{what}: {first_line}")
        shown = message if len(message) <= 1500 else message[:1500] + " ... (full text on stderr)"
        print(f"   FAILED {what}: {shown}")
        if isinstance(err, BaseException):
            traceback.print_exception(err, file=sys.stderr)


def missing_piece(name: str) -> str | None:
    """Why ``rx.<name>`` cannot be used yet (a module still being written), or None."""
    try:
        getattr(rx, name)
    except (ImportError, AttributeError) as err:
        return f"rx.{name} is not available ({err})"
    return None


WARMUP_S = 0.2


def median_ms(fn, repeat: int) -> float:
    # Warm up for a moment, not one call: first-call costs are not per-call costs, and NumPy's
    # OpenBLAS threads (the reference checks just ran) keep spinning on the cores for a while.
    start = time.perf_counter()
    fn()
    while time.perf_counter() - start < WARMUP_S:
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return 1e3 * statistics.median(samples)


def describe_model(cfg: LlamaConfig, report: Report):
    report.section("model")
    print(f"   Llama-style decoder: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads x "
          f"{cfg.head_dim}, SwiGLU {cfg.ffn}, sequence length n symbolic (n <= {cfg.max_len})")
    source = llama_source(cfg)
    start = time.perf_counter()
    mod = rx.from_source(source)
    parse_s = time.perf_counter() - start
    graph = {name: f for name, f in mod.functions.items() if not isinstance(f, PrimFunc)}
    print(f"   parsed {len(source.splitlines())} lines of relaxscript in {parse_s * 1e3:.0f} ms: "
          f"graph functions {', '.join(graph)}")
    return mod


class PipelineCapture:
    """A ``print_ir`` hook for PassContext: keeps the module after every pass, by pass name."""

    def __init__(self):
        self.after: dict[str, object] = {}
        self.order: list[str] = []

    def __call__(self, pass_name, module):
        self.after[pass_name] = module
        self.order.append(pass_name)

    def last(self):
        return self.after[self.order[-1]] if self.order else None


def compile_module(mod, report: Report, target: str = "c"):
    """``rx.build`` once, timed; returns (executable or None, PipelineCapture, seconds)."""
    report.section(f"compile: rx.build(mod, target={target!r}), once for every n")
    capture = PipelineCapture()
    why = missing_piece("build")
    if why:
        report.skip("compilation to C", why + "; timing the reference interpreter instead")
        return None, capture, None
    ctx = rx.transform.PassContext(print_ir=capture, time_passes=True)
    start = time.perf_counter()
    try:
        with ctx:
            exe = rx.build(mod, target=target)
    except Exception as err:  # a compiler bug must not hide the rest of the report
        report.fail("rx.build", err)
        return None, capture, None
    build_s = time.perf_counter() - start
    kernels = exe.kernels
    if target == "c":
        cache_note = "gcc ran" if exe.compiled else "gcc output found in the cache"
    else:
        cache_note = f"{len(kernels.kernel_names()) if kernels else 0} kernels"
        if getattr(kernels, "compile_seconds", 0):
            cache_note += f", NVRTC {kernels.compile_seconds:.2f} s for {len(kernels.ptx) // 1024} KiB of PTX"
    print(f"   compile time {build_s:.2f} s (IRModule -> pipeline -> {target} -> executable; {cache_note})")
    print(f"   pipeline: {' -> '.join(capture.order)}")
    for note in getattr(exe, "notes", ()):
        report.skip("pipeline step", note)
    if ctx.timings:
        slowest = sorted(ctx.timings, key=lambda t: -t.seconds)[:5]
        print("   slowest passes: " + ", ".join(f"{t.name} {t.seconds * 1e3:.0f} ms" for t in slowest))
    return exe, capture, build_s


FRONT_HALF = ("LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR")
TO_MEMORY_PLAN = FRONT_HALF + ("LiftWorkspace", "DeadCodeElimination", "CallTIRRewrite",
                               "StaticPlanBlockMemory")


def module_after(mod, capture: PipelineCapture, pass_name: str, chain, report: Report):
    """The module after ``pass_name``: from the build when it ran, else from running ``chain``."""
    if pass_name in capture.after:
        return capture.after[pass_name]
    passes = [getattr(rx.transform, name)() for name in chain if hasattr(rx.transform, name)]
    missing = [name for name in chain if not hasattr(rx.transform, name)]
    if pass_name in missing:
        report.skip(f"pass {pass_name}", f"rx.transform.{pass_name} is not available")
        return None
    try:
        result_capture = PipelineCapture()
        with rx.transform.PassContext(print_ir=result_capture):
            rx.transform.Sequential(passes)(mod)
        return result_capture.after[pass_name]
    except Exception as err:
        report.fail(f"passes up to {pass_name}", err)
        return None


def report_kernels(mod, capture: PipelineCapture, report: Report) -> None:
    report.section("kernels after fusion")
    fused = module_after(mod, capture, "FuseTIR", FRONT_HALF, report)
    legalized = module_after(mod, capture, "LegalizeOps", FRONT_HALF[:1], report)
    if fused is None or legalized is None:
        return
    count_before = sum(isinstance(f, PrimFunc) for f in legalized.functions.values())
    count_after = sum(isinstance(f, PrimFunc) for f in fused.functions.values())
    print(f"   prim_funcs: {count_before} after legalization -> {count_after} after fusion; "
          f"library calls (call_dps_library, e.g. BLAS matmul): {count_library_calls(fused)}")
    if hasattr(rx.analysis, "fusion_summary"):
        print(indent(rx.analysis.fusion_summary(fused).rstrip()))
    else:
        report.skip("fusion summary", "rx.analysis.fusion_summary is not available")


def count_library_calls(mod) -> int:
    return sum(len(collect(func, lambda node: isinstance(node, Call)
                           and getattr(node.op, "name", "").startswith("relax.call_dps_library")))
               for func in mod.functions.values() if isinstance(func, Function))


def report_memory(mod, capture: PipelineCapture, report: Report) -> None:
    report.section("static memory plan (sizes symbolic in n; 'at bounds' evaluated at n's upper bound)")
    planned = module_after(mod, capture, "StaticPlanBlockMemory", TO_MEMORY_PLAN, report)
    if planned is None:
        return
    if not hasattr(rx.analysis, "memory_plan"):
        report.skip("memory plan", "rx.analysis.memory_plan is not available")
        return
    try:
        print(indent(rx.analysis.memory_plan(planned).rstrip()))
    except Exception as err:
        report.fail("rx.analysis.memory_plan", err)


def indent(text: str, prefix: str = "   ") -> str:
    return "\n".join(prefix + line for line in text.splitlines())


def make_runner(mod, exe, report: Report):
    """(callable taking the arguments of main, label) for the compiled VM or the interpreter."""
    if exe is not None:
        try:
            vm = rx.VirtualMachine(exe)
            return vm["main"], f"compiled ({exe.target})"
        except Exception as err:
            report.fail("rx.VirtualMachine", err)
    return (lambda *args: rx.interpret(mod, "main", *args)), "reference interpreter"


def run_sizes(mod, exe, cfg, sizes, interp_max_n, repeat, report: Report) -> None:
    run, label = make_runner(mod, exe, report)
    report.section(f"run: one executable, every n ({label}; median of {repeat} calls)")
    weights = make_weights(cfg)
    print(f"   {'n':>5}  {'ms/call':>9}  {'max |err| vs NumPy':>19}  {'vs interpreter':>15}")
    for n in sizes:
        x = np.random.default_rng(n).standard_normal((n, cfg.hidden)).astype("float32")
        args = main_args(x, weights, cfg)
        try:
            got = run(*args)
            ms = median_ms(functools.partial(run, *args), repeat)
        except Exception as err:
            report.fail(f"run at n={n}", err)
            continue
        want = numpy_reference(x, weights, cfg)
        err_np = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        if not (got.shape == want.shape and np.allclose(got, want, rtol=RTOL, atol=ATOL)):
            report.fail(f"n={n} vs NumPy", f"shape {got.shape} vs {want.shape}, max |err| {err_np:.2e}")
        interp = "-"
        if n <= interp_max_n and label != "reference interpreter":
            ref = rx.interpret(mod, "main", *args)
            err_interp = float(np.abs(got - ref).max())
            interp = f"{err_interp:.1e}"
            if not np.allclose(got, ref, rtol=INTERP_RTOL, atol=INTERP_ATOL):
                report.fail(f"n={n} vs interpreter", f"max |err| {err_interp:.2e}")
        print(f"   {n:>5}  {ms:>9.3f}  {err_np:>19.1e}  {interp:>15}", flush=True)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny config and a few n (for tests)")
    parser.add_argument("--sizes", help="comma-separated sequence lengths n")
    parser.add_argument("--repeat", type=int, default=None, help="timed calls per n")
    parser.add_argument("--target", default="c", help="build target: c (default), opencl, cuda, "
                        "'cuda -arch=sm_90', interp")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = TINY if args.quick else LlamaConfig()
    sizes = tuple(int(s) for s in args.sizes.split(",")) if args.sizes else (
        QUICK_SIZES if args.quick else FULL_SIZES)
    too_long = [n for n in sizes if not 1 <= n <= cfg.max_len]
    if too_long:
        print(f"sizes {too_long} are outside 1..{cfg.max_len} (the model's bound on n)", file=sys.stderr)
        return 2
    repeat = args.repeat or (3 if args.quick else 7)
    report = Report()
    print("relaxscript demo: a Llama-style decoder compiled once, run for every sequence length n")
    print(f"   threads: {os.cpu_count()} CPUs; " + ", ".join(
        f"{name}={os.environ.get(name, 'unset')}" for name in THREAD_VARIABLES))

    mod = describe_model(cfg, report)
    exe, capture, _ = compile_module(mod, report, args.target)
    report_kernels(mod, capture, report)
    report_memory(mod, capture, report)
    run_sizes(mod, exe, cfg, sizes, QUICK_INTERP_MAX_N if args.quick else FULL_INTERP_MAX_N,
              repeat, report)

    report.section("summary")
    for line in report.skipped:
        print(f"   skipped: {line}")
    if report.failures:
        for line in report.failures:
            print(f"   FAILED: {line}")
        return 1
    print(f"   all checks passed: {len(sizes)} sizes against NumPy, n <= "
          f"{QUICK_INTERP_MAX_N if args.quick else FULL_INTERP_MAX_N} against the reference interpreter")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
