"""Sweep TVMScript text through relaxscript's parser and tabulate what fails.

Developer tool (not part of the package, not run by the tests). Given Python
files (or directories of them), it finds by AST, without importing or running
anything, every ``@I.ir_module`` / ``@tvm.script.ir_module`` class and every
``@T.prim_func`` / ``@R.function`` def that is not a member of such a class
(top level or nested in a test function), cuts out its text (decorator lines
included, dedented) and:

1. parses it with ``relaxscript.from_source``;
2. prints the result with ``.script()`` and parses that again (round trip:
   structurally equal, and the second print equal to the first).

Each item lands in one bucket:

- ``parsed+roundtrip``: both steps succeed;
- ``parsed, roundtrip failed``: the first parse succeeds, the second does not
  (or the results differ): a printer/parser disagreement, always our bug;
- ``failed``: the first parse raised; tabulated by error category (the
  message with names, numbers and quoted text blanked out); a raise that is
  not a ``ParseError`` is marked ``[internal]``: those are bugs whatever the
  input;
- ``not self-contained``: the text reads Python names it does not bind (a
  closure over test variables, ``T.meta_var`` values, ``tvm.`` API calls in a
  body, f-strings): TVM evaluates those in the enclosing Python scope, which
  ``from_source`` by design never does; parsed anyway and counted apart;
- ``negative``: the item sits inside ``with pytest.raises(...)`` (or an
  xfail test): TVM itself refuses it; counted apart, not as our failures.

With ``--run``, every prim_func of an item that round-trips is also built the way a build
takes a module (``kernels_of``: calls between prim_funcs inlined, LLVM intrinsics mapped,
subroutines refused as kernels) and run on random inputs in the loop-level interpreter (the
NumPy reference) and as a compiled C kernel; every buffer is compared. Symbolic dims and
integer scalar parameters are bound to small values (``--dim``); GPU-scheduled functions
(thread bindings), buffers of more than ``--max-elements`` and handle parameters are skipped.
Buckets: ``run ok``, ``mismatch``, ``c error``, ``interp stops`` (the reference raised, e.g.
an index the small bound dims put out of range; the C kernel, which checks no bounds, is then
not run), ``refused at build`` (an error naming what cannot run), ``skipped``.

Usage::

    PYTHONPATH=src python tools/tvmscript_sweep.py /tmp/tvmsrc [--json out.json]
        [--show CATEGORY_SUBSTRING] [--examples N] [--run [--dim 3]]

The input is other projects' code: keep it outside the repository (e.g. under
/tmp); only this tool and the numbers it prints belong here.
"""
from __future__ import annotations

import argparse
import ast
import builtins
import json
import re
import signal
import sys
import textwrap
import traceback
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

MODULE_DECORATORS = {"ir_module"}
FUNC_DECORATORS = {"prim_func", "function"}
# Names a self-contained script may read without binding them.
SCRIPT_NAMESPACES = {"R", "T", "I", "tvm", "relax", "tir"}
# ``relax.call_tir`` (TVM's Python module inside a script) reads as R.call_tir.
ALLOWED_FREE = set(dir(builtins)) | {"R", "T", "I", "relax"}


@dataclass
class Item:
    file: str
    line: int
    name: str
    kind: str                # "module" | "prim_func" | "function"
    text: str
    negative: bool = False
    not_self_contained: list = field(default_factory=list)
    bucket: str = ""
    category: str = ""
    message: str = ""
    runs: list = field(default_factory=list)   # --run: (kernel, bucket, category) per prim_func


# ---------------------------------------------------------------- finding items
def _decorator_name(dec: ast.expr) -> str | None:
    target = dec.func if isinstance(dec, ast.Call) else dec
    if isinstance(target, ast.Attribute):
        return target.attr
    if isinstance(target, ast.Name):
        return target.id
    return None


def _decorator_root(dec: ast.expr) -> str | None:
    target = dec.func if isinstance(dec, ast.Call) else dec
    while isinstance(target, ast.Attribute):
        target = target.value
    return target.id if isinstance(target, ast.Name) else None


