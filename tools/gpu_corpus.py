"""Write the default GPU schedules of graph modules as TVMScript files, a corpus for gpu_sweep.

Developer tool (not part of the package, not run by the tests). The benchmark
workloads, the demo decoder and a few small modules of the shapes dlight
schedules (matmuls with symbolic rows, softmax, layer/RMS norm, reductions,
GEMVs, a dequantize-GEMV with symbolic rows and its decode form) go through the
graph passes up to FuseTIR and ``DefaultGPUSchedule``; every scheduled
prim_func is printed into ``OUT/gen_<module>.py`` (one file per module, each
function preceded by a comment naming the rule that scheduled it). Then::

    PYTHONPATH=src:. python tools/gpu_corpus.py /tmp/gpu_gen
    PYTHONPATH=src:. python tools/gpu_sweep.py /tmp/gpu_gen
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

OWN = {
"matmul_sym": '''
@R.function
def main(x: R.Tensor(("n", 96), "float32"), w: R.Tensor((96, 80), "float32"), b: R.Tensor((80,), "float32")):
    with R.dataflow():
        y = R.matmul(x, w)
        z = R.add(y, b)
        r = R.nn.relu(z)
        R.output(r)
    return r
''',
"matmul_f16": '''
@R.function
def main(x: R.Tensor(("n", 64), "float16"), w: R.Tensor((64, 48), "float16")):
    with R.dataflow():
        y = R.matmul(x, w)
        R.output(y)
    return y
''',
"batched_matmul": '''
@R.function
def main(q: R.Tensor((4, "n", 32), "float32"), k: R.Tensor((4, 32, "m"), "float32")):
    with R.dataflow():
        s = R.matmul(q, k)
        p = R.nn.softmax(s, axis=-1)
        R.output(p)
    return p
''',
"softmax_rows": '''
@R.function
def main(x: R.Tensor(("n", 200), "float32")):
    with R.dataflow():
        y = R.nn.softmax(x, axis=-1)
        R.output(y)
    return y
''',
"layernorm": '''
@R.function
def main(x: R.Tensor(("n", 96), "float32"), g: R.Tensor((96,), "float32"), b: R.Tensor((96,), "float32")):
    with R.dataflow():
        y = R.nn.layer_norm(x, g, b, axes=[-1])
        R.output(y)
    return y
''',
"rmsnorm_f16": '''
@R.function
def main(x: R.Tensor(("n", 128), "float16"), g: R.Tensor((128,), "float16")):
    with R.dataflow():
        y = R.nn.rms_norm(x, g, axes=[-1])
        R.output(y)
    return y
''',
"reductions": '''
@R.function
def main(x: R.Tensor(("n", 7, 33), "float32")):
    with R.dataflow():
        s = R.sum(x, axis=[2])
        m = R.max(x, axis=[1, 2])
        a = R.mean(x, axis=[1])
        R.output(s, m, a)
    return (s, m, a)
''',
"gemv_t": '''
@R.function
def main(x: R.Tensor((1, 256), "float32"), w: R.Tensor((72, 256), "float32")):
    with R.dataflow():
        wt = R.permute_dims(w)
        y = R.matmul(x, wt)
        g = R.nn.silu(y)
        R.output(g)
    return g
''',
"gemv_f16": '''
@R.function
def main(x: R.Tensor((1, 1, 128), "float16"), w: R.Tensor((128, 40), "float16")):
    with R.dataflow():
        y = R.matmul(x, w)
        R.output(y)
    return y
''',
}

DEQUANT = '''
@I.ir_module
class M:
    @T.prim_func
    def dequant(q: T.Buffer((T.int64(64), T.int64(16)), "uint32"), s: T.Buffer((T.int64(64), T.int64(4)), "float16"),
                w: T.Buffer((T.int64(64), T.int64(128)), "float16")):
        for i, j in T.grid(T.int64(64), T.int64(128)):
            with T.block("w"):
                vi, vj = T.axis.remap("SS", [i, j])
                w[vi, vj] = (T.Cast("float16", T.bitwise_and(T.shift_right(q[vi, vj // T.int64(8)],
                    T.Cast("uint32", vj % T.int64(8) * T.int64(4))), T.uint32(15))) - T.float16(8)) \\
                    * s[vi, vj // T.int64(32)]

    @R.function
    def main(x: R.Tensor(("n", 128), "float16"), q: R.Tensor((64, 16), "uint32"), s: R.Tensor((64, 4), "float16")):
        n = T.int64()
        with R.dataflow():
            w = R.call_tir(M.dequant, (q, s), out_sinfo=R.Tensor((64, 128), "float16"))
            wt = R.permute_dims(w)
            y = R.matmul(x, wt)
            R.output(y)
        return y

    @R.function
    def decode(x: R.Tensor((1, 128), "float16"), q: R.Tensor((64, 16), "uint32"), s: R.Tensor((64, 4), "float16")):
        with R.dataflow():
            w = R.call_tir(M.dequant, (q, s), out_sinfo=R.Tensor((64, 128), "float16"))
            wt = R.permute_dims(w)
            y = R.matmul(x, wt)
            R.output(y)
        return y
'''



def schedule_for_gpu(mod):
    """``(scheduled module, {rule: [kernel names]})`` (as benchmarks/gpu_schedule_report.py)."""
    from relaxscript import transform as T
    for step in (T.InlineFunctions(), T.LegalizeOps(), T.AnnotateTIROpPattern(), T.FuseOps(), T.FuseTIR()):
        mod = step(mod)
    schedule = T.DefaultGPUSchedule()
    return schedule(mod), schedule.last_report


def main(argv=None) -> int:
    import relaxscript as rx
    import tensorir as tir
    from benchmarks.workloads import WORKLOADS
    from examples.llama_decoder import TINY, llama_source
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    sources = {name: w.source for name, w in WORKLOADS.items()}
    sources["decoder"] = llama_source(TINY)
    sources.update({name: "@R.ir_module\nclass M:\n" + "\n".join("    " + line for line in text.splitlines())
                    for name, text in OWN.items()})
    sources["dequant_gemv"] = DEQUANT
    for name, source in sources.items():
        try:
            mod, report = schedule_for_gpu(rx.from_source(source))
        except Exception as err:  # noqa: BLE001 - reported, the other modules still run
            print(f"{name}: the schedule failed: {type(err).__name__}: {str(err)[:200]}")
            continue
        rules = {func: rule for rule, funcs in report.items() for func in funcs}
        parts = ["from tvm.script import tir as T\n"]
        for fname, func in mod.functions.items():
            if isinstance(func, tir.PrimFunc):
                parts.append(f"# rule: {rules.get(fname)}\n{func.script()}")
        (out / f"gen_{name}.py").write_text("\n\n".join(parts) + "\n")
        print(f"{name}: {len(parts) - 1} prim_funcs, rules {dict((r, len(f)) for r, f in report.items())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
