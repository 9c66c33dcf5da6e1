"""DispatchLibrary: partial lowering of graph-level patterns to library calls
(paper section 4.6).

A registry holds ``(pattern, library function)`` pairs. A pattern is a tree
of ``is_op(name, *args)`` nodes with ``wildcard(name)`` leaves; it matches a
binding whose value is the root call, following arguments that are
variables bound earlier in the same block and used nowhere else. A match
(whose ``check`` accepts it) replaces the root binding by
``R.call_dps_library(library, [wildcards named in args], out_sinfo=root's)``
and drops the bindings it consumed. Bindings are visited last to first and
larger patterns are tried first, so ``matmul`` + bias add becomes one call.

The default CPU registry sends float32 ``R.matmul(x, w)`` (x with >= 2 dims,
w 2-D) to "openblas.sgemm", the same followed by a bias add to
"openblas.sgemm_bias", and batched products (both operands of the same rank
>= 3 with provably equal batch dims, an attention's heads) to
"openblas.sgemm_batched" (see backends/library_blas.py); ``R.matmul(x,
R.permute_dims(w))`` with w 2-D (``nn.Linear``'s ``x @ weight.T``) goes to
"openblas.sgemm_nt", which reads w transposed in place. A product ``x @ w [+ b]`` followed by an
activation (``EPILOGUE_ACTIVATIONS``) and/or a residual add of the product's shape goes to one
generated-GEMM entry applying them per output tile (``EPILOGUE_PATTERNS``;
``backends.library_gemm.epilogue_entry`` names it), so ``gelu(x @ w1 + b1)`` and ``h @ w2 + b2 + x``
are one call each. Library calls are
opaque to fusion, so custom prim_funcs still fuse around them. A pattern never
takes an ``R.dequantize`` result (or a transpose/reshape of one) as an
operand: the quantized weight stays with the generated kernel it fuses into.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from tensorir.arith import Analyzer
from tensorir.dispatch import handles

import backends.library_blas as blas_library
import backends.library_gemm as gemm_library

from ..expr import Call, Constant, DataflowBlock, DataflowVar, Expr, Function, Op, SeqExpr, Var, VarBinding
from ..expr_functor import ExprVisitor, PassMutator
from ..irmodule import IRModule
from ..op import call_dps_library
from ..struct_info import TensorStructInfo
from .gemm_choice import GENERATED_NAMES, GemmChoice, choose_gemm_library, product_rows
from .pass_infra import Pass


class LibraryPatternError(ValueError):
    """A library pattern that is malformed (unknown wildcard in ``args``, ...)."""


@dataclass(frozen=True)
class Wildcard:
    name: str


@dataclass(frozen=True)
class OpPattern:
    op: str
    args: tuple
    commutative: bool = False

    def size(self) -> int:
        return 1 + sum(a.size() for a in self.args if isinstance(a, OpPattern))


def wildcard(name: str) -> Wildcard:
    """A leaf matching any expression, bound to ``name`` in the match."""
    return Wildcard(name)


def is_op(op_name: str, *args, commutative: bool = False) -> OpPattern:
    """A call of operator ``op_name`` (e.g. "relax.matmul") whose arguments match ``args``."""
    for a in args:
        if not isinstance(a, (Wildcard, OpPattern)):
            raise LibraryPatternError(f"is_op({op_name!r}): argument {a!r} is not a pattern")
    return OpPattern(op_name, tuple(args), commutative)


@dataclass
class PatternMatch:
    root: Call
    values: dict = field(default_factory=dict)   # wildcard name -> Expr
    calls: dict = field(default_factory=dict)    # op name -> matched Call
    consumed: list = field(default_factory=list)  # vars of the interior bindings
    producers: dict = field(default_factory=dict)  # id(var) -> its binding in the block (for checks)

    def sinfo(self, name: str):
        return self.values[name].struct_info


@dataclass
class LibraryPattern:
    name: str
    library: str
    pattern: OpPattern
    args: tuple
    check: Callable[[PatternMatch, Analyzer], bool] | None = None
    # (match, analyzer) -> (library, reason): picks among libraries per match (default: ``library``)
    choose: Callable[[PatternMatch, Analyzer], tuple[str, str]] | None = None

    def library_for(self, match: PatternMatch, analyzer: Analyzer) -> tuple[str, str]:
        return (self.library, "") if self.choose is None else self.choose(match, analyzer)

    def __post_init__(self):
        known = set(_wildcards(self.pattern))
        missing = [a for a in self.args if a not in known]
        if missing:
            raise LibraryPatternError(f"library pattern {self.name!r}: args {missing} are not wildcards "
                                      f"of the pattern (it has {sorted(known)})")


def _wildcards(p) -> list[str]:
    if isinstance(p, Wildcard):
        return [p.name]
    return [n for a in p.args for n in _wildcards(a)]


class LibraryRegistry:
    """Ordered (pattern, library) pairs; larger patterns are tried first."""

    def __init__(self, patterns: Sequence[LibraryPattern] = ()):
        self.patterns: list[LibraryPattern] = []
        for p in patterns:
            self.register(p)

    def register(self, pattern: LibraryPattern) -> LibraryPattern:
        if any(p.name == pattern.name for p in self.patterns):
            raise LibraryPatternError(f"a library pattern named {pattern.name!r} is already registered")
        self.patterns.append(pattern)
        self.patterns.sort(key=lambda p: -p.pattern.size())  # stable: registration order among equals
        return pattern

    def unregister(self, name: str) -> None:
        self.patterns = [p for p in self.patterns if p.name != name]

    def __iter__(self):
        return iter(self.patterns)


# ------------------------------------------------------------------ default CPU patterns
def _float32_tensor(sinfo, min_ndim: int, max_ndim: int | None = None) -> bool:
    return isinstance(sinfo, TensorStructInfo) and sinfo.dtype == "float32" and \
        sinfo.ndim >= min_ndim and (max_ndim is None or sinfo.ndim <= max_ndim)


def _sgemm_operands(match: PatternMatch, analyzer: Analyzer) -> bool:
    matmul = match.calls["relax.matmul"]
    return matmul.attrs.get("out_dtype") in (None, "float32") and \
        _float32_tensor(match.sinfo("a"), 2) and _float32_tensor(match.sinfo("b"), 2, 2)


def _sgemm_bias_operands(match: PatternMatch, analyzer: Analyzer) -> bool:
    if not _sgemm_operands(match, analyzer):
        return False
    bias, weight = match.sinfo("bias"), match.sinfo("b")
    product = match.calls["relax.matmul"].struct_info
    if not _float32_tensor(bias, 1) or bias.shape is None or weight.shape is None or \
            product.shape is None or bias.ndim > product.ndim:
        return False
    *lead, cols = bias.shape  # a row vector: (n,) or (1, ..., 1, n)
    return analyzer.can_prove_equal(cols, weight.shape[1]) and \
        all(analyzer.can_prove_equal(d, 1) for d in lead)


def _sgemm_batched_operands(match: PatternMatch, analyzer: Analyzer) -> bool:
    matmul = match.calls["relax.matmul"]
    a, b = match.sinfo("a"), match.sinfo("b")
    if matmul.attrs.get("out_dtype") not in (None, "float32") or not _float32_tensor(a, 3) or \
            not _float32_tensor(b, 3) or a.ndim != b.ndim or a.shape is None or b.shape is None:
        return False
    return all(analyzer.can_prove_equal(x, y) for x, y in zip(a.shape[:-2], b.shape[:-2]))


def _sgemm_nt_operands(match: PatternMatch, analyzer: Analyzer) -> bool:
    axes = match.calls["relax.permute_dims"].attrs.get("axes")
    return _sgemm_operands(match, analyzer) and (axes is None or tuple(axes) == (1, 0))


def _choose(kind: str):
    """OpenBLAS or the generated GEMM for this match (transform/gemm_choice.py says why)."""
    def choose(match: PatternMatch, analyzer: Analyzer) -> tuple[str, str]:
        weight = match.sinfo("b").shape
        width = weight[0] if kind == "sgemm_nt" else weight[-1]
        width = int(width.value) if hasattr(width, "value") else None
        weight_value = match.values["b"]
        constant = (isinstance(weight_value, Constant) and weight_value.data.ndim == 2
                    and weight_value.data.dtype == "float32")
        return choose_gemm_library(kind, product_rows(match.sinfo("a").shape), analyzer, width, constant)
    return choose


SGEMM_BATCHED_PATTERN = LibraryPattern("sgemm_batched", blas_library.SGEMM_BATCHED,
                                       is_op("relax.matmul", wildcard("a"), wildcard("b")), ("a", "b"),
                                       _sgemm_batched_operands)
SGEMM_PATTERN = LibraryPattern("sgemm", blas_library.SGEMM,
                               is_op("relax.matmul", wildcard("a"), wildcard("b")), ("a", "b"),
                               _sgemm_operands, _choose("sgemm"))
SGEMM_BIAS_PATTERN = LibraryPattern(
    "sgemm_bias", blas_library.SGEMM_BIAS,
    is_op("relax.add", is_op("relax.matmul", wildcard("a"), wildcard("b")), wildcard("bias"),
          commutative=True),
    ("a", "b", "bias"), _sgemm_bias_operands, _choose("sgemm_bias"))

# x @ w.T with w (out, in) as a linear layer stores it: BLAS reads w transposed, no copy is made
SGEMM_NT_PATTERN = LibraryPattern(
    "sgemm_nt", blas_library.SGEMM_NT,
    is_op("relax.matmul", wildcard("a"), is_op("relax.permute_dims", wildcard("b"))), ("a", "b"),
    _sgemm_nt_operands, _choose("sgemm_nt"))


# ------------------------------------------------------------------ fused epilogues
# ``x @ W [+ bias]`` followed by an elementwise activation and/or a residual add (a tensor of the
# product's shape) becomes one call of the generated GEMM, which applies them to each output tile
# while it is in registers/L1 (backends/c/gemm/driver.py's apply_epilogue), at every run-time variant
# (GEMV, in-place/packed A on prepacked panels, OpenBLAS followed by one pass on the team). Every
# combination is a pattern: the activation op (EPILOGUE_ACTIVATIONS), a bias or none, and a residual
# added before the activation, after it, or none.
EPILOGUE_ACTIVATIONS = {"relax.nn.relu": "relu", "relax.nn.silu": "silu", "relax.nn.gelu": "gelu",
                        "relax.nn.gelu_tanh": "gelu_tanh", "relax.sigmoid": "sigmoid", "relax.tanh": "tanh"}


def _residual_operand(match: PatternMatch, analyzer: Analyzer) -> bool:
    """The residual is a float32 tensor of exactly the output's shape (a broadcast one is a bias)."""
    residual, product = match.sinfo("residual"), match.root.struct_info
    if not _float32_tensor(residual, 1) or residual.shape is None or product.shape is None or \
            residual.ndim != product.ndim:
        return False
    return all(analyzer.can_prove_equal(x, y) for x, y in zip(residual.shape, product.shape))