def _is_script_decorator(dec: ast.expr, names: set) -> bool:
    name = _decorator_name(dec)
    if name not in names:
        return False
    # `@function` alone is too common a Python name: require a namespace
    # (R.function, T.prim_func, tvm.script.ir_module, I.ir_module) or the
    # unambiguous bare names prim_func / ir_module.
    root = _decorator_root(dec)
    return root in SCRIPT_NAMESPACES or (root == name and name != "function")


def _raises_context(node: ast.With) -> bool:
    for item in node.items:
        call = item.context_expr
        if isinstance(call, ast.Call) and _decorator_name(call) == "raises":
            return True
    return False


def _xfail(func: ast.FunctionDef) -> bool:
    return any(_decorator_name(d) == "xfail" for d in func.decorator_list)


def find_items(path: Path, text: str) -> list[Item]:
    tree = ast.parse(text)
    lines = text.splitlines()
    items: list[Item] = []

    def cut(node) -> str:
        start = min([d.lineno for d in node.decorator_list] + [node.lineno])
        return textwrap.dedent("\n".join(lines[start - 1:node.end_lineno])) + "\n"

    def visit(node, negative: bool, enclosing: list):
        for child in ast.iter_child_nodes(node):
            neg = negative
            if isinstance(child, ast.With) and _raises_context(child):
                neg = True
            if isinstance(child, ast.FunctionDef) and _xfail(child):
                neg = True
            if isinstance(child, ast.ClassDef) and any(
                    _is_script_decorator(d, MODULE_DECORATORS) for d in child.decorator_list):
                items.append(Item(str(path), child.lineno, child.name, "module", cut(child), neg))
                items[-1].not_self_contained = free_python_names(child, enclosing)
                continue  # members belong to the module
            if isinstance(child, ast.FunctionDef):
                decs = [d for d in child.decorator_list if _is_script_decorator(d, FUNC_DECORATORS)]
                if decs:
                    kind = "prim_func" if _decorator_name(decs[0]) == "prim_func" else "function"
                    items.append(Item(str(path), child.lineno, child.name, kind, cut(child), neg))
                    items[-1].not_self_contained = free_python_names(child, enclosing)
                    continue  # nested @R.function inside a body is part of it
                visit(child, neg, enclosing + [child])
                continue
            visit(child, neg, enclosing)

    visit(tree, False, [])
    return items


# ---------------------------------------------------------------- self-containedness
def _bound_names(node) -> set:
    bound = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
            bound.add(sub.id)
        elif isinstance(sub, (ast.FunctionDef, ast.ClassDef)):
            bound.add(sub.name)
        elif isinstance(sub, ast.arg):
            bound.add(sub.arg)
        elif isinstance(sub, ast.alias):
            bound.add((sub.asname or sub.name).split(".")[0])
    return bound


def free_python_names(node, enclosing) -> list[str]:
    """Reasons the text depends on the Python scope around it."""
    reasons = []
    bound = _bound_names(node)
    body_nodes = [n for n in (node.body if hasattr(node, "body") else [])]
    free = set()
    for stmt in body_nodes + list(getattr(getattr(node, "args", None), "args", []) or []):
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) \
                    and sub.id not in bound and sub.id not in ALLOWED_FREE:
                free.add(sub.id)
            elif isinstance(sub, ast.JoinedStr):
                reasons.append("f-string")
    # Decorators and annotations of members count too (e.g. a closure dtype).
    for sub in ast.walk(node):
        if isinstance(sub, ast.FunctionDef):
            for dec in sub.decorator_list:
                for n in ast.walk(dec):
                    if isinstance(n, ast.Name) and n.id not in ALLOWED_FREE | {"tvm"} and n.id not in bound:
                        free.add(n.id)
    free_used = sorted(free)
    if "tvm" in free_used:
        reasons.append("tvm API in body")
        free_used.remove("tvm")
    for name in free_used:
        reasons.append(f"python name {name!r}")
    return sorted(set(reasons))


# ---------------------------------------------------------------- running
class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


_NORMALIZE = [
    (re.compile(r"'[^']*'"), "'_'"),
    (re.compile(r'"[^"]*"'), '"_"'),
    (re.compile(r"\b\d+\b"), "N"),
    (re.compile(r"\s+"), " "),
]


