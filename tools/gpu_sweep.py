"""Run GPU-scheduled TVMScript prim_funcs on the OpenCL target against the interpreter.

Developer tool (not part of the package, not run by the tests). It cuts items
out of Python files exactly as ``tools/tvmscript_sweep.py`` does (imported, not
copied), keeps the prim_funcs that are GPU-scheduled (a ``T.thread_binding``
loop or ``T.launch_thread``; items whose text names a GPU construct but does
not parse are counted as ``parse-error``) and, for each:

1. binds every symbolic dimension and scalar parameter to small values (two
   bindings), builds random inputs (floats ~ N(0, 1), integers in [0, 3)) for
   every buffer parameter;
2. runs the loop-level interpreter on a copy (the oracle);
3. lowers it for the GPU (``backends.gpu.lower_for_gpu``), runs the OpenCL
   program on PoCL through the test launcher (``tests/backends/gpu_launch``),
   and compares every buffer afterwards (what the kernel wrote; unwritten
   buffers keep their inputs on both sides);
4. compiles the CUDA source to PTX with NVRTC.

Buckets: ``ok``; ``opencl-mismatch``; ``opencl-error`` (category);
``nvrtc-error`` (category); ``lower-error`` (the shared GPU lowering refused
or crashed, category); ``not-runnable`` (why: the oracle failed on the random
inputs, too large for the interpreter, a parameter kind the launcher cannot
pass); ``parse-error`` (category, the parser's affair). A function whose
OpenCL result is right but whose CUDA fails to compile counts as
``nvrtc-error``.

Usage::

    PYTHONPATH=src:. python tools/gpu_sweep.py /tmp/gpu_corpus [/tmp/tvm_corpus]
        [--json out.json] [--show CATEGORY_SUBSTRING] [--examples N] [--max-elements N]

The input is other projects' code: keep it outside the repository.
"""
from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tvmscript_sweep import categorize, collect  # noqa: E402  (the tool's sibling)

GPU_MARKERS = re.compile(r"thread_binding|launch_thread|threadIdx|blockIdx|tvm_storage_sync|"
                         r"tvm_thread_allreduce|tvm_warp_shuffle")
BUCKETS = ("ok", "opencl-mismatch", "opencl-error", "nvrtc-error", "lower-error", "not-runnable",
           "parse-error")


@dataclass
class Result:
    file: str
    line: int
    name: str
    bucket: str
    category: str = ""
    message: str = ""


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


def _message(err: BaseException) -> str:
    return "".join(traceback.format_exception_only(type(err), err)).strip() + "\n" + \
        "".join(traceback.format_tb(err.__traceback__)[-4:])


def gpu_scheduled(func) -> bool:
    from tensorir.functor import collect as walk
    from tensorir.stmt import For
    return bool(walk(func.body, lambda n: isinstance(n, For) and n.kind == "thread_binding"))


def prim_funcs(parsed) -> list:
    import tensorir as tir
    if isinstance(parsed, tir.PrimFunc):
        return [("", parsed)]
    return [(name, f) for name, f in getattr(parsed, "functions", {}).items()
            if isinstance(f, tir.PrimFunc)]


# ---------------------------------------------------------------- inputs
def bindings_for(func, sizes) -> list[dict]:
    """{Var: int} for every symbolic dimension and scalar parameter, one dict per size."""
    from tensorir.expr import Var
    from tensorir.functor import collect as walk
    dims = []
    for buf in func.buffer_params:
        for d in buf.shape:
            for v in walk(d, lambda n: isinstance(n, Var)):
                if all(v is not o for o in dims):
                    dims.append(v)
    scalars = [p for p in func.params if isinstance(p, Var)]
    out = []
    for size in sizes:
        values = {v: size + i % 2 for i, v in enumerate(dims)}  # neighbours differ: catches swapped dims
        for p in scalars:
            values.setdefault(p, 1)
        out.append(values)
    return out


