"""VM shape lowering (paper section 4.7).

Two jobs, both done once at build time:

- ``MatchBuilder`` turns the annotations of a function's parameters (or of
  one ``match_cast``) into a ``MatchValues`` instruction: a straight-line
  list of checks (plain data, see ``sym_code``) of kind, rank, dtype and contiguity, stores each symbolic
  variable into its table slot on first sight (checking its facts), solves
  variables that only appear in linear dims (``n * 2``), and compares every
  other dim with its computed value. The order mirrors the reference
  interpreter, so both report the same failures.
- ``bind_kernel_call`` expresses each symbolic variable a kernel receives in
  the caller's terms, by matching the kernel's buffer shapes with the
  caller's annotations; dims it cannot prove equal become run-time checks.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.functor import substitute

from ..interpreter.arguments import int_range
from ..struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo,
                           TensorStructInfo, TupleStructInfo)
from ..transform.var_bounds import MemoryPlanError, var_bounds
from .instructions import MatchValues, VMBuildError
from .sym_table import SymTable, vars_of


def function_bounds(func, func_name: str) -> dict:
    """``{var name: (lower, upper)}`` from a function's bound attributes (``var_bounds``)."""
    try:
        return var_bounds(func, f"function '{func_name}'")
    except MemoryPlanError as err:
        raise VMBuildError(str(err)) from None


def _outside(value: tuple, lo: int, hi: int) -> tuple:
    return ("or", ("<", value, ("int", lo)), (">", value, ("int", hi)))


def range_check(value: tuple, what: str) -> tuple:
    """``(condition, message)`` of a value a kernel receives that must fit the int64 table."""
    lo, hi = int_range("int64")
    return _outside(value, lo, hi), f"{what} = {{actual}} is outside the int64 range [{lo}, {hi}]"


def _analyzer():
    from tensorir.arith import Analyzer
    return Analyzer()


def format_expr(expr) -> str:
    from ..interpreter.shape_env import format_prim_expr
    return format_prim_expr(expr)