def categorize(err: BaseException) -> str:
    from tensorir.errors import ParseError
    msg = getattr(err, "message", None) or str(err)
    msg = msg.splitlines()[0] if msg else type(err).__name__
    msg = re.sub(r"^in (function|prim_func|block) '[^']*'(, [^:]*)?: ", "", msg)
    for pattern, repl in _NORMALIZE:
        msg = pattern.sub(repl, msg)
    msg = msg.strip()[:140]
    # Positions appended to deduction messages differ per item: drop them.
    msg = re.sub(r" \(at [^)]*$", "", msg)
    # What was found varies per item; the category is what was expected.
    msg = re.sub(r"(, got|but its value is|, which) .*", r"\1 ...", msg)
    if isinstance(err, ParseError):
        return msg
    if isinstance(err, ValueError):  # the documented kind of shape/type conflicts
        return f"[{type(err).__name__}] {msg}"
    return f"[internal {type(err).__name__}] {msg}"


def _equal(a, b) -> bool:
    import relaxscript as rx
    import tensorir as tir
    if isinstance(a, tir.PrimFunc):
        return tir.structural_equal(a, b)
    return rx.structural_equal(a, b)


def run_item(item: Item, timeout: int = 30, run: bool = False, dim: int = 3,
             max_elements: int = 1 << 18) -> None:
    import relaxscript as rx
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(timeout)
    try:
        try:
            parsed = rx.from_source(item.text, filename=f"{item.file}:{item.line}")
        except _Timeout:
            raise
        except Exception as err:  # noqa: BLE001 - tabulated, not hidden
            item.bucket, item.category = "failed", categorize(err)
            item.message = _message(err)
            return
        try:
            text = parsed.script()
            again = rx.from_source(text)
            if not _equal(parsed, again):
                item.bucket, item.category = "roundtrip failed", "re-parsed text is not structurally equal"
            elif again.script() != text:
                item.bucket, item.category = "roundtrip failed", "second print differs from the first"
            else:
                item.bucket = "ok"
                if run:
                    signal.alarm(0)
                    run_kernels(item, parsed, dim, max_elements)
        except _Timeout:
            raise
        except Exception as err:  # noqa: BLE001
            item.bucket, item.category = "roundtrip failed", categorize(err)
            item.message = _message(err)
    except _Timeout:
        item.bucket, item.category = "failed", f"[timeout {timeout}s]"
    finally:
        signal.alarm(0)


# ---------------------------------------------------------------- --run
RUN_TIMEOUT = 20


def _prim_funcs(parsed) -> dict:
    from tensorir.function import PrimFunc
    if isinstance(parsed, PrimFunc):
        return {parsed.name: parsed}
    functions = getattr(parsed, "functions", None)
    if functions is None:
        return {}
    return {n: f for n, f in functions.items() if isinstance(f, PrimFunc)}


def _bindings(func, dim: int):
    """Arrays' shapes and scalar values for ``func`` with every symbolic dim bound to ``dim``;
    None and a reason when it cannot be bound."""
    from tensorir import dtype as dt
    from tensorir import expr as E
    from tensorir.arith.evaluate import evaluate
    from tensorir.buffer import Buffer
    from tensorir.functor import collect
    free = {}
    for p in func.params:
        parts = [p] if isinstance(p, E.Var) else list(p.shape) if isinstance(p, Buffer) else []
        for part in parts:
            for v in collect(part, lambda n: isinstance(n, E.Var)) if not isinstance(part, E.Var) else [part]:
                free.setdefault(v, dim if dt.is_int(v.dtype) else None)
    scalars = {}
    for p in func.params:
        if isinstance(p, E.Var):
            if p.dtype == "handle":
                return None, "handle parameter"
            scalars[p.name] = free.get(p) if dt.is_int(p.dtype) else 0.5
    shapes = []
    for p in func.buffer_params:
        try:
            shape = [int(evaluate(d, {v: val for v, val in free.items() if val is not None})) for d in p.shape]
        except Exception:  # noqa: BLE001 - a dim that is not a function of the bound ones
            return None, "shape not bound"
        shapes.append((p, shape))
    return (shapes, scalars), ""