def arrays_for(func, values: dict, rng):
    import numpy as np

    from tensorir import dtype as dt
    from tensorir.arith import evaluate
    arrays = []
    for buf in func.buffer_params:
        shape = tuple(int(evaluate(d, values)) for d in buf.shape)
        dtype = np.dtype("uint8" if buf.dtype == "bool" else buf.dtype)
        if dt.is_float(buf.dtype):
            arr = rng.standard_normal(shape).astype(dtype)
        elif buf.dtype == "bool":
            arr = (rng.integers(0, 2, shape) > 0).astype(np.bool_)
        else:
            arr = rng.integers(0, 3, shape).astype(dtype)
        arrays.append(np.array(arr, dtype=dtype, order="C"))   # (ascontiguousarray makes a 0-d input 1-d)
    return arrays


def _tolerance(want, half: bool = False) -> dict:
    """Absolute part scaled by the result's magnitude: a float16 sum of hundreds of terms rounds
    at every step, and the interpreter (NumPy's pairwise sums) and a GPU thread (in order) round
    differently. ``half``: the function computes in float16 (a float32 result of a float16 GEMV
    carries float16 rounding)."""
    import numpy as np
    finite = want[np.isfinite(want)] if want.size else want
    scale = max(1.0, float(np.abs(finite).max())) if finite.size else 1.0
    if str(want.dtype) == "float16" or half:
        return {"rtol": 2e-2, "atol": 1e-2 * scale}
    return {"rtol": 1e-4, "atol": 1e-5 * scale}


def _close(got, want, half: bool = False):
    import numpy as np
    return np.isclose(got.astype("float64"), want.astype("float64"), equal_nan=True, **_tolerance(want, half))


def _same(got, want, half: bool = False) -> bool:
    import numpy as np
    if got.dtype.kind == "f":
        return bool(np.all(_close(got, want, half)))
    return bool(np.array_equal(got, want))


def computes_in_half(func) -> bool:
    """Whether any buffer of ``func`` (parameter or allocation) holds float16."""
    from tensorir.functor import collect as walk
    from tensorir.stmt import Allocate, Block
    if any(b.dtype == "float16" for b in func.buffer_params):
        return True
    allocs = walk(func.body, lambda n: isinstance(n, (Allocate, Block)))
    return any(getattr(n, "buffer", None) is not None and n.buffer.dtype == "float16" for n in allocs) or \
        any(b.dtype == "float16" for n in allocs for b in getattr(n, "alloc_buffers", ()))


# ---------------------------------------------------------------- one function
def check(func, sizes, max_elements: int, nvrtc: bool, seed: int = 0) -> tuple[str, str, str]:
    """(bucket, category, message) for one GPU-scheduled prim_func."""
    import numpy as np

    import tensorir as tir
    from backends.cuda.codegen import cuda_source
    from backends.gpu import lower_for_gpu
    from backends.opencl.codegen import opencl_source
    from tensorir.expr import Var
    from tests.backends.gpu_launch import run_opencl
    if any(not hasattr(p, "shape") and not isinstance(p, Var) for p in func.params):
        return "not-runnable", "a parameter that is neither a buffer nor a scalar", ""
    try:
        gfunc = lower_for_gpu(func.name or "f", func)
        ocl = opencl_source([gfunc])
    except Exception as err:  # noqa: BLE001 - tabulated
        return "lower-error", categorize(err), _message(err)
    rng = np.random.default_rng(seed)
    for values in bindings_for(func, sizes):
        try:
            arrays = arrays_for(func, values, rng)
        except Exception as err:  # noqa: BLE001
            return "not-runnable", f"inputs: {categorize(err)}", _message(err)
        if sum(a.size for a in arrays) > max_elements:
            return "not-runnable", f"over {max_elements} elements for the interpreter", ""
        scalars = {p.name: values[p] for p in func.params if isinstance(p, Var)}
        expected = [a.copy() for a in arrays]
        try:
            tir.interpret(func, *expected, **scalars)
        except _Timeout:
            return "not-runnable", "interpreter timed out", ""
        except Exception as err:  # noqa: BLE001
            return "not-runnable", f"oracle: {categorize(err)}", _message(err)
        try:
            status = run_opencl(gfunc, ocl, arrays, scalars)
        except _Timeout:
            raise
        except Exception as err:  # noqa: BLE001
            return "opencl-error", categorize(err), _message(err)
        if status != 0:
            return "opencl-error", f"status word {status}", ""
        half = computes_in_half(func)
        for buf, got, want in zip(func.buffer_params, arrays, expected):
            if not _same(got, want, half):
                bad = int(np.sum(~_close(got, want, half)) if got.dtype.kind == "f" else np.sum(got != want))
                binding = {v.name: n for v, n in values.items()}
                return "opencl-mismatch", f"buffer {buf.name!r}", \
                    f"{bad} of {got.size} elements differ at {binding}"
    if nvrtc:
        from backends.cuda.nvrtc import compile_ptx
        try:
            compile_ptx(cuda_source([gfunc]))
        except Exception as err:  # noqa: BLE001
            return "nvrtc-error", categorize(err), _message(err)
    return "ok", "", ""


