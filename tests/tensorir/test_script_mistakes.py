"""Issue 12 item 10: loop-level script mistakes are located ParseErrors, and the printer
escapes every string it writes (block names, scopes, thread tags, attributes)."""
import math

import pytest

import tensorir as tir
from tensorir.script.expr_printer import Namer

HEAD = '@T.prim_func\ndef f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):\n'
BLOCK = ('    for i, j in T.grid(4, 4):\n        with T.block("b"):\n'
         '            vk, vj = T.axis.remap("SS", [i, j])\n')


def parse_error(text: str) -> tir.ParseError:
    with pytest.raises(tir.ParseError) as info:
        tir.from_source(text)
    return info.value


@pytest.mark.parametrize("text, line, message", [
    # a non-boolean block predicate (found by the mutation fuzzer: TypeError from BlockRealize)
    (HEAD + BLOCK + '            T.where(vk + 1)\n            B[vk] = A[vk]\n', 6, "T.where takes a boolean"),
    # a string index (found by the mutation fuzzer: parsed, printed a region that did not parse back)
    (HEAD + BLOCK + '            B["a"] = A[vk]\n', 6, "must be an integer expression"),
    # a 2-index load of a 1-D buffer inside a block (was IndexError in region inference)
    (HEAD + BLOCK + '            B[vk] = A[vk, vj]\n', 6, "buffer 'A' has 1 dimension(s), indexed with 2"),
    # thousands of terms in a loop extent (was RecursionError)
    (HEAD + '    for i in range(%s):\n        B[0] = A[0]\n' % " + ".join(["4"] * 3000), 3, "nested too deeply"),
    (HEAD + '    for i in range(%s):\n        B[0] = A[0]\n' % " + ".join(["4"] * 300), 3, "nested more than"),
    ('@T.prim_func\ndef f(A: T.Buffer(("%s",), "float32")):\n    A[0] = 1.0\n' % " + ".join(["4"] * 3000),
     2, "nested more than"),
    # duplicate parameters (were accepted)
    ('@T.prim_func\ndef f(A: T.Buffer((4,), "float32"), A: T.Buffer((4,), "float32")):\n    A[0] = 1.0\n',
     2, "duplicate parameter 'A'"),
    # integer literals beyond their dtype (were accepted)
    ('@T.prim_func\ndef f(A: T.Buffer((100000000000000000000000,), "float32")):\n    A[0] = 1.0\n',
     2, "out of range"),
    ('@T.prim_func\ndef f(A: T.Buffer((4,), "int8")):\n    A[0] = 300\n', 3, "does not fit in int8"),
    # attribute values that are not literals
    ('@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    T.func_attr({"a": A})\n    A[0] = 1.0\n',
     3, "an annotation value is a literal"),
    ('@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    T.func_attr({"a": float("x")})\n    A[0] = 1.0\n',
     3, "is not a number"),
])
def test_script_mistakes_are_located_parse_errors(text, line, message):
    err = parse_error(text)
    assert message in str(err), str(err)
    assert err.lineno == line, str(err)


NASTY = ['b"lk', "a\\b", "x\ny", "\u2028", "\U0001F600", "caf\u00e9", "\x00"]


@pytest.mark.parametrize("text", NASTY)
def test_printer_escapes_block_names_scopes_threads_and_attributes(text):
    src = ('@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n'
           f'    T.func_attr({{"global_symbol": {text!r}, "x": float("nan")}})\n'
           f'    C = T.alloc_buffer((4,), "float32", scope={text!r})\n'
           f'    for i in T.thread_binding(4, thread={text!r}):\n'
           f'        with T.block({text!r}):\n'
           '            vi = T.axis.spatial(4, i)\n'
           f'            T.block_attr({{{text!r}: {text!r}}})\n'
           '            C[vi] = 1.0\n'
           '            A[vi] = C[vi]\n')
    func = tir.from_source(src)
    printed = func.script()
    again = tir.from_source(printed)
    tir.assert_structural_equal(func, again)
    assert again.script() == printed
    assert again.attrs["global_symbol"] == text and math.isnan(again.attrs["x"])


@pytest.mark.parametrize("name", ["x\nimport os", "a b", "class", "caf\u00e9", "x\u00b2", "\ufb01"])
def test_function_and_buffer_names_print_as_identifiers(name):
    func = tir.from_source('@T.prim_func\ndef f(A: T.Buffer((4,), "float32")):\n    A[0] = 1.0\n')
    renamed = func.replace(name=name)
    printed = renamed.script()
    assert "\nimport os" not in printed
    again = tir.from_source(printed)
    tir.assert_structural_equal(renamed, again)
    assert again.script() == printed
    printed_name = Namer()(tir.Buffer(name, (4,), "float32"))
    assert printed_name.isascii() and printed_name.isidentifier()


STORE = ('@T.prim_func\ndef f(A: T.Buffer(("n",), "float32"), B: T.Buffer(("n",), "{dtype}"), m: T.int32):\n'
         '    n = T.int64()\n    for i in range(n):\n        B[i] = {value}\n')


# Found by the literal-expression generator of tests/test_script_fuzz.py: each printed
# a text that parsed back to a different function.
@pytest.mark.parametrize("dtype, value", [
    ("float32", "T.max(True, A[i])"),  # True adopting float32 became an IntImm of dtype float32
    ("float16", "False"),
    ("float32", "T.float32('nan') + True"),
    ("int32", "T.int64(7)"),  # a store of another dtype printed its literal bare
    ("float32", "T.bool(True)"),
    ("int64", "True + (18446744073709551615 + -9223372036854775808)"),  # folded past int64
    ("float16", "-T.Cast('uint8', T.uint8(200)) <= T.int8(-128)"),  # guard: an unfolded -200 promoted to uint8
    ("float16", "18446744073709551615 % (-T.min((-0.0 % -1), T.int8(-128)))"),  # float % folded on re-parse
    ("int32", "-(((1e-320 / T.int8(-128)) % 1e308) == m)"),
])
def test_odd_literal_expressions_round_trip(dtype, value):
    func = tir.from_source(STORE.format(dtype=dtype, value=value))
    printed = func.script()
    again = tir.from_source(printed)
    tir.assert_structural_equal(func, again)
    assert again.script() == printed


def test_true_adopting_a_float_dtype_is_a_float_literal():
    from tensorir import expr as E
    assert isinstance(E.const(True, "float32"), E.FloatImm)
    assert isinstance(E.add(E.Var("x", "float16"), True).b, E.FloatImm)


def test_integer_folds_that_overflow_their_dtype_stay_expressions():
    from tensorir import expr as E
    assert isinstance(E.add(E.const(2 ** 62), E.const(2 ** 62)), E.Add)
    assert isinstance(E.sub(E.const(0, "int8"), E.const(-128, "int8")), E.Sub)
    assert E.add(E.const(1, "int8"), E.const(2, "int8")).value == 3
    with pytest.raises(ValueError, match="does not fit in int8"):
        E.const(300, "int8")