def _epilogue_check(bias: bool, residual: str | None):
    def check(match: PatternMatch, analyzer: Analyzer) -> bool:
        if gemm_library.skinny_rows() is None:   # no C compiler: the ops stay as they are
            return False
        operands = _sgemm_bias_operands if bias else _sgemm_operands
        producer = match.producers.get(id(match.values["b"]))
        if producer is not None and isinstance(producer.value, Call) and isinstance(producer.value.op, Op) and \
                producer.value.op.name == "relax.permute_dims":
            return False   # x @ w.T: OpenBLAS's sgemm_nt reads w in place; a copy would cost more than the epilogue
        return operands(match, analyzer) and (residual is None or _residual_operand(match, analyzer))
    return check


def _epilogue_choose(bias: bool, act: str, residual: str | None):
    kind = "sgemm_bias" if bias else "sgemm"
    base_choice = _choose(kind)

    def choose(match: PatternMatch, analyzer: Analyzer) -> tuple[str, str]:
        library, reason = base_choice(match, analyzer)
        if not library.startswith("generated."):
            # OpenBLAS's rows: the generated entry's run-time choice (policy WITH_BLAS) hands them to it
            # and applies the epilogue in one pass on the team
            library = GENERATED_NAMES[kind]
            reason += "; with the epilogue fused, through the generated entry (it calls OpenBLAS for these rows)"
        steps = [s for s in (None if act == "none" else act, residual and f"residual {residual}") if s]
        return (gemm_library.epilogue_entry(library, act, residual),
                f"{reason}; epilogue fused: {', '.join(steps)}")
    return choose


