"""Printer details (names, literals, precedence, indent, repr) and the API for the graph-level parser."""
import ast

import pytest

import tensorir as tir
from tensorir import (Block, BlockRealize, Buffer, BufferStore, For, IntImm, IterVar, LetStmt,
                      PrimFunc, Range, Var, seq)
from tensorir import expr as E
from tensorir.script import (SourceInfo, format_expr, make_parse_error,
                             parse_prim_expr, parse_prim_func_def, print_prim_func)
from tests.tensorir.catalog import load


def round_trips(func):
    text = func.script()
    again = tir.from_source(text)
    tir.assert_structural_equal(func, again)
    assert again.script() == text
    return text


def test_clashing_names_are_renamed_deterministically():
    n = tir.size_var("n")
    a = Buffer("A", [n], "float32")
    b = Buffer("A", [n], "float32")  # same name, different buffer
    i1, i2 = Var("i"), Var("i")
    body = seq(For(i1, 0, n, "serial", BufferStore(b, a[i1], [i1])),
               For(i2, 0, n, "serial", BufferStore(a, b[i2] * 2.0, [i2])))
    text = round_trips(PrimFunc([a, b], body, name="f"))
    assert "def f(A: " in text and "A_1: T.Buffer" in text
    assert "for i in range(n):" in text and "for i_1 in range(n):" in text


def test_hand_built_block_function_round_trips():
    n = Var("n", "int32", lower=0, upper=16)
    a = Buffer("A", [n, 4], "float16")
    i, j = Var("i", "int32"), Var("j", "int32")
    vi, vj = Var("vi", "int32"), Var("vj", "int32")
    store = BufferStore(a, a[vi, vj] * E.FloatImm(0.5, "float16"), [vi, vj])
    block = Block("scale", [IterVar(vi, Range(IntImm(0, "int32"), n), "S"),
                            IterVar(vj, Range(IntImm(0, "int32"), IntImm(4, "int32")), "S")],
                  [tir.BufferRegion.full(a)], [tir.BufferRegion.full(a)], store)
    nest = For(i, IntImm(0, "int32"), n, "serial",
               For(j, IntImm(0, "int32"), IntImm(4, "int32"), "serial", BlockRealize([i, j], None, block)))
    root = BlockRealize([], None, Block("root", [], [], [], nest))
    text = round_trips(PrimFunc([a], root, name="scale"))
    assert 'n = T.int32(upper=16)' in text
    assert "T.grid(n, T.int32(4))" in text and 'vi, vj = T.axis.remap("SS", [i, j])' in text
    assert "A[vi, vj] * T.float16(0.5)" in text or "A[vi, vj] * 0.5" in text


def test_let_in_the_middle_of_a_sequence_uses_scoped_form():
    a = Buffer("A", [2], "float32")
    x = Var("x", "float32")
    body = seq(LetStmt(x, a[0] + 1.0, BufferStore(a, x, [1])), BufferStore(a, 0.0, [0]))
    text = round_trips(PrimFunc([a], body))
    assert "with T.LetStmt(A[0] + 1.0) as x:" in text


@pytest.mark.parametrize("expr,text", [
    (lambda n, m: (n + m) * 2, "(n + m) * 2"),
    (lambda n, m: n - (m - 1), "n - (m - 1)"),
    (lambda n, m: n - m - 1, "n - m - 1"),
    (lambda n, m: n // (m * 2), "n // (m * 2)"),
    (lambda n, m: -(n + m), "-(n + m)"),
    (lambda n, m: E.Not(E.And(n < m, E.Or(n > 1, m > 1))), "not (n < m and (n > 1 or m > 1))"),
    (lambda n, m: E.LT(E.LT(n, m), E.IntImm(True, "bool")), "(n < m) < True"),
    (lambda n, m: E.max_(n, 3) % m, "T.max(n, 3) % m"),
    (lambda n, m: E.cast("float32", n) / 3.0, 'T.Cast("float32", n) / 3.0'),
    (lambda n, m: E.FloatImm(float("inf"), "float32"), 'T.float32("inf")'),
    (lambda n, m: E.IntImm(-3, "int32"), "T.int32(-3)"),
])
def test_format_expr(expr, text):
    n, m = Var("n"), Var("m")
    built = expr(n, m)
    assert format_expr(built) == text
    parsed = parse_prim_expr(ast.parse(text, mode="eval").body, {"n": n, "m": m}, SourceInfo.from_text(text))
    tir.assert_structural_equal(built, parsed, map_free_vars=False)


def test_repr_of_nodes_uses_script_form():
    func = load("matmul")
    realize = tir.collect(func, lambda x: isinstance(x, BlockRealize) and x.block.name == "C")[0]
    assert repr(realize.block.reads[0]) == "A[vi, vk]"
    assert repr(func.params[0]) == 'A = T.Buffer((16, 8), "float32")'
    assert "with T.init():" in repr(realize)
    assert repr(func) == func.script()


def test_indent_and_name_for_module_printing():
    func = load("exp")
    text = print_prim_func(func, name="my_exp", indent=4)
    lines = text.split("\n")
    assert lines[0] == "    @T.prim_func" and lines[1].startswith("    def my_exp(")
    assert all(line.startswith("    ") for line in lines if line)


def test_parse_prim_func_def_with_source_offsets():
    text = "class Module:\n    @T.prim_func\n    def f(A: T.Buffer((4,), \"float32\")):\n        A[0] = Q\n"
    module = ast.parse(text)
    func_def = module.body[0].body[0]
    source = SourceInfo("mod.py", text.splitlines(), line_offset=10)
    with pytest.raises(tir.ParseError) as info:
        parse_prim_func_def(func_def, source, {})
    assert info.value.lineno == 14 and info.value.filename == "mod.py"
    assert "A[0] = Q" in info.value.text
    ok = parse_prim_func_def(func_def, source, {"Q": 2.5})
    assert ok.body.value.value == 2.5


def test_parse_prim_expr_and_errors():
    n = tir.size_var("n")
    node = ast.parse("T.max(n * 4, 8) // 2", mode="eval").body
    got = parse_prim_expr(node, {"n": n}, SourceInfo.from_text("x"), "in function 'main'")
    tir.assert_structural_equal(got, E.floordiv(E.max_(n * 4, 8), 2), map_free_vars=False)
    bad = ast.parse("n * k", mode="eval").body
    with pytest.raises(tir.ParseError, match="undefined symbolic variable 'k'") as info:
        parse_prim_expr(bad, {"n": n}, SourceInfo("m.py", ["n * k"], 4), "in function 'main'")
    assert info.value.lineno == 5 and "in function 'main'" in str(info.value)
    err = make_parse_error("boom", bad, SourceInfo("m.py", ["n * k"], 0, 8), "ctx")
    assert isinstance(err, tir.ParseError) and err.col == 8 and err.lineno == 1