class MatchBuilder:
    """Generates one ``MatchValues`` for values checked together."""

    def __init__(self, table: SymTable, func_name: str, defined: set, origins: dict,
                 bounds: dict | None = None):
        self.table = table
        self.func_name = func_name
        self.bounds = bounds or {}      # var name -> upper bound from the function's attributes
        self.defined = defined          # vars with a value before this check (updated)
        self.origins = origins          # var -> where it was bound, for messages
        self.checks: list[tuple] = []   # sym_code check operations
        self.messages: list[str] = []
        self.dtypes: list[str] = []
        self.dims: list[tuple[tuple, E.PrimExpr, str, str]] = []  # (value tree, expr, path, what)
        self.newly_defined: list[E.Var] = []
        self._temps = 0

    def _fail(self, what: str, text: str) -> int:
        self.messages.append(f"function '{self.func_name}', {what}: {text}")
        return len(self.messages) - 1

    def _temp(self) -> int:
        self._temps += 1
        return self._temps

    def _dtype_index(self, dtype: str) -> int:
        if dtype not in self.dtypes:
            self.dtypes.append(dtype)
        return self.dtypes.index(dtype)

    # ---------------------------------------------------------------- structure
    def add(self, reg: int, sinfo, root: str, what: str) -> None:
        value = self._temp()
        self.checks.append(("load", value, reg))
        self._structure(value, sinfo, root, what, writeback=reg)

    def _structure(self, v: int, sinfo, path: str, what: str, writeback: int | None) -> None:
        emit = self.checks.append
        if sinfo is None or isinstance(sinfo, (ObjectStructInfo, FuncStructInfo)):
            return
        if isinstance(sinfo, TensorStructInfo):
            k = self._fail(what, f"{path}: expected a tensor, got {{actual}}")
            dtype = None if sinfo.dtype is None else self._dtype_index(sinfo.dtype)
            emit(("tensor", v, k, writeback, dtype))   # lists convert to the annotated dtype
            if sinfo.ndim != -1:
                k = self._fail(what, f"{path}: expected rank {sinfo.ndim}, got {{actual}}")
                emit(("rank", v, sinfo.ndim, k))
            if sinfo.dtype is not None:
                k = self._fail(what, f"{path}: expected dtype {sinfo.dtype}, got {{actual}}")
                emit(("dtype", v, self._dtype_index(sinfo.dtype), k))
            k = self._fail(what, f"{path}: expected a C-contiguous array, got {{actual}}")
            emit(("contiguous", v, k))
            if sinfo.shape is not None:
                shape = self._temp()
                emit(("let", shape, ("shape_of", ("v", v))))
                for axis, expr in enumerate(sinfo.shape):
                    self.dims.append((("item", ("v", shape), axis), expr, f"{path}.shape[{axis}]", what))
        elif isinstance(sinfo, PrimStructInfo):
            kind = "bool" if sinfo.dtype == "bool" else "float" if dt.is_float(sinfo.dtype) else "int"
            k = self._fail(what, f"{path}: expected a {sinfo.dtype} scalar, got {{actual}}")
            emit(("prim", v, k, kind, writeback))
            if kind == "int":   # the symbol table is int64: a larger value must not wrap
                lo, hi = int_range(sinfo.dtype)
                k = self._fail(what, f"{path}: {{actual}} is outside the {sinfo.dtype} range [{lo}, {hi}]")
                emit(("fail_if", _outside(("v", v), lo, hi), k, ("v", v)))
            if sinfo.value is not None:
                self.dims.append((("v", v), sinfo.value, path, what))
        elif isinstance(sinfo, ShapeStructInfo):
            k = self._fail(what, f"{path}: expected a shape, got {{actual}}")
            emit(("shape", v, k, writeback))
            if sinfo.ndim != -1:
                k = self._fail(what, f"{path}: expected a shape of {sinfo.ndim} values, got {{actual}}")
                emit(("shape_len", v, sinfo.ndim, k))
            if sinfo.values is not None:
                for i, expr in enumerate(sinfo.values):
                    self.dims.append((("item", ("v", v), i), expr, f"{path}[{i}]", what))
        elif isinstance(sinfo, TupleStructInfo):
            n = len(sinfo.fields)
            k = self._fail(what, f"{path}: expected a tuple of {n} fields, got {{actual}}")
            emit(("tuple", v, n, k))
            for i, field in enumerate(sinfo.fields):
                item = self._temp()
                emit(("let", item, ("item", ("v", v), i)))
                self._structure(item, field, f"{path}[{i}]", what, writeback=None)
        else:
            raise VMBuildError(f"function '{self.func_name}': cannot check annotation {type(sinfo).__name__}")

    # ---------------------------------------------------------------- symbols
    def _bind(self, var: E.Var, value: tuple, path: str, what: str, int64: bool = True) -> None:
        """Store a var's value in its slot after checking its facts; ``int64``: the value is
        known to fit int64 (a tensor dim, a checked shape value), else its range is checked."""
        emit = self.checks.append
        temp = self._temp()
        emit(("let", temp, value))
        x = ("v", temp)
        facts = []
        if not int64 or var.dtype != "int64":
            lo, hi = int_range(var.dtype)   # the table is int64 and would wrap a larger value
            facts.append((_outside(x, lo, hi), f"outside the {var.dtype} range [{lo}, {hi}]"))
        upper, source = var.upper, "its upper bound"
        attr_lower, attr_upper = self.bounds.get(var.name, (None, None))
        if attr_upper is not None and (upper is None or attr_upper < upper):
            # memory planning sized storages for this bound: a larger value must not reach a kernel
            upper, source = attr_upper, "its upper bound in the function attributes"
        if upper is not None:
            facts.append(((">", x, ("int", upper)), f"expected <= {upper} ({source})"))
        lower, low_source = var.lower, "its lower bound"
        if attr_lower is not None and (lower is None or attr_lower > lower):
            lower, low_source = attr_lower, "its lower bound in the function attributes"
        if lower is not None:
            facts.append((("<", x, ("int", lower)), f"expected >= {lower} ({low_source})"))
        if var.multiple_of:
            facts.append((("!=", ("%", x, ("int", var.multiple_of)), ("int", 0)),
                          f"expected a multiple of {var.multiple_of}"))
        for cond, text in facts:
            k = self._fail(what, f"{path}: symbolic var {var.name}: {text}, got {{actual}}")
            emit(("fail_if", cond, k, x))
        slot = self.table.slot_of(var)
        emit(("store", slot, x))
        self.defined.add(var)
        self.newly_defined.append(var)
        self.origins[var] = path

    def _bind_bare_vars(self) -> None:
        for code, expr, path, what in self.dims:
            if not isinstance(expr, E.Var):
                continue
            if expr in self.defined:
                slot = ("t", self.table.slot_of(expr))
                k = self._fail(what, f"{path}: symbolic var {expr.name}: expected {{expected}} "
                                     f"(bound by {self.origins.get(expr, '?')}), got {{actual}}")
                self.checks.append(("fail_if", ("!=", code, slot), k, code, slot))
            else:
                self._bind(expr, code, path, what)

    def _solve_linear_dims(self) -> None:
        analyzer = _analyzer()
        progress = True
        while progress:
            progress = False
            for code, expr, path, what in self.dims:
                unbound = [v for v in vars_of(expr) if v not in self.defined]
                if len(set(unbound)) != 1 or isinstance(expr, E.Var):
                    continue
                var = unbound[0]
                b = analyzer.simplify(substitute(expr, {var: E.IntImm(0, var.dtype)}))
                a = analyzer.simplify(substitute(expr, {var: E.IntImm(1, var.dtype)}) - b)
                if not isinstance(a, E.IntImm) or a.value == 0 or \
                        not analyzer.can_prove_equal(expr, a * var + b):
                    continue
                r = self._temp()
                k = self._fail(what, f"{path} = {format_expr(expr)}: no integer value of symbolic var "
                                     f"{var.name} gives {{actual}}")
                self.checks.append(("let", r, ("-", code, self.table.code(b, self.defined))))
                self.checks.append(("fail_if", ("!=", ("%", ("v", r), ("int", a.value)), ("int", 0)),
                                    k, code))
                self._bind(var, ("//", ("v", r), ("int", a.value)), f"solving {path} = {format_expr(expr)}",
                           what, int64=False)
                progress = True

    def _check_expressions(self) -> None:
        for code, expr, path, what in self.dims:
            if isinstance(expr, E.Var):
                continue
            missing = [v for v in vars_of(expr) if v not in self.defined]
            if missing:
                raise VMBuildError(f"function '{self.func_name}', {what}: {path} = {format_expr(expr)} "
                                   f"uses symbolic var {missing[0].name}, which no dimension defines")
            expected = self.table.code(expr, self.defined)
            shown = "" if isinstance(expr, (E.IntImm, E.FloatImm)) else f" = {format_expr(expr)}"
            used = list(dict.fromkeys(vars_of(expr)))
            # the message names the vars; their values are passed as numbered fields {0}, {1}, ...
            values = ", ".join(f"{v.name} = {{{i}}}" for i, v in enumerate(used))
            suffix = f"  (symbolic var {values})" if used else ""
            k = self._fail(what, f"{path}{shown}: expected {{expected}}, got {{actual}}{suffix}")
            slots = [("t", self.table.slot_of(v)) for v in used]
            self.checks.append(("fail_if", ("!=", code, expected), k, code, expected, *slots))

    def writeable(self, reg: int, path: str, what: str) -> None:
        """A check that ``reg`` (a parameter a kernel updates in place) is not a read-only array:
        a C kernel writes into it regardless (into the ``bytes`` under a ``np.frombuffer``; a
        read-only memory map: a crash)."""
        value = self._temp()
        self.checks.append(("load", value, reg))
        self.checks.append(("writeable", value, self._fail(what, f"{path}: expected a writeable array, "
                                                                 "got {actual}")))

    def finish(self, dst: int | None = None, src: int | None = None, name: str = "") -> MatchValues:
        self._bind_bare_vars()
        self._solve_linear_dims()
        self._check_expressions()
        return MatchValues(self.checks, self.messages, tuple(self.dtypes), dst=dst, src=src, name=name)