def _epilogue_patterns() -> list[LibraryPattern]:
    patterns = []
    for op_name, act in [(None, "none"), *EPILOGUE_ACTIVATIONS.items()]:
        for bias in (False, True):
            for residual in (None, "before", "after"):
                if op_name is None and residual != "after":
                    continue   # no activation: only "+ residual" (the plain patterns cover the rest)
                value = is_op("relax.matmul", wildcard("a"), wildcard("b"))
                if bias:
                    value = is_op("relax.add", value, wildcard("bias"), commutative=True)
                if residual == "before":
                    value = is_op("relax.add", value, wildcard("residual"), commutative=True)
                if op_name is not None:
                    value = is_op(op_name, value)
                if residual == "after":
                    value = is_op("relax.add", value, wildcard("residual"), commutative=True)
                args = ("a", "b") + (("bias",) if bias else ()) + (("residual",) if residual else ())
                name = f"sgemm{'_bias' if bias else ''}" + (f"_{act}" if op_name else "") + \
                    (f"_residual_{residual}" if residual else "")
                # the pattern's own library (what a registry without the choice calls) is the generated
                # entry with this epilogue: OpenBLAS's entries take no activation or residual operand
                entry = gemm_library.epilogue_entry(GENERATED_NAMES["sgemm_bias" if bias else "sgemm"], act, residual)
                patterns.append(LibraryPattern(name, entry, value, args, _epilogue_check(bias, residual),
                                               _epilogue_choose(bias, act, residual)))
    return patterns


