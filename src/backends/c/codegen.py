"""Lowered TensorIR -> C99 with OpenMP pragmas.

Input functions must be lowered (no blocks; flat or multi-dimensional
buffers are both accepted). Every generated kernel has one calling
convention, so a caller can prebuild its argument arrays once::

    int32_t <name>(void* const* buffers, const int64_t* sym_values)

``buffers`` holds the data pointers of the buffer params in order;
``sym_values`` holds the values of ``KernelInfo.sym_vars`` (the symbolic
variables of buffer shapes, in first-appearance order, then the scalar
params). The return value is 0 on success.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.arith import Analyzer
from tensorir.buffer import Buffer
from tensorir.dispatch import handles
from tensorir.errors import ScheduleError
from tensorir.function import PrimFunc
from tensorir.functor import collect, substitute
from tensorir.schedule_rules.quantized import function_epilogue
from tensorir.schedule_rules.quantized_gemm import function_element_epilogue, function_row_operand

from ..kernel_signature import kernel_sym_vars
from ..source_emitter import (SourceEmitter, float_floor_divmod_helpers, float_to_int_helpers,
                              overflow_safe_division_helpers, parenthesized)
from ..source_names import Names, sanitize

from .quantized_gemm import MICRO_KERNEL_ATTR as GEMM_KERNEL_ATTR
from .attention import ATTENTION_LAYOUT_ATTR, attention_c, generated_attention_enabled
from .quantized_gemm import gemm_source, generated_gemm_enabled
from .quantized_gemv import (MICRO_KERNEL_ATTR, ColumnEpilogue, detect_features, gemv_source,
                             generated_kernels_enabled)
from .status import C_DEFINES

C_TYPES = {
    "float16": "_Float16", "float32": "float", "float64": "double",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "bool": "bool",
}

# the prelude's float16 conversion, also for standalone sources (benchmarks, kernel tests)
HALF_TO_FLOAT_C = r"""/* float16 bits -> float, exact for every value, in integer and float operations gcc vectorizes
   (it does not vectorize _Float16 loads without AVX512-FP16). Moving exponent and mantissa to
   float's place and scaling by 2^112 rebiases the exponent and normalizes subnormals;
   inf and NaN keep an all-ones exponent. */
static inline float rs_half_to_float(uint16_t h) {
  uint32_t rest = (uint32_t)(h & 0x7fffu) << 13, bits;
  float magnitude;
  memcpy(&magnitude, &rest, 4);
  magnitude *= 0x1p112f;
  memcpy(&bits, &magnitude, 4);
  uint32_t special = 0u - (uint32_t)((h & 0x7c00u) == 0x7c00u);
  bits = (bits & ~special) | ((rest | 0x7f800000u) & special);
  bits |= (uint32_t)(h & 0x8000u) << 16;
  memcpy(&magnitude, &bits, 4);
  return magnitude;
}
"""

PRELUDE = r"""#include <stdint.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <omp.h>
%VECMATH%

/* Threads of a parallel loop: the number the runtime points rs_team at and sets per call
   (backends/threading.py), or OpenMP's default when unbound. A num_threads clause, not
   omp_set_num_threads: a PyTorch in the same process may share this libgomp and its settings. */
static int rs_team_unbound = 0;
static const int* rs_team = &rs_team_unbound;
void rs_bind_team(const int* team) { rs_team = team; }
static inline int rs_threads(void) { int t = *rs_team; return t > 0 ? t : omp_get_max_threads(); }

/* An integer division by zero would trap (SIGFPE) and kill the process: a divisor the compiler
   cannot prove nonzero is tested, and a zero one records STATUS_ZERO_DIVISION and gives 0. */
static inline int64_t rs_divided_by_zero(int32_t* status) {
  __atomic_store_n(status, STATUS_ZERO_DIVISION, __ATOMIC_RELAXED); return 0; }
/* T.int_pow: square-and-multiply modulo 2**64 (the narrower types' results are its low bits, as
   NumPy's wrapping power gives); a negative exponent records STATUS_NEGATIVE_POWER and gives 0 */
static inline uint64_t rs_int_pow(uint64_t base, uint64_t exponent) {
  uint64_t r = 1; while (exponent) { if (exponent & 1) r *= base; base *= base; exponent >>= 1; } return r; }
static inline int64_t rs_negative_power(int32_t* status) {
  __atomic_store_n(status, STATUS_NEGATIVE_POWER, __ATOMIC_RELAXED); return 0; }
/* T.checked_index: NumPy's negative indices wrap; a value outside [-n, n) gives 0 and records
   STATUS_INDEX_OUT_OF_RANGE with the value and n. A compare-and-swap from STATUS_OK: of the
   threads of a parallel loop, the first failure's writer alone stores them (no data race); the
   kernel copies them to rs_index_report (per calling thread) when it returns. */
static _Thread_local int64_t rs_index_report[2];
void rs_index_failure(int64_t* out) { out[0] = rs_index_report[0]; out[1] = rs_index_report[1]; }
static int64_t rs_index_out_of_range(int32_t* status, int64_t* bad, int64_t i, int64_t n) {
  int32_t ok = STATUS_OK;
  if (__atomic_compare_exchange_n(status, &ok, STATUS_INDEX_OUT_OF_RANGE, 0, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED)) { bad[0] = i; bad[1] = n; }
  return 0; }