def _random_array(rng, shape, dtype):
    from tensorir import dtype as dt
    np_dtype = dt.to_numpy(dtype)
    if dt.is_float(dtype):
        return rng.standard_normal(shape).astype(np_dtype)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    return rng.integers(0, 4, shape).astype(np_dtype)   # small: indices read from data stay in range


def run_kernels(item: Item, parsed, dim: int, max_elements: int) -> None:
    import numpy as np

    import tensorir as tir
    from backends.target import build_kernels
    from tensorir.errors import IRError
    from tensorir.stmt import For
    from tensorir.transform.inline_subroutines import kernels_of
    prims = _prim_funcs(parsed)
    if not prims:
        return
    try:
        kernels = kernels_of(dict(prims))
    except IRError as err:
        item.runs.append(("*", "refused at build", _blank(str(err).splitlines()[0])))
        return
    for name, func in kernels.items():
        if tir.collect(func.body, lambda n: isinstance(n, For) and n.kind == "thread_binding"):
            item.runs.append((name, "skipped", "GPU-scheduled"))
            continue
        bound, reason = _bindings(func, dim)
        if bound is None:
            item.runs.append((name, "skipped", reason))
            continue
        shapes, scalars = bound
        if any(int(np.prod(s)) > max_elements for _, s in shapes):
            item.runs.append((name, "skipped", "large buffers"))
            continue
        rng = np.random.default_rng(0)
        inputs = [_random_array(rng, s, p.dtype) for p, s in shapes]
        results = []
        for runner in ("interp", "c"):
            if results and results[0][0] == "error":
                break   # the reference stopped (e.g. an index the bound dims put out of range): a
                # compiled kernel checks no bounds, so it is not run on inputs the program cannot take
            arrays = [a.copy() for a in inputs]
            signal.alarm(RUN_TIMEOUT)
            try:
                if runner == "interp":
                    tir.interpret(func, *arrays, **scalars)
                else:
                    build_kernels("c", {name: func})[name](*arrays, **scalars)
                results.append(("ok", arrays))
            except _Timeout:
                results.append(("error", f"timeout {RUN_TIMEOUT}s"))
            except Exception as err:  # noqa: BLE001 - tabulated
                first = str(err).splitlines()[0] if str(err) else ""
                results.append(("error", type(err).__name__ + ": " + _blank(first)))
            finally:
                signal.alarm(0)
        if len(results) == 1:
            vi = results[0][1]
            item.runs.append((name, "skipped" if "timeout" in vi else "interp stops",
                              "interpreter too slow" if "timeout" in vi else vi))
            continue
        (ki, vi), (kc, vc) = results
        if ki == kc == "ok":
            # a half-precision intermediate rounds at every step, in another order in C
            dtypes = {b.dtype for b in tir.collect(func.body, lambda n: isinstance(n, tir.Buffer))}
            tol = 5e-2 if "bfloat16" in dtypes else 1e-2 if "float16" in dtypes else 1e-4
            same = all(np.array_equal(a, b, equal_nan=True) if a.dtype.kind not in "fc" else
                       np.allclose(a, b, rtol=tol, atol=tol * max(1.0, float(np.nanmax(np.abs(a)))
                                                                  if a.size and np.isfinite(a).any() else 1.0),
                                   equal_nan=True)
                       for a, b in zip(vi, vc))
            item.runs.append((name, "run ok" if same else "mismatch", ""))
        else:
            item.runs.append((name, "c error", vc))


def _blank(text: str) -> str:
    text = re.sub(r"'[^']*'", "'_'", text)
    return re.sub(r"\b\d+\b", "N", text)[:160]


def _message(err: BaseException) -> str:
    from tensorir.errors import ParseError
    if isinstance(err, ParseError):
        return str(err)
    return "".join(traceback.format_exception_only(type(err), err)).strip() + "\n" + \
        "".join(traceback.format_tb(err.__traceback__)[-3:])


# ---------------------------------------------------------------- report
def member_count(item: Item) -> int:
    """Functions an item holds: a module's members, or 1."""
    if item.kind != "module":
        return 1
    tree = ast.parse(item.text)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
    return sum(isinstance(n, ast.FunctionDef) for n in cls.body)


