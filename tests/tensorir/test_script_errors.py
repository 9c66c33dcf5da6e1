"""Script mistakes raise ParseError with file, line, source line and context."""
import pytest

import tensorir as tir


def parse_error(text: str) -> tir.ParseError:
    with pytest.raises(tir.ParseError) as info:
        tir.from_source(text, filename="model.py")
    err = info.value
    assert isinstance(err, SyntaxError)
    assert err.filename == "model.py"
    return err


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.split("\n"), 1) if fragment in line)


CASES = [
    # (name, script, line fragment, message fragment, context fragment)
    ("undefined_symbolic_var", '''
@T.prim_func
def f(A: T.Buffer(("n * m",), "float32")):
    n = T.int64()
    A[0] = 1.0
''', 'def f(A', "undefined symbolic variable 'm'", "parameter 'A'"),
    ("undefined_name", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i] = B[i] + 1.0
''', "A[i] = B[i]", "undefined name 'B'", "in function 'f'"),
    ("remap_arity", '''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32")):
    for i, j in T.grid(4, 4):
        with T.block("b"):
            vi, vj = T.axis.remap("SSR", [i, j])
            A[vi, vj] = 0.0
''', "T.axis.remap", "3 kind(s)", "in function 'f'"),
    ("undeclared_store", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        Z[i] = 1.0
''', "Z[i] = 1.0", "store to undeclared buffer 'Z'", "in function 'f'"),
    ("unknown_dtype", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "f33")):
    T.evaluate(0)
''', "def f(A", "unknown dtype 'f33'", "parameter 'B'"),
    ("unknown_T_function", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i] = T.frobnicate(A[i])
''', "T.frobnicate", "unknown function 'T.frobnicate'", "in function 'f'"),
    ("intrinsic_arity", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i] = T.exp(A[i], 2.0)
''', "T.exp(A[i], 2.0)", "T.exp takes 1 argument(s), got 2", "in function 'f'"),
    ("non_constant_block_name", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.block(A[0]):
            A[i] = 1.0
''', "T.block(A[0])", "block name must be a constant", "in function 'f'"),
    ("non_constant_fact", '''
@T.prim_func
def f(A: T.Buffer(("n",), "float32")):
    n = T.int64(upper=A[0])
    T.evaluate(0)
''', "n = T.int64(upper", "upper must be a constant", "in function 'f'"),
    ("non_constant_dtype", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    B = T.alloc_buffer((4,), A[0])
    T.evaluate(0)
''', "B = T.alloc_buffer", "dtype must be a constant", "in function 'f'"),
    ("remap_of_non_loop", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32"), m: T.int64):
    for i in range(4):
        with T.block("b"):
            vi = T.axis.remap("S", [m])
            A[vi] = 1.0
''', 'T.axis.remap("S", [m])', "m is not one", "in function 'f'"),
    ("wrong_rank", '''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32")):
    for i in range(4):
        A[i] = 1.0
''', "A[i] = 1.0", "has 2 dimension(s), indexed with 1", "in function 'f'"),
    ("grid_targets", '''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32")):
    for i in T.grid(4, 4):
        A[i, 0] = 1.0
''', "for i in T.grid", "2 extent(s) but the loop binds 1", "in function 'f'"),
    ("axis_outside_block", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for i in range(4):
        vi = T.axis.spatial(4, i)
        A[vi] = 1.0
''', "vi = T.axis", "must be directly inside a `with T.block", "in function 'f'"),
    ("missing_annotation", '''
@T.prim_func
def f(A):
    T.evaluate(0)
''', "def f(A)", "needs an annotation", "parameter 'A'"),
    ("unsupported_statement", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    try:
        A[0] = 1.0
    except ValueError:
        pass
''', "try:", "unsupported statement Try", "in function 'f'"),
    ("useless_expression", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    T.exp(A[0])
''', "T.exp(A[0])", "has no effect", "in function 'f'"),
    ("grid_target_not_a_name", '''
@T.prim_func
def f(A: T.Buffer((4, 4), "float32")):
    for i, R.x in T.grid(4, 4):
        A[i, 0] = 0.0
''', "for i, R.x", "loop targets must be names", "in function 'f'"),
    ("range_target_not_a_name", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    for A[0] in range(4):
        A[0] = 0.0
''', "for A[0]", "loop targets must be names", "in function 'f'"),
    ("syntax_error", '''
@T.prim_func
def f(A: T.Buffer((4,), "float32"):
    pass
''', "def f(A", "invalid Python syntax", ""),
]


@pytest.mark.parametrize("name,text,line_fragment,message,context", CASES, ids=[c[0] for c in CASES])
def test_parse_errors(name, text, line_fragment, message, context):
    err = parse_error(text)
    assert err.lineno == line_of(text, line_fragment), str(err)
    assert message in str(err)
    assert context in str(err)
    assert line_fragment in err.text
    rendered = str(err)
    assert rendered.startswith(f"model.py:{err.lineno}:")
    assert rendered.rstrip().endswith("^")


def test_column_points_at_offending_name():
    err = parse_error(CASES[1][1])
    assert err.text[err.col:].startswith("B[i]")


def test_exactly_one_function_required():
    err = parse_error('''
@T.prim_func
def f(A: T.Buffer((4,), "float32")):
    T.evaluate(0)

@T.prim_func
def g(A: T.Buffer((4,), "float32")):
    T.evaluate(0)
''')
    assert "exactly one function" in err.msg