EPILOGUE_PATTERNS = _epilogue_patterns()

DEFAULT_CPU_REGISTRY = LibraryRegistry([SGEMM_BIAS_PATTERN, SGEMM_NT_PATTERN, SGEMM_PATTERN,
                                        SGEMM_BATCHED_PATTERN, *EPILOGUE_PATTERNS])


def register_library_pattern(name: str, library: str, pattern: OpPattern, args: Sequence[str],
                             check: Callable | None = None,
                             registry: LibraryRegistry | None = None) -> LibraryPattern:
    """Add a pattern (to the default CPU registry unless ``registry`` is given)."""
    target = DEFAULT_CPU_REGISTRY if registry is None else registry
    return target.register(LibraryPattern(name, library, pattern, tuple(args), check))


# ------------------------------------------------------------------ matching
class _UseCounter(ExprVisitor):
    def __init__(self):
        self.counts: dict[int, int] = {}

    def visit_var_use(self, var: Var) -> None:
        self.counts[id(var)] = self.counts.get(id(var), 0) + 1


# Ops that only rearrange a dequantized weight; their result is still "a quantized weight".
_LAYOUT_OPS = ("relax.permute_dims", "relax.reshape", "relax.expand_dims", "relax.squeeze")


def _dequantized_vars(block) -> set[int]:
    """Ids of the vars holding ``R.dequantize`` results (or layout changes of them). A library
    call would need that float32 matrix stored; left to the generated kernels, the dequantize
    fuses into its consumer, which then reads the quantized blocks."""
    found: set[int] = set()
    for binding in block.bindings:
        value = binding.value if isinstance(binding, VarBinding) else None
        if not isinstance(value, Call) or not isinstance(value.op, Op):
            continue
        if value.op.name == "relax.dequantize" or (
                value.op.name in _LAYOUT_OPS and value.args and id(value.args[0]) in found):
            found.add(id(binding.var))
    return found


class _BlockMatcher:
    """Matches patterns at bindings of one block."""

    def __init__(self, block, uses: dict[int, int], analyzer: Analyzer):
        self.bound = {id(b.var): b for b in block.bindings if isinstance(b, VarBinding)}
        self.dataflow = isinstance(block, DataflowBlock)
        self.uses = uses
        self.analyzer = analyzer
        self.dequantized = _dequantized_vars(block)

    def inner_call(self, expr: Expr, taken: set[int]) -> tuple[Call, Var] | None:
        """The call bound to ``expr`` when it may be folded into the pattern."""
        if not isinstance(expr, Var) or id(expr) in taken:
            return None
        binding = self.bound.get(id(expr))
        if binding is None or self.uses.get(id(expr), 0) != 1:
            return None
        if self.dataflow and not isinstance(expr, DataflowVar):
            return None  # a block output: used after the block
        return (binding.value, expr) if isinstance(binding.value, Call) else None

    def match(self, pattern, expr: Expr, m: PatternMatch, taken: set[int]) -> bool:
        if isinstance(pattern, Wildcard):
            if pattern.name in m.values:
                return m.values[pattern.name] is expr
            m.values[pattern.name] = expr
            return True
        call = expr
        if expr is not m.root:
            found = self.inner_call(expr, taken)
            if found is None:
                return False
            call, var = found
            m.consumed.append(var)
            taken.add(id(var))
        if not (isinstance(call, Call) and isinstance(call.op, Op) and call.op.name == pattern.op
                and len(call.args) == len(pattern.args)):
            return False
        m.calls[pattern.op] = call
        orders = [list(call.args)]
        if pattern.commutative and len(call.args) == 2:
            orders.append(list(reversed(call.args)))
        for args in orders:
            trial = PatternMatch(m.root, dict(m.values), dict(m.calls), list(m.consumed), m.producers)
            trial_taken = set(taken)
            if all(self.match(p, a, trial, trial_taken) for p, a in zip(pattern.args, args)):
                m.values, m.calls, m.consumed = trial.values, trial.calls, trial.consumed
                taken |= trial_taken
                return True
        return False

    def plan(self, block, registry: LibraryRegistry) -> tuple[dict, set[int]]:
        """root var id -> (pattern, match), and the ids of consumed vars."""
        plans: dict[int, tuple[LibraryPattern, PatternMatch]] = {}
        consumed: set[int] = set()
        for binding in reversed(block.bindings):
            if id(binding.var) in consumed or not isinstance(binding, VarBinding) or \
                    not isinstance(binding.value, Call):
                continue
            for lib_pattern in registry:
                m = PatternMatch(binding.value, producers=self.bound)
                taken = set(consumed)
                if self.match(lib_pattern.pattern, binding.value, m, taken) and \
                        not any(id(v) in self.dequantized for v in m.values.values()) and \
                        (lib_pattern.check is None or lib_pattern.check(m, self.analyzer)):
                    plans[id(binding.var)] = (lib_pattern, m)
                    consumed |= {id(v) for v in m.consumed}
                    break
        return plans, consumed