def collect(paths: list[str]) -> list[Item]:
    files = []
    for p in map(Path, paths):
        files.extend(sorted(p.rglob("*.py")) if p.is_dir() else [p])
    items = []
    for f in files:
        try:
            items.extend(find_items(f, f.read_text()))
        except SyntaxError as err:
            print(f"skipping {f}: {err}", file=sys.stderr)
    return items


def report(items: list[Item], examples: int, show: str | None) -> dict:
    groups = {
        "self-contained": [i for i in items if not i.negative and not i.not_self_contained],
        "not self-contained": [i for i in items if not i.negative and i.not_self_contained],
        "negative (TVM refuses too)": [i for i in items if i.negative],
    }
    summary = {}
    for title, group in groups.items():
        buckets = Counter(i.bucket for i in group)
        kinds = Counter(i.kind for i in group)
        members = sum(member_count(i) for i in group)
        ok_members = sum(member_count(i) for i in group if i.bucket == "ok")
        print(f"\n== {title}: {len(group)} items ({dict(kinds)}); {members} functions in them, "
              f"{ok_members} in items that parse and round-trip")
        for bucket in ("ok", "roundtrip failed", "failed"):
            print(f"   {bucket:18s} {buckets.get(bucket, 0)}")
        cats = defaultdict(list)
        for i in group:
            if i.bucket != "ok":
                cats[(i.bucket, i.category)].append(i)
        ordered = sorted(cats.items(), key=lambda kv: -len(kv[1]))
        if title != "negative (TVM refuses too)":
            for (bucket, cat), failing in ordered:
                print(f"   {len(failing):4d}  [{bucket}] {cat}")
                for m in failing[:examples]:
                    print(f"            {m.file}:{m.line} {m.name}")
        if title == "not self-contained":
            reasons = Counter(r.split(" '")[0] for i in group for r in i.not_self_contained)
            print(f"   reasons: {dict(reasons)}")
        summary[title] = {"items": len(group), "functions": members, "functions_ok": ok_members,
                          "buckets": dict(buckets),
                          "categories": {f"[{b}] {c}": len(m) for (b, c), m in ordered}}
    runs = [(i, r) for i in groups["self-contained"] for r in i.runs]
    if runs:
        buckets = Counter(r[1] for _, r in runs)
        print(f"\n== --run: {len(runs)} prim_funcs of self-contained items that round-trip")
        for bucket in ("run ok", "mismatch", "c error", "interp stops", "refused at build", "skipped"):
            print(f"   {bucket:18s} {buckets.get(bucket, 0)}")
        cats = defaultdict(list)
        for i, (kernel, bucket, cat) in runs:
            if bucket != "run ok":
                cats[(bucket, cat)].append((i, kernel))
        for (bucket, cat), where in sorted(cats.items(), key=lambda kv: -len(kv[1])):
            print(f"   {len(where):4d}  [{bucket}] {cat}")
            for i, kernel in where[:examples]:
                print(f"            {i.file}:{i.line} {i.name}.{kernel}")
        summary["run"] = {"kernels": len(runs), "buckets": dict(buckets),
                          "categories": {f"[{b}] {c}": len(w) for (b, c), w in cats.items()}}
    if show is not None:
        for i in items:
            if i.bucket != "ok" and show.lower() in i.category.lower():
                print(f"\n--- {i.file}:{i.line} {i.name} [{i.bucket}] {i.category}\n{i.message}\n{i.text}")
    return summary


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--json", help="write per-item results and the summary here")
    ap.add_argument("--examples", type=int, default=2, help="locations listed per category")
    ap.add_argument("--show", help="print message and text of failures whose category contains this")
    ap.add_argument("--timeout", type=int, default=30)
    ap.add_argument("--run", action="store_true", help="also build and run each prim_func (interp vs C)")
    ap.add_argument("--dim", type=int, default=3, help="--run: the value of every symbolic dim")
    ap.add_argument("--max-elements", type=int, default=1 << 18, help="--run: skip larger buffers")
    args = ap.parse_args(argv)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    items = collect(args.paths)
    for item in items:
        run_item(item, args.timeout, args.run, args.dim, args.max_elements)
    summary = report(items, args.examples, args.show)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "items": [
            {k: v for k, v in asdict(i).items() if k != "text"} for i in items]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