static inline int64_t rs_checked_index(int64_t i, int64_t n, int32_t* status, int64_t* bad) {
  int64_t w = i < 0 ? i + n : i;
  return __builtin_expect(w >= 0 && w < n, 1) ? w : rs_index_out_of_range(status, bad, i, n); }
/* A TIR assert whose condition is false: STATUS_ASSERT_FAILED and its message (the first failure
   of a parallel loop's threads wins, as above); the kernel leaves and copies the message to
   rs_assert_report (per calling thread), which rs_assert_failure reads. */
static _Thread_local const char* rs_assert_report;
const char* rs_assert_failure(void) { return rs_assert_report; }
static void rs_assert_failed(int32_t* status, const char** where, const char* message) {
  int32_t ok = STATUS_OK;
  if (__atomic_compare_exchange_n(status, &ok, STATUS_ASSERT_FAILED, 0, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED)) *where = message; }
static inline void rs_set_status(int32_t* status, int32_t code) {
  int32_t ok = STATUS_OK;
  __atomic_compare_exchange_n(status, &ok, code, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED); }
/* b == -1 apart: INT64_MIN / -1 traps (SIGFPE); NumPy gives the wrapped negation and 0 */
static inline int64_t rs_floordiv(int64_t a, int64_t b) {
  if (b == -1) return (int64_t)(0ULL - (uint64_t)a);
  int64_t q = a / b; return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q; }
static inline int64_t rs_floormod(int64_t a, int64_t b) {
  if (b == -1) return 0;
  int64_t r = a % b; return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r; }
%TDIV%
%FLOAT_TO_INT%
%FLOAT_DIVMOD%
%MINMAX%
/* a multiply by a 0/1 mask, not a select: under a select gcc proves the clamp redundant and drops it */
static inline float rs_expf(float x) {
  return expf(x < -80.0f ? -80.0f : x) * (float)!(x < -80.0f); }
static inline double rs_exp(double x) {
  return exp(x < -700.0 ? -700.0 : x) * (double)!(x < -700.0); }
static inline float rs_sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }
static inline double rs_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
%HALF_TO_FLOAT%"""

# Float min/max propagate NaN like NumPy's minimum/maximum and, unlike fminf/fmaxf,
# vectorize without -ffast-math (compare + blend).
def _min_max(name: str, ct: str) -> str:
    nan = " || a != a" if dt.is_float(name) else ""
    return (f"static inline {ct} rs_min_{name}({ct} a, {ct} b) {{ return (a < b{nan}) ? a : b; }}\n"
            f"static inline {ct} rs_max_{name}({ct} a, {ct} b) {{ return (a > b{nan}) ? a : b; }}")


PRELUDE = PRELUDE.replace("%HALF_TO_FLOAT%", HALF_TO_FLOAT_C).replace(
    "%FLOAT_TO_INT%", float_to_int_helpers("static inline", C_TYPES)).replace(
    "%FLOAT_DIVMOD%", float_floor_divmod_helpers("static inline", C_TYPES)).replace(
    "%TDIV%", overflow_safe_division_helpers("static inline", C_TYPES))
PRELUDE = C_DEFINES + PRELUDE.replace("%MINMAX%", "\n".join(_min_max(name, ct) for name, ct in C_TYPES.items()))

# AVX-512 for vectorized loops (gcc's znver/skylake tunings prefer 256-bit vectors), and
# glibc's libmvec vector variants of math functions (glibc >= 2.35 has all of these), so
# loops calling expf/tanhf/... vectorize without -ffast-math.
_VECTOR_MATH = ("exp", "log", "tanh", "erf", "sin", "cos", "tan", "exp2", "log2")
PRELUDE = PRELUDE.replace("%VECMATH%", "\n".join(
    # gcc's PRE turns a load of a value reduced just before a loop into a latch copy,
    # which stops the vectorizer ("latch block not empty"); loop-invariant motion covers it.
    ["#if defined(__GNUC__) && !defined(__clang__)",
     '#pragma GCC optimize("no-tree-pre")',
     "#endif",
     "#if defined(__x86_64__) && defined(__AVX512F__)",
     '#pragma GCC target("prefer-vector-width=512")',
     "#endif",
     "#if defined(__x86_64__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 35)"]
    + [f"#pragma omp declare simd notinbranch\nextern {ct} {fn}{suffix}({ct});"
       for fn in _VECTOR_MATH for ct, suffix in (("float", "f"), ("double", ""))]
    + ["#endif"]))

# intrinsic -> (float32 spelling, float64 spelling); float16 computes in float32
_MATH = {
    # glibc's vector exp hands every lane near underflow to a slow scalar handler (an attention
    # mask of -1e9 made softmax ~11x slower); results below exp(-80) (1.8e-35; 1e-304 for double)
    # are flushed to 0, an absolute error far below any float32 tolerance
    "exp": ("rs_expf({0})", "rs_exp({0})"), "log": ("logf({0})", "log({0})"),
    "sqrt": ("sqrtf({0})", "sqrt({0})"), "rsqrt": ("(1.0f / sqrtf({0}))", "(1.0 / sqrt({0}))"),
    "tanh": ("tanhf({0})", "tanh({0})"), "sigmoid": ("rs_sigmoidf({0})", "rs_sigmoid({0})"),
    "erf": ("erff({0})", "erf({0})"), "pow": ("powf({0}, {1})", "pow({0}, {1})"),
    "abs": ("fabsf({0})", "fabs({0})"), "sin": ("sinf({0})", "sin({0})"),
    "cos": ("cosf({0})", "cos({0})"), "tan": ("tanf({0})", "tan({0})"),
    "floor": ("floorf({0})", "floor({0})"), "ceil": ("ceilf({0})", "ceil({0})"),
    "round": ("nearbyintf({0})", "nearbyint({0})"), "exp2": ("exp2f({0})", "exp2({0})"),
    "log2": ("log2f({0})", "log2({0})"), "isnan": ("isnan({0})", "isnan({0})"),
    "isinf": ("isinf({0})", "isinf({0})"),
    "exp10": ("powf(10.0f, {0})", "pow(10.0, {0})"),
    **{op: (f"{op}f({{0}})", f"{op}({{0}})") for op in ("trunc", "log1p", "atan", "asin", "acos",
                                                        "sinh", "cosh", "atanh", "asinh", "acosh")},
    **{op: (f"{op}f({{0}}, {{1}})", f"{op}({{0}}, {{1}})") for op in ("atan2", "hypot", "copysign", "fmod")},
}


from .accumulate import OMP_OPS, match_accumulation  # noqa: E402
from .guards import and_all, split_guard  # noqa: E402
from .work import PARALLEL_MIN_ITERATIONS, nest_iterations  # noqa: E402
from .hoist import certain_index_checks, expr_key, invariant_subexpressions  # noqa: E402
from .invariant_values import invariant_values, reciprocal_of  # noqa: E402


class CodegenError(ValueError):
    """A construct the C backend cannot emit (e.g. an unlowered block)."""


@dataclass
class KernelInfo:
    """What a caller needs to invoke a generated kernel."""
    name: str             # C symbol
    buffers: list         # Buffer params, in order
    sym_vars: list        # tensorir Vars passed in sym_values, in order


def _element_count(buf: Buffer):
    size = E.IntImm(1)
    for dim in buf.shape:
        size = E.mul(size, dim)
    return size


def _on_heap(buf: Buffer) -> bool:
    """Whether an allocation is malloc'd (else a local array): 16 KiB or a run-time size."""
    size = _element_count(buf)
    return not (isinstance(size, E.IntImm) and size.value * dt.itemsize(buf.dtype) <= 16384)