class _Dispatcher(PassMutator):
    def __init__(self, mod: IRModule, registry: LibraryRegistry):
        super().__init__(mod)
        self.registry = registry
        self.plans: dict[int, tuple[LibraryPattern, PatternMatch]] = {}
        self.consumed: set[int] = set()
        self.uses: dict[int, int] = {}
        self.choices: list[GemmChoice] = []
        self.function_name = ""

    def transform_module(self, mod: IRModule) -> IRModule:
        self.module_names = {id(f): name for name, f in mod.relax_functions.items()}
        return super().transform_module(mod)

    @handles(Function)
    def visit_Function(self, func):
        counter = _UseCounter()
        counter.visit(func)
        self.uses = counter.counts
        self.function_name = getattr(self, "module_names", {}).get(id(func), self.function_name)
        return super().visit_Function(func)

    @handles(SeqExpr)
    def visit_SeqExpr(self, seq: SeqExpr):
        for block in seq.blocks:
            plans, consumed = _BlockMatcher(block, self.uses, self.builder.analyzer).plan(
                block, self.registry)
            self.plans.update(plans)
            self.consumed |= consumed
        return super().visit_SeqExpr(seq)

    def visit_binding(self, binding):
        if id(binding.var) in self.consumed:
            return None
        planned = self.plans.get(id(binding.var))
        if planned is None:
            return super().visit_binding(binding)
        lib_pattern, m = planned
        library, reason = lib_pattern.library_for(m, self.builder.analyzer)
        if reason:
            a = m.sinfo("a")
            rows = product_rows(a.shape) if a.shape is not None else "?"
            self.choices.append(GemmChoice(self.function_name, binding.var.name_hint, str(rows), library, reason))
        args = [self.visit_expr(m.values[name]) for name in lib_pattern.args]
        if ".".join(library.split(".")[:2]) in gemm_library.PREPACKED:
            # the constant weight packed once here (epilogue entries too), before itself
            args.insert(1, Constant(gemm_library.pack_constant_weight(m.values["b"].data)))
        call = self.builder.normalize(call_dps_library(library, args, binding.var.struct_info))
        new_var = self._rebind(binding.var, call)
        if new_var is not binding.var:
            self.var_remap[binding.var] = new_var
        return None


class DispatchLibrary(Pass):
    """Rewrite registered patterns into ``R.call_dps_library`` calls."""
    name = "DispatchLibrary"

    def __init__(self, registry: LibraryRegistry | None = None):
        self.registry = DEFAULT_CPU_REGISTRY if registry is None else registry
        self.choices: list[GemmChoice] = []   # the last run's matmul choices, with reasons

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        dispatcher = _Dispatcher(mod, self.registry)
        result = dispatcher.transform_module(mod)
        self.choices = dispatcher.choices
        return result


def gemm_dispatch_report(mod: IRModule, registry: LibraryRegistry | None = None) -> list[GemmChoice]:
    """Which library each float32 matmul of ``mod`` goes to, and why (DispatchLibrary's choices)."""
    dispatch = DispatchLibrary(registry)
    dispatch(mod)
    return dispatch.choices


__all__ = ["DispatchLibrary", "GemmChoice", "gemm_dispatch_report",
           "LibraryPattern", "LibraryRegistry", "LibraryPatternError", "PatternMatch",
           "DEFAULT_CPU_REGISTRY", "register_library_pattern", "is_op", "wildcard"]
