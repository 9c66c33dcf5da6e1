"""Shape constraint analysis per workload (issue 16 item 1): facts found, fusions enabled,
run-time checks removed.

Each workload is lowered twice through the C pipeline (up to VM code; no C
compiler run): once as built today, once with shape facts switched off in
deduction (``shape_facts_disabled``) and ``ApplyShapeConstraints`` skipped.
Columns:

- ``facts``: equalities the functions' bindings establish (match_cast,
  ``R.assert_op``, checked reshape counts), by source;
- ``tightened`` / ``casts removed`` / ``op checks``: what ApplyShapeConstraints did (op checks:
  the view-op / topk / argmax checks it stated early, ``legalize/guards.py``; without the pass,
  LegalizeOps puts each unproven one before its kernel, counted in ``checks``);
- ``kernels`` and ``numpy calls``: kernel calls and VM calls of NumPy fallbacks (coarse ops)
  per function, with facts / without;
- ``checks``: run-time comparisons the VM makes per call (``MatchValues`` fail_if
  operations of parameters and match_casts, plus per-kernel-call checks), with / without.

Usage: ``python benchmarks/shape_constraints_report.py [--llm-layers 2] [--no-llm]``.
The LLM rows use the SmolLM2 GGUF when installed (its first ``--llm-layers``
layers: every layer is the same) and a small random GGUF otherwise.
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import os
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
for _path in (ROOT, os.path.join(ROOT, "src")):
    if _path not in sys.path:
        sys.path.insert(0, _path)

import relaxscript as rx  # noqa: E402
from relaxscript.shape_facts import shape_facts_disabled  # noqa: E402
from relaxscript.transform import ApplyShapeConstraints, PassContext  # noqa: E402
from relaxscript.vm import instructions as I  # noqa: E402
from relaxscript.vm.codegen import compile_module  # noqa: E402

REGROUP_SOURCE = '''
@R.ir_module
class Regroup:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c", "d"), "float32")):
        a = T.int64()
        b = T.int64()
        c = T.int64()
        d = T.int64()
        R.assert_op(R.prim_value(a * b == c * d), format="x and y must hold as many elements")
        with R.dataflow():
            h = R.nn.silu(x)
            f = R.reshape(h, R.shape([a * b]))
            g = R.reshape(y, R.shape([c * d]))
            z = R.multiply(f, g)
            out = R.reshape(z, R.shape([a, b]))
            R.output(out)
        return out
'''


@dataclasses.dataclass
class Row:
    workload: str
    function: str
    facts: str
    tightened: int
    casts_removed: int
    reshape_checks: int
    kernels: tuple
    numpy_calls: tuple
    checks: tuple


def _vm_counts(vm_function) -> tuple[int, int, int]:
    kernels = fallbacks = checks = 0
    for ins in vm_function.code:
        if isinstance(ins, I.CallKernel):
            kernels += 1
            if ins.call_site is not None:
                checks += len(ins.call_site.checks) + len(ins.call_site.structure)
        elif isinstance(ins, I.CallFallback):
            fallbacks += 1
        elif isinstance(ins, I.MatchValues):
            checks += sum(1 for op in ins.checks if op[0] == "fail_if")
    return kernels, fallbacks, checks


def _lower(make_module, facts: bool):
    """(VM functions, ApplyShapeConstraints stats) of the C pipeline."""
    if facts:
        mod = make_module()
        passes = rx.get_pipeline("c")
        for step in passes:
            mod = step(mod)
        stats = next(p.stats for p in passes if isinstance(p, ApplyShapeConstraints))
        return compile_module(mod)[0], stats
    with shape_facts_disabled(), PassContext(disabled=("ApplyShapeConstraints",)):
        mod = make_module()
        for step in rx.get_pipeline("c"):
            mod = step(mod)
        return compile_module(mod)[0], {}


def report(name: str, make_module) -> list[Row]:
    with_facts, stats = _lower(make_module, True)
    without, _ = _lower(make_module, False)
    rows = []
    for fname in sorted(with_facts):
        if fname not in without:
            continue
        s = stats.get(fname)
        sources = collections.Counter((f.source.split(" '")[0] for f in s.facts) if s else ())
        facts = ", ".join(f"{n} {src}" for src, n in sources.items()) or "0"
        a, b = _vm_counts(with_facts[fname]), _vm_counts(without[fname])
        rows.append(Row(name, fname, facts, len(s.tightened) if s else 0, len(s.casts_removed) if s else 0,
                        len(s.checks_added) if s else 0, (a[0], b[0]), (a[1], b[1]), (a[2], b[2])))
    return rows


def _workload_modules():
    from benchmarks.workloads import WORKLOADS
    for key in ("mlp", "norm_softmax", "llama"):
        src = WORKLOADS[key].source
        yield key, (lambda src=src: rx.from_source(src))
    yield "regroup (assert fact)", (lambda: rx.from_source(REGROUP_SOURCE))


def _llm_module_factory(layers: int):
    from relaxscript import nn
    from relaxscript.frontend.gguf import llama_config, read_gguf
    from relaxscript.llm.engine import _weight_formats
    from relaxscript.llm.model import LlamaForCausalLM
    from relaxscript.llm.model_files import smollm2_path
    path = smollm2_path()
    if path is None:   # not installed: a small random model of the same architecture
        from tests.llm.gguf_files import write_random_llama_gguf
        path = os.path.join(tempfile.mkdtemp(), "random.gguf")
        write_random_llama_gguf(path)
    gguf = read_gguf(path)
    config = dataclasses.replace(llama_config(gguf), num_layers=min(layers, llama_config(gguf).num_layers))
    formats = _weight_formats(gguf)

    def make():
        model = LlamaForCausalLM(config, 256, formats)
        return nn.export(model, model.export_spec()).mod
    return f"LLM ({os.path.basename(path)}, {config.num_layers} layers)", make


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm-layers", type=int, default=2)
    parser.add_argument("--no-llm", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for name, make in _workload_modules():
        rows += report(name, make)
    if not args.no_llm:
        name, make = _llm_module_factory(args.llm_layers)
        rows += report(name, make)
    header = ("workload", "function", "facts", "tightened", "casts removed", "op checks",
              "kernels (with/without)", "numpy calls", "checks")
    table = [header] + [(r.workload, r.function, r.facts, str(r.tightened), str(r.casts_removed),
                         str(r.reshape_checks), "%d / %d" % r.kernels, "%d / %d" % r.numpy_calls,
                         "%d / %d" % r.checks) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths)))


if __name__ == "__main__":
    main()
