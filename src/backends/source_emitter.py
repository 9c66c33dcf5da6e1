"""What the C and the GPU (OpenCL, CUDA) kernel emitters share: expressions and statements of
lowered TensorIR written as C-family source.

``SourceEmitter`` holds the handlers (one ``@handles`` table for expressions, one for
statements) whose text is the same in every C dialect: literals, variables, arithmetic,
comparisons, logic, selects, casts, integer division with its zero-divisor test, index
checks, if/let/evaluate/sequence. A target subclass supplies the spelling through hooks:
type names (``value_type``), int64 literals, math calls, the zero-divisor and index-check
reports, its error class; and it adds or extends the handlers that really differ (loops:
OpenMP pragmas vs thread indices and barriers; stores; allocations).
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.arith import Analyzer
from tensorir.dispatch import ClassDispatch, handles
from tensorir.script.expr_printer import format_expr

INFIX = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.EQ: "==", E.NE: "!=", E.LT: "<",
         E.LE: "<=", E.GT: ">", E.GE: ">=", E.And: "&&", E.Or: "||"}
_WRAPPING = (E.Add, E.Sub, E.Mul)



# A float converted to an integer it cannot hold (NaN, +-inf, out of range) is undefined in C and
# OpenCL C: a fused ``astype(astype(x * 1e30, "int16"), "float32")`` gave -2**31 on OpenCL (the
# compiler dropped the narrowing) where NumPy gives 0, and C on AVX-512 gave all ones for a float
# -> uint32/uint64 of a negative value (vcvttss2usi) where NumPy wraps. The helpers give NumPy's
# x86-64 answer (``tensorir.float_casts`` is the same rule in NumPy, for the interpreters): int32
# and int64 take the smallest integer of the width; int8, int16, uint8, uint16 the low bits of the
# int32 conversion, uint32 the low bits of the int64 one (NumPy's element loop; its contiguous
# SIMD loop gives other values, see float_casts), uint64 converts x - 2**63 where x >= 2**63.
# In-range values convert as before (truncation toward zero); the compare + select vectorizes.
FLOAT_TO_INT = {("float32", "int32"): "rs_f2i32", ("float32", "int64"): "rs_f2i64",
                ("float64", "int32"): "rs_d2i32", ("float64", "int64"): "rs_d2i64",
                ("float32", "uint64"): "rs_f2u64", ("float64", "uint64"): "rs_d2u64"}
# each integer dtype: the helper conversion it takes the low bits of
FLOAT_TO_INT_VIA = {"int8": "int32", "int16": "int32", "int32": "int32", "uint8": "int32",
                    "uint16": "int32", "int64": "int64", "uint32": "int64", "uint64": "uint64"}


def float_to_int_helper(src: str, dst: str):
    """The helper converting float dtype ``src`` to integer dtype ``dst`` (its result cast to
    ``dst`` gives NumPy's value), or None where no helper applies."""
    via = FLOAT_TO_INT_VIA.get(dst)
    return None if via is None else FLOAT_TO_INT.get((src, via))


def float_to_int_helpers(qualifier: str, types: dict) -> str:
    """The definitions of ``FLOAT_TO_INT``'s helpers (``qualifier``: "static inline", an
    OpenCL/CUDA helper's), for the float dtypes ``types`` (dtype -> type name) has."""
    lines = []
    for (src, dst), name in FLOAT_TO_INT.items():
        if src not in types:
            continue
        suffix = "f" if src == "float32" else ""
        if dst == "uint64":   # x86-64's unsigned conversion: below 2**63 signed, above it shifted
            i64 = FLOAT_TO_INT[(src, "int64")]
            top = f"{2.0 ** 63:.1f}{suffix}"
            lines.append(f"{qualifier} {types[dst]} {name}({types[src]} x) {{ return x >= {top} ? "
                         f"(({types[dst]}){i64}(x - {top}) ^ ((({types[dst]})1) << 63)) : "
                         f"({types[dst]}){i64}(x); }}".strip())
            continue
        bits = 31 if dst == "int32" else 63
        low, high = f"-{2.0 ** bits:.1f}{suffix}", f"{2.0 ** bits:.1f}{suffix}"
        smallest = f"(({types[dst]})(-{2 ** bits - 1} - 1))"
        lines.append(f"{qualifier} {types[dst]} {name}({types[src]} x) {{ "
                     f"return (x >= {low} && x < {high}) ? ({types[dst]})x : {smallest}; }}".strip())
    return "\n".join(lines)

def overflow_safe_division_helpers(qualifier: str, types: dict) -> str:
    """``rs_tdiv_int32`` / ``rs_tdiv_int64``: C's truncating division, with x / -1 the wrapped negation
    (NumPy's value for the smallest integer; the hardware division traps)."""
    lines = []
    for dtype, unsigned in (("int32", "uint32"), ("int64", "uint64")):
        t, u = types[dtype], types[unsigned]
        lines.append(f"{qualifier} {t} rs_tdiv_{dtype}({t} a, {t} b) {{ "
                     f"return b == -1 ? ({t})(({u})0 - ({u})a) : a / b; }}".strip())
    return "\n".join(lines)


# Float floor division and modulo as NumPy (and Python) compute them, from fmod: floor(a / b) differs
# where the quotient rounds (1 // 0.1 is 9, floor(1 / 0.1) is 10), at infinities (inf // 2 and
# inf % 2 are NaN, 3 % inf is 3; a - floor(a / b) * b gave NaN) and in the sign of a zero result.
# A zero divisor gives a / b and fmod's NaN. float16 goes through float32, as in NumPy.
def float_floor_divmod_helpers(qualifier: str, types: dict, overloaded_math: bool = False) -> str:
    """``rs_floordiv_<dtype>`` / ``rs_floormod_<dtype>`` for float32 / float64 among ``types``;
    ``overloaded_math``: the language's fmod/floor/copysign take float too (OpenCL C, CUDA)."""
    lines = []
    for dtype, suffix in (("float32", "f"), ("float64", "")):
        if dtype not in types:
            continue
        suffix = "" if overloaded_math else suffix
        t = types[dtype]
        fmod, floor, copysign = (f"{name}{suffix}" for name in ("fmod", "floor", "copysign"))
        lines.append(
            f"{qualifier} {t} rs_floordiv_{dtype}({t} a, {t} b) {{ "
            f"if (b == 0) return a / b; {t} mod = {fmod}(a, b); {t} div = (a - mod) / b; "
            f"if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1; "
            f"if (div == 0) return {copysign}(({t})0, a / b); "
            f"{t} q = {floor}(div); return div - q > ({t})0.5 ? q + 1 : q; }}".strip())
        lines.append(
            f"{qualifier} {t} rs_floormod_{dtype}({t} a, {t} b) {{ {t} mod = {fmod}(a, b); "
            f"if (b == 0) return mod; "
            f"if (mod != 0) return ((b < 0) != (mod < 0)) ? mod + b : mod; return {copysign}(({t})0, b); }}".strip())
    return "\n".join(lines)


class SourceEmitter(ClassDispatch):
    LANGUAGE = "C"

    def __init__(self, names):
        self.names = names
        self.lines: list[str] = []
        self.indent = 1
        self.analyzer = Analyzer()
        self.in_index = False   # emitting a buffer index (index_text)

    # ------------------------------------------------------------ target hooks
    def error(self, message: str) -> Exception:
        """The target's exception for a construct it cannot emit."""
        raise NotImplementedError

    def value_type(self, dtype: str) -> str:
        """The type of a value (a local, a cast) of ``dtype``."""
        raise NotImplementedError

    def int64_literal(self, value: int) -> str:
        raise NotImplementedError

    def float_literal_text(self, value: float, dtype: str) -> str:
        raise NotImplementedError

    def math_call(self, e: E.Call, args: list[str]) -> str:
        """A math intrinsic (``INTRINSICS``) of already emitted arguments."""
        raise NotImplementedError

    def reinterpret(self, e: E.Call, arg: str) -> str:
        """``T.reinterpret``: the operand's bits as ``e.dtype``."""
        raise self.error(f"the {self.LANGUAGE} target cannot emit T.reinterpret")

    def bit_count(self, e: E.Call, arg: str) -> str:
        """``T.clz`` / ``T.popcount`` of an integer operand."""
        raise self.error(f"the {self.LANGUAGE} target cannot emit T.{e.op}")

    def zero_divisor_report(self) -> str:
        """The value of an integer division by a zero divisor (it reports the error, see status.py)."""
        raise NotImplementedError

    def negative_power_report(self) -> str:
        """The value of ``T.int_pow`` at a negative exponent (it reports the error, see status.py)."""
        raise NotImplementedError

    def integer_power(self, e: E.Call, args: list[str]) -> str:
        """``T.int_pow``: the prelude's ``rs_int_pow`` on the operands' 64-bit two's complement (its low
        bits are the narrower types' wrapped power); a negative exponent is reported."""
        ctype, u64 = self.value_type(e.dtype), self.value_type("uint64")
        power = f"(({ctype})rs_int_pow(({u64})({args[0]}), ({u64})({args[1]})))"
        if dt.is_uint(e.args[1].dtype):
            return power
        return f"(({args[1]}) >= 0 ? {power} : (({ctype}){self.negative_power_report()}))"

    def index_check(self, index: str, extent: str) -> str:
        """``T.checked_index`` of emitted operands (a failure reports itself, see status.py)."""
        raise NotImplementedError

    def helper_suffix(self, dtype: str) -> str:
        """The dtype whose ``rs_min_``/``rs_max_`` helper serves ``dtype``."""
        return dtype

    def divisor_known_nonzero(self, divisor) -> bool:
        lo, hi = self.bounds(divisor)
        return (lo is not None and lo > 0) or (hi is not None and hi < 0)

    # ------------------------------------------------------------ analysis
    def bounds(self, e):
        try:
            return self.analyzer.const_int_bound(e)
        except Exception:  # noqa: BLE001 - bounds only save a test
            return (None, None)

    def known_non_negative(self, e) -> bool:
        lo = self.bounds(e)[0]
        return lo is not None and lo >= 0

    def known_positive(self, e) -> bool:
        lo = self.bounds(e)[0]
        return lo is not None and lo > 0

    def bind_loop_var(self, s: S.For) -> None:
        try:
            self.analyzer.bind(s.loop_var, S.Range(s.min, s.extent))
        except Exception:  # noqa: BLE001 - bounds only make division cheaper
            pass

    # ------------------------------------------------------------ expressions
    def expr(self, e) -> str:
        handler = self.handler_for(type(e), "expr")
        if handler is None:
            raise self.error(f"the {self.LANGUAGE} target cannot emit {type(e).__name__}")
        return handler(self, e)

    @handles(E.IntImm, table="expr")
    def int_literal(self, e: E.IntImm) -> str:
        if e.dtype == "bool":
            return "true" if e.value else "false"
        if e.dtype == "int64":
            return self.int64_literal(e.value)
        if e.dtype == "int32" and e.value == -2 ** 31:   # 2147483648 has no int32 type
            return f"(({self.value_type('int32')})(-2147483647 - 1))"
        return f"(({self.value_type(e.dtype)}){e.value})"

    @handles(E.FloatImm, table="expr")
    def float_imm(self, e: E.FloatImm) -> str:
        return self.float_literal_text(e.value, e.dtype)

    @handles(E.Var, table="expr")
    def var(self, e: E.Var) -> str:
        if id(e) not in self.names.by_id:
            raise self.error(f"variable {e.name!r} is used but not defined")
        return self.names.by_id[id(e)]

    @handles(E.Ramp, E.Broadcast, table="expr")
    def vector(self, e) -> str:
        # lower / lower_for_gpu write vector code as loops over lanes (scalarize_vectors)
        raise self.error(f"the {self.LANGUAGE} target writes scalars: `{format_expr(e)}` ({e.dtype}) "
                         "must be scalarized first (tensorir.transform.scalarize_vectors, part of lower)")

    @handles(E.Div, table="expr")
    def div(self, e: E.Div) -> str:
        if dt.is_float(e.dtype):
            return f"({self.expr(e.a)} / {self.expr(e.b)})"
        a, b = self.expr(e.a), self.expr(e.b)
        text = f"rs_tdiv_{e.dtype}({a}, {b})" if self.may_overflow_division(e) else f"({a} / {b})"
        return self.guard_divisor(e.b, b, text)

    def may_overflow_division(self, e) -> bool:
        """An int32 / int64 division whose divisor may be -1 and dividend the smallest value: the
        hardware division traps (SIGFPE, the process dies) where NumPy wraps; ``rs_tdiv_*`` and
        ``rs_floordiv`` / ``rs_floormod`` take -1 apart. Narrower ints divide promoted to int."""
        if e.dtype not in ("int32", "int64") or self.known_non_negative(e.a):
            return False
        return not (isinstance(e.b, E.IntImm) and e.b.value != -1) and not self.known_non_negative(e.b)

    @handles(E.FloorDiv, E.FloorMod, table="expr")
    def floor_divmod(self, e) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if dt.is_float(e.dtype):   # float_floor_divmod_helpers; float16 in float32
            name = "rs_floordiv" if isinstance(e, E.FloorDiv) else "rs_floormod"
            via = "float64" if e.dtype == "float64" else "float32"
            text = f"{name}_{via}({a}, {b})"
            return text if e.dtype == via else f"(({self.value_type(e.dtype)}){text})"
        # With a >= 0 and b >= 0, floor division is C division (b == 0 is an error either way).
        if self.known_non_negative(e.a) and self.known_non_negative(e.b):
            text = f"({a} {'/' if isinstance(e, E.FloorDiv) else '%'} {b})"
        else:
            fn = "rs_floordiv" if isinstance(e, E.FloorDiv) else "rs_floormod"   # -1 taken apart
            text = f"(({self.value_type(e.dtype)}){fn}({a}, {b}))"
        return self.guard_divisor(e.b, b, text)

    def guard_divisor(self, divisor, divisor_text: str, text: str) -> str:
        """``text`` (an integer division by ``divisor``) unless the divisor is zero: then the
        target's report (0 takes the quotient's place)."""
        if isinstance(divisor, E.IntImm) and divisor.value != 0:
            return text
        if self.divisor_known_nonzero(divisor):
            return text
        return f"(({divisor_text}) != 0 ? {text} : {self.zero_divisor_report()})"

    @handles(E.Min, E.Max, table="expr")
    def min_max(self, e) -> str:
        fn = "rs_min_" if isinstance(e, E.Min) else "rs_max_"
        return f"{fn}{self.helper_suffix(e.dtype)}({self.expr(e.a)}, {self.expr(e.b)})"

    @handles(*INFIX, table="expr")
    def infix(self, e) -> str:
        a, b, op = self.expr(e.a), self.expr(e.b), INFIX[type(e)]
        if type(e) in _WRAPPING and dt.is_int(e.dtype) and e.dtype not in ("uint32", "uint64") and not self.in_index:
            # NumPy wraps integer arithmetic in the dtype. C computes int8/int16/uint8/uint16 in int (a
            # compare then saw 127 + 1 = 128) and signed overflow is undefined (gcc folded x + 1 > x to
            # true): computed in the unsigned type of the width, then converted (two's complement)
            u = self.value_type("uint64" if e.dtype == "int64" else "uint32")
            return f"(({self.value_type(e.dtype)})(({u}){a} {op} ({u}){b}))"
        return f"({a} {op} {b})"

    def index_text(self, flat) -> str:
        """A buffer's flat index: plain arithmetic (a buffer fits int64, so its indices cannot
        overflow, and the compiler keeps its no-overflow facts for vectorizing)."""
        saved, self.in_index = self.in_index, True
        try:
            return self.expr(flat)
        finally:
            self.in_index = saved

    @handles(E.Not, table="expr")
    def logical_not(self, e: E.Not) -> str:
        return f"(!{self.expr(e.a)})"

    @handles(E.Select, table="expr")
    def select(self, e: E.Select) -> str:
        return f"({self.expr(e.condition)} ? {self.expr(e.true_value)} : {self.expr(e.false_value)})"

    @handles(E.Cast, table="expr")
    def cast(self, e: E.Cast) -> str:
        half = e.value.dtype == "float16"   # converted through float32 (exact)
        helper = float_to_int_helper("float32" if half else e.value.dtype, e.dtype)
        if helper is not None:   # defined where C's conversion is not (float_to_int_helpers)
            value = f"{helper}((float)({self.expr(e.value)}))" if half else f"{helper}({self.expr(e.value)})"
            return value if FLOAT_TO_INT_VIA[e.dtype] == e.dtype else f"(({self.value_type(e.dtype)}){value})"
        return f"(({self.value_type(e.dtype)}){self.expr(e.value)})"

    @handles(E.CallFunc, table="expr")
    def subroutine_call(self, e: E.CallFunc) -> str:
        raise self.error(f"a call of prim_func {e.callee!r} reached the {self.LANGUAGE} emitter; the build "
                         "inlines calls between prim_funcs first (tensorir.transform.inline_subroutines)")

    @handles(E.Call, table="expr")
    def call(self, e: E.Call) -> str:
        args = [self.expr(a) for a in e.args]
        if e.op == E.CHECKED_INDEX:
            return self.index_check(*args)
        if e.op == E.UNDEF:  # unspecified: 0, as the interpreter reads it
            return f"(({self.value_type(e.dtype)})0)"
        if e.op == E.REINTERPRET:
            return self.reinterpret(e, args[0])
        if e.op in E.BIT_COUNTS:
            return self.bit_count(e, args[0])
        if e.op == E.INTEGER_POWER:
            return self.integer_power(e, args)
        if e.op == "abs" and dt.is_uint(e.args[0].dtype):
            return f"({args[0]})"   # the targets' integer abs (llabs) would read 2**63.. as negative
        if e.op in E.BITWISE:  # C's integer operators, the result kept in the operands' type
            ctype = self.value_type(e.dtype)
            if e.op == "bitwise_not":
                return f"(({ctype})(~({args[0]})))"
            result = f"(({ctype})(({args[0]}) {_BIT_OPERATORS[e.op]} ({args[1]})))"
            if e.op in ("shift_left", "shift_right"):
                # NumPy's meaning where C's is undefined: a count outside [0, bits) shifts
                # everything out (0, or -1 for a negative value shifted right)
                out = "0" if e.op == "shift_left" or not dt.is_int(e.dtype) or dt.is_uint(e.dtype) \
                    else f"(({args[0]}) < 0 ? ({ctype})-1 : ({ctype})0)"
                return f"(((unsigned long long)({args[1]})) < {dt.bits(e.dtype)}ULL ? {result} : {out})"
            return result
        return self.math_call(e, args)

    def cast_to(self, value, dtype: str) -> str:
        text = self.expr(value)
        return text if value.dtype == dtype else f"(({self.value_type(dtype)}){text})"

    def buffer_name(self, buf) -> str:
        # A view (Buffer.data, e.g. flatten_buffers' flat view of a parameter) indexes the
        # pointer of the buffer owning its storage, with its own strides and elem_offset.
        storage = buf.storage
        if id(storage) not in self.names.by_id:
            what = f"view {buf.name!r} of {storage.name!r}" if storage is not buf else f"buffer {buf.name!r}"
            raise self.error(f"{what} is used but its storage is not defined")
        return self.names.by_id[id(storage)]

    # ------------------------------------------------------------ statements
    def emit(self, line: str) -> None:
        self.lines.append("  " * self.indent + line)

    def stmt(self, s) -> None:
        handler = self.handler_for(type(s), "stmt")
        if handler is None:
            raise self.error(f"the {self.LANGUAGE} target cannot emit {type(s).__name__}")
        handler(self, s)

    def nested(self, body) -> None:
        self.indent += 1
        self.stmt(body)
        self.indent -= 1

    @handles(S.SeqStmt, table="stmt")
    def seq(self, s: S.SeqStmt) -> None:
        for sub in s.seq:
            self.stmt(sub)

    @handles(S.IfThenElse, table="stmt")
    def if_then_else(self, s: S.IfThenElse) -> None:
        self.emit(f"if {parenthesized(self.expr(s.condition))} {{")
        self.nested(s.then_case)
        if s.else_case is not None:
            self.emit("} else {")
            self.nested(s.else_case)
        self.emit("}")

    @handles(S.While, table="stmt")
    def while_loop(self, s: S.While) -> None:
        self.emit(f"while {parenthesized(self.expr(s.condition))} {{")
        self.nested(s.body)
        self.emit("}")

    @handles(S.Break, table="stmt")
    def break_stmt(self, s: S.Break) -> None:
        self.emit("break;")   # the parser allows it only in a serial for or a while: a C loop here

    @handles(S.Continue, table="stmt")
    def continue_stmt(self, s: S.Continue) -> None:
        self.emit("continue;")

    @handles(S.AssertStmt, table="stmt")
    def assert_stmt(self, s: S.AssertStmt) -> None:
        raise self.error(f"the {self.LANGUAGE} target cannot check an assert inside a kernel: "
                         f"`assert {format_expr(s.condition)}, {s.message!r}`; check it in the host "
                         "code (or run on the C target)")

    @handles(S.LetStmt, table="stmt")
    def let(self, s: S.LetStmt) -> None:
        name = self.names.get(s.var, s.var.name)
        self.scoped(f"const {self.value_type(s.var.dtype)} {name} = {self.expr(s.value)};", s.body)

    def scoped(self, declaration: str, body) -> None:
        """``{ declaration body }``: a local only ``body`` sees."""
        self.emit("{")
        self.indent += 1
        self.emit(declaration)
        self.stmt(body)
        self.indent -= 1
        self.emit("}")

    @handles(S.Evaluate, table="stmt")
    def evaluate(self, s: S.Evaluate) -> None:
        if not isinstance(s.value, (E.IntImm, E.FloatImm)):
            self.emit(f"(void){self.expr(s.value)};")

    @handles(S.Block, S.BlockRealize, table="stmt")
    def unlowered_block(self, s) -> None:
        raise self.error("the function still has blocks; lower it first (tensorir.transform.lower, "
                         "or lower_for_gpu for a GPU target)")


def parenthesized(text: str) -> str:
    """``text`` in one pair of parentheses (not two: clang warns of ``if ((a == b))``)."""
    if text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, ch in enumerate(text):
            depth += ch == "("
            depth -= ch == ")"
            if depth == 0 and i < len(text) - 1:
                break
        else:
            return text
    return f"({text})"


_BIT_OPERATORS = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
                  "shift_left": "<<", "shift_right": ">>"}
