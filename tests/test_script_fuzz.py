"""Fuzzed script texts (issue 12, item 10): any text either parses or raises ParseError
(no other exception, except deduction errors that name the script line), and whatever
parses prints, parses back structurally equal and prints the same text.

Texts are token-level mutations (deletions, duplications, substitutions, insertions
of tokens from the text itself or of troublesome ones) of valid scripts of both levels:
hand-written sources, their printed forms, and drawn prim_funcs with odd names and
attributes; and expressions over odd literals in a store, a loop extent and a prim value. The default run tries a few dozen texts; ``nox -s slow`` tries thousands.
"""
from __future__ import annotations

import io
import tokenize

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaxscript as rx
import tensorir as tir
from tensorir.errors import ParseError
from tests.relaxscript import script_sources
from tests.relaxscript.design_module import DESIGN_TEXT
from tests.relaxscript.test_script_random import random_modules
from tests.tensorir.catalog import CATALOG
from tests.tensorir.generators import prim_funcs

# view-like ops with -1, negative axes, keepdims, symbolic dims, integer floor division, a direct
# DPS call writing a parameter (s12-fuzz): mutations put wrong axes, counts and dtypes into them
VIEW_OPS_SEED = '''
@R.ir_module
class Module:
    @T.prim_func
    def double(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32")):
        n = T.int64()
        for i in range(n):
            with T.block("b"):
                vi = T.axis.spatial(n, i)
                b[vi] = a[vi] * T.float32(2)

    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("m",), "int32"), s: R.Shape(["k"])):
        n = T.int64()
        m = T.int64()
        k = T.int64()
        with R.dataflow():
            a = R.reshape(x, R.shape([-1, k]))
            b = R.squeeze(R.expand_dims(x, axis=-1), axis=[-1])
            c = R.argmax(b, axis=-2, keepdims=True)
            d = R.broadcast_to(R.expand_dims(y, 0), R.shape([n, m]))
            e = R.floor_mod(R.floor_divide(d, R.const(-3, "int32")), y)
            f = R.variance(x, axis=[-1, 0], keepdims=True)
            R.output(a, c, e, f)
        return (a, c, e, f)

    @R.function(pure=False)
    def dps(x: R.Tensor(("n",), "float32"), out: R.Tensor(("n",), "float32")):
        _ = R.call_tir_dps(Module.double, (x, out))
        return out
'''
RELAX_SEEDS = [script_sources.FIGURE2, script_sources.FIGURE3, script_sources.FIGURE7,
               script_sources.FIGURE8, DESIGN_TEXT, VIEW_OPS_SEED]
TIR_SEEDS = [entry.source for entry in CATALOG.values()]
# The printed (canonical) forms too: mutations of them exercise the printer's own syntax.
SEEDS = RELAX_SEEDS + TIR_SEEDS + [rx.from_source(s).script() for s in RELAX_SEEDS] \
    + [tir.from_source(s).script() for s in TIR_SEEDS]

# Tokens that hit the parsers' edges: odd literals, deep or huge values, quotes, names.
ODD_TOKENS = ['"a\\"b"', "'x\\ny'", '"\\u2028"', '"\\U0001F600"', "1e400", "10**23", "100000000000000000000000",
              "1.5", "-1", "0", "b'x'", "1j", "{1}", "None", "True", "(", ")", "[", "]", ",", ":", "=",
              "float('abc')", "float('nan')", "n + n + n", "T.int32(3000000000)", "T.int8(300)",
              "R.Tensor", "R.Tensor((n,), 'float32')", "T.Buffer", "R.shape([n])", "R.str('q\"')",
              "cls", "metadata", "lambda", "R", "T", "x", "n", "i", "vi", "**", "//", "%", "-", "not",
              "R.const(1)", "T.block", "'root'", "R.call_tir", '"name"', "\"float32\"", "\"int8\"", "()"]
ODD_NAMES = ["a b", "x\nimport os", 'q"uote', "caf\u00e9", "class", "9lives", "T", "\ufb01"]
ODD_VALUES = ['"a\\"b', "line\nbreak", float("nan"), float("-inf"), 2 ** 63 - 1, -(2 ** 63), [1, (2.5,)],
              {"k": "v\\"}, "\U0001F600", "\ud800", ""]