# ---------------------------------------------------------------- kernel calls
def bind_kernel_call(table: SymTable, defined: set, func_name: str, kernel_name: str, prim, sym_vars,
                     buffer_args, scalar_exprs, site):
    """Caller-side expressions of the kernel's symbolic vars (in ``sym_vars`` order).

    ``buffer_args``: ``(reg, struct_info)`` per buffer param; ``scalar_exprs``:
    caller PrimExprs for the scalar params; ``site`` collects run-time reads
    and checks (a ``CallSite`` builder). Raises ``VMBuildError`` when shapes
    provably disagree."""
    where = f"function '{func_name}', call of kernel '{kernel_name}'"
    buffers = prim.buffer_params
    if len(buffer_args) != len(buffers) or len(scalar_exprs) != len(prim.scalar_params):
        raise VMBuildError(f"{where}: the kernel takes {len(buffers)} buffer(s) and "
                           f"{len(prim.scalar_params)} scalar(s), got {len(buffer_args)} tensor(s) "
                           f"and {len(scalar_exprs)} scalar(s)")
    binding: dict[E.Var, E.PrimExpr] = dict(zip(prim.scalar_params, scalar_exprs))
    pending = []
    for buf, (reg, sinfo) in zip(buffers, buffer_args):
        if not isinstance(sinfo, TensorStructInfo):
            sinfo = TensorStructInfo(None, None, -1)
        if sinfo.ndim not in (-1, buf.ndim):
            raise VMBuildError(f"{where}: buffer '{buf.name}' has rank {buf.ndim}, the argument rank {sinfo.ndim}")
        if sinfo.dtype not in (None, buf.dtype):
            raise VMBuildError(f"{where}: buffer '{buf.name}' has dtype {buf.dtype}, the argument {sinfo.dtype}")
        shape = sinfo.shape
        if shape is None or sinfo.dtype is None:
            # Coarse annotation: read (and check) the array itself at the call.
            site.structure_check(reg, buf, f"{where}, buffer '{buf.name}'")
        if shape is None:
            shape = tuple(site.read_dim(reg, axis, f"{buf.name}.shape[{axis}]") for axis in range(buf.ndim))
        for axis, (kdim, cdim) in enumerate(zip(buf.shape, shape)):
            if isinstance(kdim, E.Var) and kdim not in binding:
                binding[kdim] = cdim
            else:
                pending.append((buf, axis, kdim, cdim))
    for buf in buffers:
        _bind_layout_vars(buf, binding)
    missing = [v.name for v in sym_vars if v not in binding]
    if missing:
        raise VMBuildError(f"{where}: cannot determine the kernel's symbolic var(s) {missing} "
                           "from its arguments")
    analyzer = _analyzer()
    for buf, axis, kdim, cdim in pending:
        expected = substitute(kdim, binding) if not isinstance(kdim, (E.IntImm,)) else kdim
        if analyzer.can_prove_equal(expected, cdim):
            continue
        if isinstance(expected, E.IntImm) and isinstance(cdim, E.IntImm):
            raise VMBuildError(f"{where}: buffer '{buf.name}' axis {axis} is {expected.value}, "
                               f"the argument has {cdim.value}")
        site.check_equal(cdim, expected, f"{where}: buffer '{buf.name}'.shape[{axis}] "
                                         f"= {format_expr(kdim)}")
    return [binding[v] for v in sym_vars]