def _nvrtc_available() -> bool:
    try:
        from backends.cuda.nvrtc import compile_ptx
        compile_ptx('extern "C" __global__ void probe() {}')
        return True
    except Exception:  # noqa: BLE001 - reported once, the column is skipped
        return False


def sweep(paths, sizes, max_elements, timeout, only=None) -> list[Result]:
    import relaxscript as rx
    nvrtc = _nvrtc_available()
    if not nvrtc:
        print("NVRTC is not available: CUDA compiles skipped", file=sys.stderr)
    results = []
    signal.signal(signal.SIGALRM, _alarm)
    for item in collect(paths):
        if item.negative or not GPU_MARKERS.search(item.text):
            continue
        if only and only not in f"{item.file}:{item.line}":
            continue
        try:
            parsed = rx.from_source(item.text, filename=f"{item.file}:{item.line}")
        except Exception as err:  # noqa: BLE001
            results.append(Result(item.file, item.line, item.name, "parse-error", categorize(err),
                                  _message(err)))
            continue
        for name, func in prim_funcs(parsed):
            if not gpu_scheduled(func):
                continue
            label = f"{item.name}.{name}" if name else item.name
            signal.alarm(timeout)
            try:
                bucket, cat, msg = check(func, sizes, max_elements, nvrtc)
            except _Timeout:
                bucket, cat, msg = "not-runnable", f"timed out after {timeout}s", ""
            finally:
                signal.alarm(0)
            results.append(Result(item.file, item.line, label, bucket, cat, msg))
    return results


def report(results: list[Result], examples: int, show: str | None) -> dict:
    buckets = Counter(r.bucket for r in results)
    print(f"\n== {len(results)} GPU-scheduled prim_funcs (parse errors count their item)")
    for b in BUCKETS:
        print(f"   {b:16s} {buckets.get(b, 0)}")
    cats = defaultdict(list)
    for r in results:
        if r.bucket != "ok":
            cats[(r.bucket, r.category)].append(r)
    for (bucket, cat), rs in sorted(cats.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"   {len(rs):4d}  [{bucket}] {cat}")
        for r in rs[:examples]:
            print(f"            {r.file}:{r.line} {r.name}")
    if show is not None:
        for r in results:
            if r.bucket != "ok" and show.lower() in f"{r.bucket} {r.category}".lower():
                print(f"\n--- {r.file}:{r.line} {r.name} [{r.bucket}] {r.category}\n{r.message}")
    return {"buckets": dict(buckets), "categories": {f"[{b}] {c}": len(rs) for (b, c), rs in cats.items()}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json", help="write per-function results and the summary here")
    ap.add_argument("--examples", type=int, default=3)
    ap.add_argument("--show", help="print messages of failures whose bucket/category contains this")
    ap.add_argument("--only", help="only items whose file:line contains this")
    ap.add_argument("--sizes", default="3,5", help="values the symbolic dims take, one run each")
    ap.add_argument("--max-elements", type=int, default=1 << 22)
    ap.add_argument("--timeout", type=int, default=120)
    args = ap.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    sizes = [int(s) for s in args.sizes.split(",")]
    results = sweep(args.paths, sizes, args.max_elements, args.timeout, args.only)
    summary = report(results, args.examples, args.show)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary,
                                               "results": [asdict(r) for r in results]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