def _tokens(text: str) -> list[tuple[int, int, int]]:
    """(start, end, token type) of the significant tokens of ``text``."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    out = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type in (tokenize.NEWLINE, tokenize.NL, tokenize.INDENT, tokenize.DEDENT,
                            tokenize.ENDMARKER, tokenize.COMMENT):
                continue
            out.append((starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1], tok.type))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return out


@st.composite
def mutated_texts(draw, seeds) -> str:
    """Mutations of a text drawn from ``seeds`` (a list of texts or a strategy of texts)."""
    text = draw(seeds if isinstance(seeds, st.SearchStrategy) else st.sampled_from(seeds))
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3]))):
        spans = _tokens(text)
        if not spans:
            break
        start, end, kind_of_token = draw(st.sampled_from(spans))
        kind = draw(st.sampled_from(["delete", "duplicate", "replace", "insert", "swap", "swap"]))
        # "swap": another token of the same kind (name for name, number for number), which
        # keeps more texts parseable, so the round trip is exercised too.
        pool = [t for t in spans if t[2] == kind_of_token] if kind == "swap" else spans
        other_start, other_end, _ = draw(st.sampled_from(pool))
        own = text[other_start:other_end]
        new = draw(st.sampled_from(ODD_TOKENS)) if kind != "swap" and draw(st.integers(0, 2)) == 0 else own
        if kind == "delete":
            text = text[:start] + text[end:]
        elif kind == "duplicate":
            text = text[:end] + " " + text[start:end] + text[end:]
        elif kind in ("replace", "swap"):
            text = text[:start] + new + text[end:]
        else:
            text = text[:start] + new + " " + text[start:]
    return text


@st.composite
def odd_prim_func_texts(draw) -> str:
    """A drawn prim_func renamed and given attributes with troublesome strings and values."""
    generated = draw(prim_funcs())
    func = getattr(generated, "func", generated)
    attrs = {draw(st.sampled_from(ODD_NAMES)): draw(st.sampled_from(ODD_VALUES))
             for _ in range(draw(st.integers(0, 2)))}
    attrs["global_symbol"] = draw(st.sampled_from(ODD_NAMES))
    return func.replace(name=draw(st.sampled_from(ODD_NAMES)), attrs=attrs).script()


# Expressions over odd literals (typed, bool, non-finite, at the int64/uint64 edges),
# placed in a store, a loop extent and a graph-level prim value.
EXPR_ATOMS = ["n", "m", "0", "1", "-1", "2", "3.5", "-0.0", "1e308", "1e-320", "True", "False",
              "T.int32(3)", "T.float16(2.5)", "T.int64(7)", "T.uint8(200)", "T.bool(True)", "T.int8(-128)",
              "T.float32('nan')", "T.float32('-inf')", "9223372036854775807", "-9223372036854775808",
              "18446744073709551615", "A[i]", "B[i]"]
EXPR_OPS = ["+", "-", "*", "/", "//", "%", "<", "<=", "==", "!=", ">", ">=", "and", "or", "**"]


@st.composite
def literal_expressions(draw, depth: int = 4) -> str:
    if depth == 0 or draw(st.integers(0, 9)) < 3:
        return draw(st.sampled_from(EXPR_ATOMS))
    sub = lambda: draw(literal_expressions(depth - 1))  # noqa: E731
    form = draw(st.integers(0, 7))
    if form <= 2:
        return f"({sub()} {draw(st.sampled_from(EXPR_OPS))} {sub()})"
    if form == 3:
        return f"({draw(st.sampled_from(['-', 'not ']))}{sub()})"
    if form == 4:
        return f"T.{draw(st.sampled_from(['max', 'min', 'floordiv', 'floormod', 'truncdiv']))}({sub()}, {sub()})"
    if form == 5:
        return f"T.if_then_else({sub()}, {sub()}, {sub()})"
    if form == 6:
        dtype = draw(st.sampled_from(["int32", "float16", "int64", "float32", "bool", "uint8"]))
        return f"T.Cast('{dtype}', {sub()})"
    return f"T.{draw(st.sampled_from(['exp', 'sqrt', 'abs']))}({sub()})"


@st.composite
def literal_expression_texts(draw) -> str:
    expr = draw(literal_expressions())
    place = draw(st.sampled_from(["store", "extent", "prim_value", "shape", "signature"]))
    if place == "store":
        dtype = draw(st.sampled_from(["float32", "int32", "float16", "int8", "bool"]))
        return (f'@T.prim_func\ndef f(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n",), "{dtype}"), '
                f'm: T.int32):\n    n = T.int64()\n    for i in range(n):\n        B[i] = {expr}\n')
    expr = expr.replace("A[i]", "m").replace("B[i]", "n")
    if place == "extent":
        return (f'@T.prim_func\ndef f(A: T.Buffer(("n",), "float32"), m: T.int64):\n    n = T.int64()\n'
                f'    for i in range({expr}):\n        A[0] = 1.0\n')
    if place == "signature":
        return (f'@R.function\ndef main(x: R.Tensor(("n", "m"), "f32"), y: R.Tensor(("{expr}",), "f32")):\n'
                '    return y\n')
    value = f"R.shape([{expr}, n])" if place == "shape" else f"R.prim_value({expr})"
    return (f'@R.function\ndef main(x: R.Tensor(("n", "m"), "f32")):\n    n = T.int64()\n    m = T.int64()\n'
            f'    s = {value}\n    return s\n')


@st.composite
def odd_relax_module_texts(draw) -> str:
    """A drawn graph-level module whose function and module carry odd attributes."""
    mod = draw(random_modules())
    attrs = {draw(st.sampled_from(ODD_NAMES)): draw(st.sampled_from(ODD_VALUES))
             for _ in range(draw(st.integers(0, 2)))}
    attrs["global_symbol"] = draw(st.sampled_from(ODD_NAMES))
    functions = dict(mod.functions)
    functions["main"] = functions["main"].replace(attrs=attrs)
    functions["main"].is_private = draw(st.booleans())   # @R.function(private=True) (s13)
    module_attrs = {draw(st.sampled_from(ODD_NAMES)): draw(st.sampled_from(ODD_VALUES))}
    return rx.IRModule(functions, module_attrs).script()


def _is_located_deduction_error(err: Exception) -> bool:
    """Deduction errors keep their ValueError type and name the script position."""
    return isinstance(err, ValueError) and "<string>:" in str(err)


def check_text(text: str, parse) -> str:
    """Parse ``text``; when it parses, check print -> parse -> print. Returns the outcome."""
    try:
        parsed = parse(text)
    except tir.ParseError:
        return "error"
    except ValueError as err:
        if _is_located_deduction_error(err):
            return "error"
        raise
    printed = parsed.script()
    again = parse(printed)
    tir.assert_structural_equal(parsed, again)
    assert again.script() == printed
    assert _private_flags(again) == _private_flags(parsed)   # not part of structural equality
    return "parsed"


def _private_flags(parsed) -> dict:
    functions = parsed.functions if isinstance(parsed, rx.IRModule) else {"": parsed}
    return {name: getattr(f, "is_private", None) for name, f in functions.items()}


def _check_both_levels(text: str) -> None:
    check_text(text, rx.from_source if "@R." in text else tir.from_source)


def _fuzz(budget: int):
    return settings(max_examples=budget, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@_fuzz(40)
@given(text=mutated_texts(SEEDS))
def test_mutated_scripts_parse_or_raise_parse_error(text):
    _check_both_levels(text)


@_fuzz(15)
@given(text=odd_prim_func_texts())
def test_prim_funcs_with_odd_names_and_attributes_round_trip(text):
    assert check_text(text, tir.from_source) == "parsed"


@_fuzz(10)
@given(text=odd_relax_module_texts())
def test_relax_modules_with_odd_attributes_round_trip(text):
    assert check_text(text, rx.from_source) == "parsed"


@_fuzz(10)
@given(text=mutated_texts(odd_relax_module_texts()))
def test_mutated_odd_relax_modules_parse_or_raise_parse_error(text):
    _check_both_levels(text)


@pytest.mark.fuzz
@_fuzz(500)
@given(text=mutated_texts(odd_relax_module_texts()))
def test_mutated_odd_relax_modules_parse_or_raise_parse_error_many(text):
    _check_both_levels(text)


@_fuzz(40)
@given(text=literal_expression_texts())
def test_literal_expressions_parse_or_raise_parse_error(text):
    _check_both_levels(text)


@pytest.mark.fuzz
@_fuzz(3000)
@given(text=literal_expression_texts())
def test_literal_expressions_parse_or_raise_parse_error_many(text):
    _check_both_levels(text)


@pytest.mark.fuzz
@_fuzz(3000)
@given(text=mutated_texts(SEEDS))
def test_mutated_scripts_parse_or_raise_parse_error_many(text):
    _check_both_levels(text)


@pytest.mark.fuzz
@_fuzz(500)
@given(text=odd_prim_func_texts())
def test_prim_funcs_with_odd_names_and_attributes_round_trip_many(text):
    assert check_text(text, tir.from_source) == "parsed"


def test_an_operator_as_a_tuple_field_is_a_parse_error():
    # found by the mutation fuzz: `R.exp, (x)` built a tuple holding an operator, whose missing
    # annotation then crashed the error message
    text = ('@R.function\ndef main(x: R.Tensor((4,), dtype="float32")):\n'
            '    y: R.Tensor((4,), dtype="float32") = R.exp, (x)\n    return y\n')
    with pytest.raises(ParseError, match=r"the operator R\.exp \(call it"):
        rx.from_source(text)