def c_string(text: str) -> str:
    """``text`` as a C string literal (UTF-8; every byte that is not plain ASCII text escaped)."""
    out = []
    for byte in text.encode("utf-8"):
        ch = chr(byte)
        if ch in "\\\"?" or not 32 <= byte < 127:
            out.append(f"\\{byte:03o}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def c_type(dtype: str) -> str:
    try:
        return C_TYPES[dtype]
    except KeyError:
        raise CodegenError(f"the C backend has no type for dtype {dtype!r}") from None


class CFunctionEmitter(SourceEmitter):
    """One lowered function as a C kernel (OpenMP loops, scalar accumulators, hoisted
    invariants); expressions and plain statements come from ``SourceEmitter``."""
    LANGUAGE = "C"

    def __init__(self, func: PrimFunc, symbol: str, signature: PrimFunc | None = None):
        super().__init__(Names())
        self.func = func
        self.signature = signature or func
        self.symbol = symbol
        self.in_parallel = 0
        self.hoisted: dict = {}       # expr_key -> C name of a loop-invariant local in scope
        self.accumulators: dict = {}  # id(store) -> (scalar name, Accumulation) inside a reduction loop
        self.safe_division = False    # emitting hoisted code: a zero divisor must not trap
        self.hoist_count = 0
        self.checks_indices = False   # the body uses T.checked_index: rs_bad_index is declared
        self.asserts = False          # the body has an assert: rs_assert_msg is declared
        self.exits = False            # the body leaves early (an assert, no memory): rs_exit is declared
        self.heap: list = []          # (C name, parallel depth) of the malloc'd allocations in scope
        self.parallel_exits: list = []  # per parallel loop being emitted: [label, used]

    # ------------------------------------------------------------ spelling (SourceEmitter's hooks)
    def error(self, message: str) -> Exception:
        return CodegenError(f"{self.func.name!r}: {message}")

    def value_type(self, dtype: str) -> str:
        return c_type(dtype)

    def int64_literal(self, value: int) -> str:
        return f"INT64_C({value})" if value != -2 ** 63 else "(-INT64_C(9223372036854775807) - 1)"

    def float_literal_text(self, value: float, dtype: str) -> str:
        return self.float_literal(value, dtype)

    def zero_divisor_report(self) -> str:
        # hoisted code may run where the original would not: a zero there is no error
        return "0" if self.safe_division else "rs_divided_by_zero(&rs_status)"

    def negative_power_report(self) -> str:
        return "0" if self.safe_division else "rs_negative_power(&rs_status)"

    def divisor_known_nonzero(self, divisor) -> bool:
        # bounds hold inside the loops; hoisted code does not rely on them
        return not self.safe_division and super().divisor_known_nonzero(divisor)

    def index_check(self, index: str, extent: str) -> str:
        if self.safe_division:
            raise CodegenError("T.checked_index may not be hoisted out of the code that checks it")
        self.checks_indices = True
        return f"rs_checked_index({index}, {extent}, &rs_status, rs_bad_index)"

    def reinterpret(self, e: E.Call, arg: str) -> str:
        # a copy of the bytes (defined behaviour, unlike a pointer cast); gcc/clang fold it to a move
        src, dst = c_type(e.args[0].dtype), c_type(e.dtype)
        return f"({{ {src} rs_from_ = ({arg}); {dst} rs_to_; memcpy(&rs_to_, &rs_from_, sizeof rs_to_); rs_to_; }})"

    def bit_count(self, e: E.Call, arg: str) -> str:
        bits = dt.bits(e.args[0].dtype)
        unsigned = f"((unsigned long long)(uint{bits}_t)({arg}))"
        if e.op == "popcount":
            return f"(({c_type(e.dtype)})__builtin_popcountll({unsigned}))"
        # clz: leading zeros within the operand's width; the width for 0 (C leaves it undefined)
        return f"(({unsigned}) == 0ULL ? (int32_t){bits} : (int32_t)(__builtin_clzll({unsigned}) - {64 - bits}))"

    def math_call(self, e: E.Call, args: list[str]) -> str:
        spelling = _MATH.get(e.op)
        if spelling is None:
            raise CodegenError(f"the C backend has no implementation of intrinsic {e.op!r}")
        arg_dtype = e.args[0].dtype if e.args else e.dtype
        if e.op == "abs" and not dt.is_float(arg_dtype):
            return f"llabs({args[0]})"
        if arg_dtype == "float16":
            args = [f"((float){a})" for a in args]
            return f"(({c_type(e.dtype)}){spelling[0].format(*args)})"
        return spelling[1 if arg_dtype == "float64" else 0].format(*args)

    # ------------------------------------------------------------ expressions
    def expr(self, e) -> str:
        if self.hoisted and not isinstance(e, (E.Var, E.IntImm, E.FloatImm)):
            name = self.hoisted.get(expr_key(e))
            if name is not None:
                return name
        return super().expr(e)

    @handles(E.BufferLoad, table="expr")
    def load(self, e: E.BufferLoad) -> str:
        return f"{self.buffer_name(e.buffer)}[{self.flat_index(e.buffer, e.indices)}]"

    @handles(E.Div, table="expr")
    def div(self, e: E.Div) -> str:
        reciprocal = self.hoisted.get(expr_key(reciprocal_of(e))) if self.hoisted else None
        if reciprocal is not None:   # hoisted 1 / divisor (invariant_values.py)
            return f"({self.expr(e.a)} * {reciprocal})"
        return super().div(e)

    @handles(E.Cast, table="expr")
    def cast(self, e: E.Cast) -> str:
        value = e.value
        if isinstance(value, E.BufferLoad) and value.dtype == "float16" and e.dtype in ("float32", "float64"):
            # a float16 load widened: read the bits, so the loop still vectorizes (rs_half_to_float)
            index = self.flat_index(value.buffer, value.indices)
            bits = f"((const uint16_t*){self.buffer_name(value.buffer)})[{index}]"
            return f"(({c_type(e.dtype)})rs_half_to_float({bits}))"
        return super().cast(e)

    @staticmethod
    def float_literal(value: float, dtype: str) -> str:
        if value != value:
            text = "NAN"
        elif value in (float("inf"), float("-inf")):
            text = "INFINITY" if value > 0 else "(-INFINITY)"
        else:
            text = repr(float(value))
            if "e" not in text and "." not in text:
                text += ".0"
            if dtype == "float32":
                text += "f"
        return f"(({c_type(dtype)}){text})" if dtype != "float64" else text

    def flat_index(self, buf: Buffer, indices) -> str:
        if len(indices) == 1 and not buf.strides:
            flat = indices[0]
        else:
            strides = buf.strides or _row_major_strides(buf.shape)
            flat = None
            for idx, stride in zip(indices, strides):
                term = E.mul(idx, stride)
                flat = term if flat is None else E.add(flat, term)
            flat = flat if flat is not None else E.IntImm(0)
        if not (isinstance(buf.elem_offset, E.IntImm) and buf.elem_offset.value == 0):
            flat = E.add(buf.elem_offset, flat)
        return self.index_text(flat)

    # ------------------------------------------------------------ statements
    @handles(S.BufferStore, table="stmt")
    def store(self, s: S.BufferStore) -> None:
        if id(s) in self.accumulators:
            self.accumulate(*self.accumulators[id(s)])
            return
        self.emit(f"{self.buffer_name(s.buffer)}[{self.flat_index(s.buffer, s.indices)}] = "
                  f"{self.cast_to(s.value, s.buffer.dtype)};")

    @handles(S.For, table="stmt")
    def loop(self, s: S.For) -> None:
        guard = split_guard(s)
        if guard is not None:
            self.guarded_loop(s, guard)
            return
        self.plain_loop(s, self.expr(E.add(s.min, s.extent)))

    def guarded_loop(self, s: S.For, guard) -> None:
        """A loop whose body is guarded: guards become an outer `if` and loop bounds (guards.py)."""
        body = s.body.then_case
        if guard.remaining:
            body = S.IfThenElse(and_all(guard.remaining), body)
        if guard.outer:
            self.emit(f"if ({self.expr(and_all(guard.outer))}) {{")
            self.indent += 1
        hi = self.expr(E.add(s.min, s.extent))
        for bound in guard.upper_bounds:
            hi = f"rs_min_{s.loop_var.dtype}({hi}, {self.expr(bound)})"
        # a bound from a guard may leave the loop with no iteration: nothing is hoisted before it
        self.plain_loop(s.replace(body=body), hi, may_skip=bool(guard.upper_bounds))
        if guard.outer:
            self.indent -= 1
            self.emit("}")

    def plain_loop(self, s: S.For, hi: str, simd_clause: str = "", may_skip: bool = False) -> None:
        jumps = S.has_loop_jumps(s.body)
        accumulation = None if simd_clause or jumps else match_accumulation(s)
        if accumulation is not None:
            self.accumulation_loop(s, hi, accumulation, may_skip)
            return
        # (a break may end the loop before a value or an index check is reached: none is hoisted)
        hoisted_values = [] if may_skip or jumps else self.hoist_values(s)
        var = self.names.get(s.loop_var, s.loop_var.name)
        lo = self.expr(s.min)
        parallel = s.kind == "parallel" and not self.in_parallel
        if parallel:
            # fork only when the nest has enough iterations to pay for waking the threads, and the
            # loop itself more than one trip to share (one row's worth: the other thread only waits)
            work = self.expr(nest_iterations(s))
            self.emit(f"#pragma omp parallel for schedule(static) if({hi} > {lo} + 1 && {work} >= "
                      f"{PARALLEL_MIN_ITERATIONS}) num_threads(rs_threads())")
        elif s.kind == "vectorized" and not collect(
                s.body, lambda n: isinstance(n, S.AssertStmt) or (isinstance(n, S.Allocate) and _on_heap(n.buffer))):
            # (an assert or a failed malloc leaves the loop with a goto, which omp simd may not contain)
            self.emit(f"#pragma omp simd{simd_clause}")
        elif s.kind == "unrolled":
            extent = s.extent.value if isinstance(s.extent, E.IntImm) else 4
            self.emit(f"#pragma GCC unroll {max(1, min(extent, 64))}")
        self.emit(f"for (int64_t {var} = {lo}; {var} < {hi}; ++{var}) {{")
        self.in_parallel += parallel
        if parallel:
            self.parallel_exits.append([self.fresh_name("rs_next"), False])
        self.bind_loop_var(s)
        saved = dict(self.hoisted)
        self.indent += 1
        self.hoist_invariants(s)
        self.stmt(s.body)
        if parallel and self.parallel_exits[-1][1]:
            self.emit(f"{self.parallel_exits[-1][0]}: ;")   # a failed assert ends its iteration here
        self.indent -= 1
        self.hoisted = saved
        self.in_parallel -= parallel
        self.emit("}")
        if parallel and self.parallel_exits.pop()[1]:
            # the loop's threads all finished: a failed assert (or malloc) in one of them stops the kernel
            self.emit_exit("if (rs_status == STATUS_ASSERT_FAILED || rs_status == STATUS_NO_MEMORY) ")
        for key in hoisted_values:
            del self.hoisted[key]

    def fresh_name(self, hint: str) -> str:
        """A C local name unique in the function."""
        return self.names.fresh(hint)

    def accumulation_loop(self, s: S.For, hi: str, acc, may_skip: bool = False) -> None:
        """A reduction into one element, kept in a scalar so the loop vectorizes (accumulate.py)."""
        store = acc.store
        ctype = c_type(store.buffer.dtype)
        target = f"{self.buffer_name(store.buffer)}[{self.flat_index(store.buffer, store.indices)}]"
        name = self.fresh_name("rs_acc")
        # max/min of floats: a plain compare per lane (one vmaxps) and a separate "saw a NaN" flag,
        # which keeps NumPy's NaN propagation; the NaN test inside the compare stopped gcc from
        # using vmaxps (layer_norm -> softmax ran 12% slower)
        nan_flag = self.fresh_name("rs_nan") if acc.op in (E.Max, E.Min) and dt.is_float(store.buffer.dtype) \
            else None
        self.emit("{")
        self.indent += 1
        self.emit(f"{ctype} {name} = {target};")
        clause = f" reduction({OMP_OPS[acc.op]}:{name})"
        if nan_flag is not None:
            self.emit(f"int {nan_flag} = 0;")
            clause += f" reduction(|:{nan_flag})"
        self.accumulators[id(store)] = (name, acc, nan_flag)
        self.plain_loop(s.replace(kind="vectorized"), hi, simd_clause=clause, may_skip=may_skip)
        del self.accumulators[id(store)]
        if nan_flag is not None:
            self.emit(f"{target} = {nan_flag} ? ({ctype})NAN : {name};")
        else:
            self.emit(f"{target} = {name};")
        self.indent -= 1
        self.emit("}")

    def accumulate(self, name: str, acc, nan_flag: str | None) -> None:
        operand = self.cast_to(acc.operand, acc.store.buffer.dtype)
        if acc.op in (E.Max, E.Min):
            cmp = ">" if acc.op is E.Max else "<"
            flag = f" {nan_flag} |= rs_v != rs_v;" if nan_flag is not None else ""
            self.emit(f"{{ const {c_type(acc.store.buffer.dtype)} rs_v = {operand}; "
                      f"{name} = rs_v {cmp} {name} ? rs_v : {name};{flag} }}")
        else:
            self.emit(f"{name} = {name} {OMP_OPS[acc.op]} {operand};")

    def hoist_invariants(self, s: S.For) -> None:
        """Bind the body's loop-invariant index arithmetic to locals (see hoist.py), and check
        the indices read from data it is certain to check (``certain_index_checks``) once."""
        if not S.has_loop_jumps(s.body):
            for e in certain_index_checks(s, lambda loop: self.known_positive(loop.extent)):
                self.bind_local(e, "rs_h")
        for e in invariant_subexpressions(s):
            self.bind_local(e, "rs_h", safe=True)

    def hoist_values(self, s: S.For) -> list:
        """Bind the loop's invariant float values to locals before it (invariant_values.py);
        their keys, to forget once the loop is emitted."""
        return [key for key in (self.bind_local(e, "rs_f")
                                for e in invariant_values(s, lambda loop: self.known_positive(loop.extent)))
                if key is not None]

    def bind_local(self, e, hint: str, safe: bool = False):
        """Emit ``const T name = e;`` and let later uses of ``e`` read ``name``; its key, or None
        when ``e`` is bound already. ``safe``: the local may be computed where ``e`` would not
        be (a zero divisor gives 0 there, no error)."""
        key = expr_key(e)
        if key in self.hoisted:
            return None
        self.safe_division = safe
        try:
            text = self.expr(e)
        finally:
            self.safe_division = False
        name = self.fresh_name(f"{hint}{self.hoist_count}")
        self.hoist_count += 1
        self.emit(f"const {c_type(e.dtype)} {name} = {text};")
        self.hoisted[key] = name
        return key

    @handles(S.AssertStmt, table="stmt")
    def assert_stmt(self, s: S.AssertStmt) -> None:
        """``if (!cond)``: record the message and leave the kernel (from inside a parallel loop,
        the iteration; the loop's end then leaves the kernel)."""
        self.asserts = self.exits = True
        message = c_string(s.message or f"assertion failed in {self.func.name}")
        self.emit(f"if (!{parenthesized(self.expr(s.condition))}) {{")
        self.indent += 1
        self.emit(f"rs_assert_failed(&rs_status, &rs_assert_msg, {message});")
        self.emit_exit("")
        self.indent -= 1
        self.emit("}")

    def emit_exit(self, prefix: str) -> None:
        """``prefix`` (an ``if (...) ``, or nothing) then: free the scratch memory that leaving
        drops, and jump out of the innermost parallel loop's iteration, or the kernel."""
        self.exits = True
        depth = self.in_parallel
        frees = [f"free({name});" for name, level in reversed(self.heap) if level == depth]
        if depth:
            self.parallel_exits[-1][1] = True
            jump = f"goto {self.parallel_exits[-1][0]};"
        else:
            jump = "goto rs_exit;"
        self.emit(f"{prefix}{{ {' '.join(frees + [jump])} }}")

    @handles(S.Allocate, table="stmt")
    def allocate(self, s: S.Allocate) -> None:
        buf = s.buffer
        name = self.names.get(buf, buf.name)
        ctype = c_type(buf.dtype)
        size = _element_count(buf)
        self.emit("{")
        self.indent += 1
        if not _on_heap(buf):
            self.emit(f"{ctype} {name}[{max(1, size.value)}] __attribute__((aligned(64)));")
            self.stmt(s.body)
        else:
            nbytes = f"sizeof({ctype}) * (size_t)({self.expr(size)}) + 64"
            self.emit(f"{ctype}* restrict {name} = ({ctype}*)malloc({nbytes});")
            # leave as an assert does: a return from inside an OpenMP loop does not compile
            self.emit(f"if ({name} == NULL) {{")
            self.indent += 1
            self.emit("rs_set_status(&rs_status, STATUS_NO_MEMORY);")
            self.emit_exit("")
            self.indent -= 1
            self.emit("}")
            self.heap.append((name, self.in_parallel))
            self.stmt(s.body)
            self.heap.pop()
            self.emit(f"free({name});")
        self.indent -= 1
        self.emit("}")

    # ------------------------------------------------------------ function
    def function(self) -> tuple[str, KernelInfo]:
        sym_vars = kernel_sym_vars(self.signature)
        header = [f"int32_t {self.symbol}(void* const* rs_buffers, const int64_t* rs_syms) {{"]
        for i, buf in enumerate(self.func.buffer_params):
            name = self.names.get(buf, buf.name)
            ctype = c_type(buf.dtype)
            header.append(f"  {ctype}* restrict {name} = ({ctype}*)rs_buffers[{i}];")
        for i, var in enumerate(sym_vars):
            if not dt.is_int(var.dtype):  # sym_values is int64_t[]: a float would be truncated
                raise CodegenError(f"{self.func.name!r}: scalar parameter {var.name!r} has dtype "
                                   f"{var.dtype}; the C backend passes only integer scalars")
            name = self.names.get(var, var.name)
            header.append(f"  const {c_type(var.dtype)} {name} = ({c_type(var.dtype)})rs_syms[{i}];")
        header.append("  int32_t rs_status = STATUS_OK;")
        header.append("  (void)rs_buffers; (void)rs_syms;")
        self.stmt(self.func.body)
        footer = []
        if self.asserts:
            header.append("  const char* rs_assert_msg = 0;")
        if self.exits:
            footer.append("rs_exit:")
        if self.asserts:
            footer.append("  if (rs_status == STATUS_ASSERT_FAILED) rs_assert_report = rs_assert_msg;")
        if self.checks_indices:
            header.append("  int64_t rs_bad_index[2] = {0, 0};")
            footer.append("  if (rs_status == STATUS_INDEX_OUT_OF_RANGE) "
                          "memcpy(rs_index_report, rs_bad_index, sizeof rs_bad_index);")
        body = header + self.lines + footer + ["  return rs_status;", "}"]
        return "\n".join(body), KernelInfo(self.symbol, list(self.signature.buffer_params), sym_vars)


def column_epilogue_c(func: PrimFunc, symbol: str, epilogue: dict) -> ColumnEpilogue:
    """The C text of a generated gemv's epilogue (``tensorir.schedule_rules.quantized.
    column_epilogue``: per-column scalar steps over the product ``rs_prod`` and the
    column ``rs_col``), through the same expression emitter as any loop nest."""
    emitter = CFunctionEmitter(func, symbol)
    emitter.names.used.update(_KERNEL_LOCALS)
    return _epilogue_c(emitter, epilogue)


# names the generated gemv/gemm kernels declare, which an epilogue's names must avoid
_KERNEL_LOCALS = {"rs_buffers", "rs_syms", "prod", "c0", "c1", "y", "x", "codes", "scale", "mins",
                  "xsum", "acc", "task", "rs_col", "rs_prod", "rs_row", "rs_rows", "rs_status", "run",
                  "rs_prod_hi", "prod_hi", "rs_out", "run_hi", "acc_run", "pc", "half",
                  "panel", "chunk", "chunks", "tasks", "width", "r0", "r1", "k0", "depth", "i", "j",
                  "rs_k", "rs_xrows", "rs_args"}


def _input_declarations(emitter: CFunctionEmitter, inputs: dict) -> list[str]:
    """C pointers to the parameters ``inputs`` (position -> buffer) that a generated kernel's
    expressions read, named as ``emitter`` names them."""
    declarations = []
    for position, buf in sorted(inputs.items()):
        name, ctype = emitter.names.get(buf, f"rs_in_{buf.name}", internal=True), c_type(buf.dtype)
        declarations.append(f"const {ctype}* restrict {name} = (const {ctype}*)rs_buffers[{position}];")
    return declarations


def _epilogue_c(emitter: CFunctionEmitter, epilogue: dict) -> ColumnEpilogue:
    """An epilogue chain (``column_epilogue`` or ``element_epilogue``) as C statements."""
    emitter.names.by_id[id(epilogue["column"])] = "rs_col"
    emitter.names.by_id[id(epilogue["product"])] = "rs_prod"
    if "product_hi" in epilogue:     # a pair epilogue: the product's second half at the column
        emitter.names.by_id[id(epilogue["product_hi"])] = "rs_prod_hi"
    if "row" in epilogue:
        emitter.names.by_id[id(epilogue["row"])] = "rs_row"
    declarations = _input_declarations(emitter, epilogue["inputs"])
    statements = []
    for var, value in epilogue["steps"]:
        name = emitter.names.get(var, var.name)
        statements.append(f"const float {name} = {emitter.cast_to(value, 'float32')};")
    return ColumnEpilogue(tuple(declarations), tuple(statements), emitter.names.by_id[id(epilogue["steps"][-1][0])])


def _gemv_epilogue(func: PrimFunc, symbol: str, gemv: dict):
    """The marked gemv's epilogue as C (None: a plain product), or False when the scheduled
    function no longer has it in per-column form: then its loop nest is compiled."""
    if "epilogue" not in gemv:
        return None
    try:
        return column_epilogue_c(func, symbol, function_epilogue(func, gemv["epilogue"]))
    except ScheduleError:
        return False


def _symbol_declarations(emitter: CFunctionEmitter, func: PrimFunc) -> list[str]:
    """C locals for the kernel's symbolic values (``rs_syms``), named as ``emitter`` names them."""
    lines = []
    for position, var in enumerate(kernel_sym_vars(func)):
        name, ctype = emitter.names.get(var, var.name), c_type(var.dtype)
        lines.append(f"const {ctype} {name} = ({ctype})rs_syms[{position}]; (void){name};")
    return lines


def _quantized_gemm_c(func: PrimFunc, symbol: str, gemm: dict) -> str | None:
    """The generated several-token GEMM for a marked function, or None when the scheduled
    function no longer has its epilogue in elementwise form (then its loop nest is compiled)."""
    chain = None
    if "epilogue" in gemm:
        try:
            chain = function_element_epilogue(func, gemm["epilogue"])
        except ScheduleError:
            return None
    emitter = CFunctionEmitter(func, symbol)
    emitter.names.used.update(_KERNEL_LOCALS)
    symbol_lines = _symbol_declarations(emitter, func)
    row_operand = None
    if "x" not in gemm["roles"]:   # x gathered from parameters through layout blocks
        operand = function_row_operand(func, gemm)
        if operand is None:
            return None
        emitter.names.by_id[id(operand["row"])] = "rs_row"
        emitter.names.by_id[id(operand["k"])] = "rs_k"
        positions = {id(b): i for i, b in enumerate(func.buffer_params)}
        loads = collect(operand["value"], lambda n: isinstance(n, E.BufferLoad))
        symbol_lines += _input_declarations(emitter, {positions[id(ld.buffer)]: ld.buffer for ld in loads})
        row_operand = emitter.cast_to(operand["value"], "float32")
    y = func.buffer_params[gemm["roles"]["y"]]
    row_count = E.IntImm(1, "int64")
    for dim in y.shape[:-1]:
        row_count = E.mul(row_count, E.cast("int64", dim) if dim.dtype != "int64" else dim)
    epilogue = one_row = None
    if chain is not None:
        epilogue = _epilogue_c(emitter, chain)
        epilogue = ColumnEpilogue(tuple(d for d in epilogue.declarations if d not in symbol_lines),
                                  epilogue.statements, epilogue.result)
    if chain is not None:
        at_row_zero = {chain["row"]: E.IntImm(0, "int64")}
        first_row = chain | {"steps": [(var, substitute(value, at_row_zero)) for var, value in chain["steps"]]}
        # the one-token GEMV's epilogue: its own function scope, so its own names
        row_emitter = CFunctionEmitter(func, f"{symbol}_one_row")
        row_emitter.names.used.update(_KERNEL_LOCALS)
        declared = _symbol_declarations(row_emitter, func)
        at_zero = _epilogue_c(row_emitter, first_row)
        one_row = ColumnEpilogue(tuple(declared) + at_zero.declarations, at_zero.statements, at_zero.result)
    return gemm_source(symbol, gemm["format"], gemm["rows"], gemm["cols"], gemm["roles"], detect_features(),
                       f"(int64_t)({emitter.expr(Analyzer().simplify(row_count))})", tuple(symbol_lines),
                       epilogue, one_row, row_operand, buffer_count=len(func.buffer_params),
                       activations=gemm.get("activations"), scale_dtype=gemm.get("scale_dtype", "float32"),
                       **({"pair": True} if gemm.get("pair") else {}))   # (bench_quant_gemm's older emitters)


def _row_major_strides(shape):
    strides = []
    acc = E.IntImm(1, shape[-1].dtype if shape else "int64")
    for dim in reversed(shape):
        strides.append(acc)
        acc = E.mul(acc, dim)
    return list(reversed(strides))


def generate_c(funcs: dict[str, PrimFunc], signatures: dict[str, PrimFunc] | None = None,
               lowering=None) -> tuple[str, dict[str, KernelInfo]]:
    """C source for a set of lowered functions (one translation unit) and their kernel infos.

    ``signatures`` maps names to the functions before lowering (whose buffer
    shapes define the symbolic vars); by default the lowered functions themselves.
    ``lowering``: when given, ``funcs`` are not lowered yet and each is lowered by it only where
    its loop body is emitted (a generated attention kernel never reads it: lowering that
    function cost a third of a second of each cold Llama build)."""
    parts = [PRELUDE]
    infos: dict[str, KernelInfo] = {}
    used: set[str] = set(re.findall(r"\b(rs_[A-Za-z0-9_]+)\s*\(", PRELUDE))  # helper functions
    for name, func in funcs.items():
        symbol = base = "rs_" + sanitize(name)
        k = 0
        while symbol in used:
            k += 1
            symbol = f"{base}_{k}"
        used.add(symbol)
        signature = (signatures or {}).get(name, func)
        gemv = signature.attrs.get(MICRO_KERNEL_ATTR) or func.attrs.get(MICRO_KERNEL_ATTR)
        epilogue = _gemv_epilogue(signature, symbol, gemv) if gemv is not None else None
        gemm = signature.attrs.get(GEMM_KERNEL_ATTR) or func.attrs.get(GEMM_KERNEL_ATTR)
        gemm_text = _quantized_gemm_c(signature, symbol, gemm) \
            if gemm is not None and generated_kernels_enabled() and generated_gemm_enabled() else None
        layout = signature.attrs.get(ATTENTION_LAYOUT_ATTR) or func.attrs.get(ATTENTION_LAYOUT_ATTR)
        attention_text = attention_c(signature, symbol, layout, detect_features().lanes) \
            if layout is not None and generated_kernels_enabled() and generated_attention_enabled() else None
        if attention_text is not None:
            text = attention_text
            info = KernelInfo(symbol, list(signature.buffer_params), kernel_sym_vars(signature))
        elif gemm_text is not None:
            text = gemm_text
            info = KernelInfo(symbol, list(signature.buffer_params), kernel_sym_vars(signature))
        elif gemv is not None and epilogue is not False and generated_kernels_enabled():
            # the loop nest's replacement
            text = gemv_source(symbol, gemv["format"], gemv["rows"], gemv["cols"], gemv["roles"],
                               detect_features(), epilogue, gemv.get("activations"),
                               gemv.get("scale_dtype", "float32"), pair=bool(gemv.get("pair")))
            info = KernelInfo(symbol, list(signature.buffer_params), kernel_sym_vars(signature))
        else:
            body = lowering(func) if lowering is not None else func
            text, info = CFunctionEmitter(body, symbol, signature).function()
        parts.append(text)
        infos[name] = info
    return "\n\n".join(parts) + "\n", infos