def _bind_layout_vars(buf, binding) -> None:
    """VM tensors are dense row-major: symbolic strides / offsets take those values."""
    if buf.strides:
        acc = E.IntImm(1)
        for dim, stride in reversed(list(zip(buf.shape, buf.strides))):
            if isinstance(stride, E.Var) and stride not in binding:
                binding[stride] = substitute(acc, binding)
            acc = acc * dim
    if isinstance(buf.elem_offset, E.Var) and buf.elem_offset not in binding:
        binding[buf.elem_offset] = E.IntImm(0)


class CallSiteBuilder:
    """Collects the run-time symbol work of one kernel call (see ``CallSite``)."""

    def __init__(self, table: SymTable):
        self.table = table
        self.local: set[E.Var] = set()
        self.reads: list = []
        self.structure: list = []
        self.assign: list = []
        self.pending: list = []

    def structure_check(self, reg: int, buf, where: str) -> None:
        self.structure.append((reg, buf.ndim, buf.dtype,
                               f"{where}: expected a C-contiguous {buf.dtype} tensor of rank {buf.ndim}"))

    def read_dim(self, reg: int, axis: int, label: str) -> E.Var:
        var = E.Var(label)
        self.reads.append((reg, axis, self.table.slot_of(var)))
        self.local.add(var)
        return var

    def check_equal(self, actual, expected, text: str) -> None:
        self.pending.append((actual, expected, text))

    def build(self, defined: set):
        from .instructions import CallSite
        visible = defined | self.local
        checks = tuple((self.table.code(a, visible), self.table.code(b, visible), text)
                       for a, b, text in self.pending)
        return CallSite(tuple(self.reads), tuple(self.structure), tuple(self.assign), checks)
