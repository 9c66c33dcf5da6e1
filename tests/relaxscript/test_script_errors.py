"""Script mistakes raise ParseError (or a located deduction ValueError) at the user's line."""
import pytest

import relaxscript as rx
from relaxscript import R, function

HEAD = '@R.function\ndef main(x: R.Tensor(("n", 4), "f32")):\n'


def parse_error(text: str) -> rx.ParseError:
    with pytest.raises(rx.ParseError) as info:
        rx.from_source(text)
    return info.value


@pytest.mark.parametrize("body, line, col, message, context", [
    ('    lv = R.add(x, y)\n    return lv\n', 3, 18, "undefined name 'y'", "in function 'main'"),
    ('    lv: R.Tensor((k, 4), "f32") = R.add(x, x)\n    return lv\n', 3, 18,
     "undefined symbolic variable 'k'", "annotation of 'lv'"),
    ('    R.output(x)\n    return x\n', 3, 4, "R.output(...) is only allowed", None),
    ('    lv = R.frobnicate(x)\n    return lv\n', 3, 9, "unknown R function 'R.frobnicate'", None),
    ('    lv = R.add(x)\n    return lv\n', 3, 9, "missing a required argument: 'b'", None),
    ('    lv = R.nn.softmax(x, x, x, x)\n    return lv\n', 3, 9, "R.nn.softmax", None),
    ('    lv: R.Tensor((n, 5), "f32") = R.add(x, x)\n    return lv\n', 3, 8,
     'annotated R.Tensor((n, 5), dtype="float32") but its value is R.Tensor((n, 4), dtype="float32")', None),
    ('    lv: R.Tensor((n, 4), "f16") = R.add(x, x)\n    return lv\n', 3, 8, "annotated", None),
    ('    with R.dataflow():\n        lv = R.add(x, x)\n    return lv\n', 4, 8,
     "must end with R.output", None),
    ('    with R.dataflow():\n        lv = R.add(x, x)\n        R.output(gv)\n    return lv\n', 5, 17,
     "R.output names 'gv', which is not bound", None),
    ('    with R.dataflow():\n        lv = R.add(x, x)\n        R.output()\n    return lv\n', 6, 11,
     "undefined name 'lv'", None),
    ('    lv = R.add(x, x)\n', 3, 4, "must end with a return statement", None),
    ('    lv = R.const(1, "f33")\n    return lv\n', 3, 20, "unknown dtype 'f33'", None),
    ('    lv = R.shape([x])\n    return lv\n', 3, 18, "'x' is a graph-level value", None),
    ('    if x:\n        y = x\n    return y\n', 3, 4, "needs an else branch", None),
    ('    a, b = x, x\n    return a\n', 3, 4, "assign to a single name", None),
    # well-formedness problems the builder cannot see binding by binding
    ('    with R.dataflow():\n        y = R.call_packed("p", x, sinfo_args=[R.Object])\n        R.output(y)\n'
     '    return y\n', 4, 12, "impure call of 'p' inside a dataflow block", "in function 'main'"),
    ('    m = T.int64()\n    s = R.shape([m])\n    y = R.match_cast(x, R.Tensor((n, m), "f32"))\n'
     '    return s\n',
     4, 8, "symbolic var 'm' in shape value ShapeExpr is used before the match_cast that defines it",
     "in function 'main'"),
    ('    m = T.int64()\n    p = R.prim_value(m + 1)\n    return p\n', 4, 8,
     "symbolic var 'm' in a prim value is not defined by any parameter annotation or earlier match_cast",
     None),
])
def test_located_parse_errors(body, line, col, message, context):
    err = parse_error(HEAD + body)
    assert err.lineno == line and err.col == col, str(err)
    assert message in str(err)
    if context:
        assert context in str(err)
    assert err.text.strip() in (HEAD + body).splitlines()[line - 1]


def test_unknown_dtype_in_parameter_names_the_parameter():
    err = parse_error('@R.function\ndef main(x: R.Tensor(("n", 4), "f32"), y: R.Tensor((2,), "f33")):\n'
                      '    return x\n')
    assert (err.lineno, err.col) == (2, 57)
    assert "in function 'main', parameter 'y': unknown dtype 'f33'" in str(err)
    assert str(err).splitlines()[-1].strip() == "^"


def test_undefined_symbolic_expression_in_signature():
    err = parse_error('@R.function\ndef main(x: R.Tensor(("n", "n * m"), "f32")):\n    return x\n')
    assert err.lineno == 2 and "undefined symbolic variable 'm'" in str(err)
    assert "parameter 'x'" in str(err)


def test_runtime_only_annotation_suggests_match_cast():
    err = parse_error('@R.function\ndef main(x: R.Tensor(ndim=1, dtype="f32")):\n    n = T.int64()\n'
                      '    lv: R.Tensor((n,), "f32") = R.exp(x)\n    return lv\n')
    assert err.lineno == 4 and "R.match_cast" in str(err)


def test_deduction_conflict_is_a_located_value_error():
    text = ('@R.function\ndef main(x: R.Tensor(("n", 4), "f32"), y: R.Tensor((3, 5), "f32")):\n'
            '    lv = R.add(x, y)\n    return lv\n')
    with pytest.raises(ValueError) as info:
        rx.from_source(text, filename="model.py")
    assert not isinstance(info.value, SyntaxError)
    assert "model.py:3" in str(info.value) and "lv = R.add(x, y)" in str(info.value)
    assert 'R.Tensor((3, 5), dtype="float32")' in str(info.value)


def test_return_annotation_conflict_is_located():
    text = '@R.function\ndef main(x: R.Tensor(("n", 4), "f32")) -> R.Tensor((5,), "f32"):\n    return x\n'
    with pytest.raises(ValueError) as info:
        rx.from_source(text)
    assert "<string>:3" in str(info.value) and "R.Tensor((5,), dtype=\"float32\")" in str(info.value)


def test_module_level_errors():
    err = parse_error('@R.ir_module\nclass M:\n    def f(x: R.Tensor):\n        return x\n')
    assert err.lineno == 3 and "needs a decorator" in str(err)
    err = parse_error('@R.ir_module\nclass M:\n    @R.function\n    def f(x: R.Tensor):\n        return cls.g\n')
    assert err.lineno == 5 and "module has no function 'g'" in str(err)
    err = parse_error('x = 1\n')
    assert err.lineno == 1
    err = parse_error('def f(:\n')
    assert "invalid Python syntax" in str(err)


def test_decorator_errors_point_into_this_file():
    with pytest.raises(rx.ParseError) as info:
        @function
        def bad(x: R.Tensor(("n",), "float32")):
            lv = R.add(x, missing)  # noqa: F821
            return lv
    err = info.value
    assert err.filename.endswith("test_script_errors.py")
    assert err.text.strip() == "lv = R.add(x, missing)  # noqa: F821"
    import inspect
    lines, first = inspect.getsourcelines(test_decorator_errors_point_into_this_file)
    expected = first + next(i for i, ln in enumerate(lines) if "R.add(x, missing)" in ln)
    assert err.lineno == expected


def test_issue_example_conflict_names_both_annotations_and_the_line():
    text = ('@R.function\ndef main(x: R.Tensor(("n", 4), "f32"), y: R.Tensor(("n", 5), "f32")):\n'
            '    n = T.int64()\n    lv = R.add(x, y)\n    return lv\n')
    with pytest.raises(ValueError) as info:
        rx.from_source(text, filename="model.py")
    message = str(info.value)
    assert not isinstance(info.value, SyntaxError)
    assert 'R.Tensor((n, 4), dtype="float32")' in message and 'R.Tensor((n, 5), dtype="float32")' in message
    assert "model.py:4: lv = R.add(x, y)" in message


def test_from_source_never_executes_the_text(tmp_path):
    marker = tmp_path / "executed"
    side_effect = f"open({str(marker)!r}, 'w').write('x')"
    texts = [
        f"{side_effect}\n@R.function\ndef main(x: R.Tensor((2,), 'f32')):\n    return x\n",
        f"@R.function\ndef main(x: R.Tensor((2,), 'f32')):\n    y = {side_effect}\n    return x\n",
        f"@R.function\ndef main(x: R.Tensor(({side_effect},), 'f32')):\n    return x\n",
        f"@R.ir_module\nclass M:\n    {side_effect}\n",
    ]
    for text in texts:
        with pytest.raises(rx.ParseError):
            rx.from_source(text)
    assert not marker.exists()


@pytest.mark.parametrize("call, message", [
    ('R.astype(x, "float8")', "R.astype: dtype 'float8' is not a known dtype"),
    ('R.sum(x, axis="a")', "R.sum: axis must be an int or a tuple of ints, got 'a'"),
])
def test_attribute_errors_name_the_operator_once(call, message):
    err = parse_error(HEAD + f"    lv = {call}\n    return lv\n")
    assert err.message == message and err.lineno == 3


@pytest.mark.parametrize("value", [
    'R.zeros(R.shape([9223372036854775807, 2]), "float32")',
    'R.broadcast_to(R.zeros(R.shape([3]), "float32"), R.shape([4611686018427387904, 3]))',
    'R.sum(R.ones(R.shape([1099511627776, 1099511627776]), "float32"))',
    'R.tile(R.zeros(R.shape([3]), "float32"), [4611686018427387904])',
])
def test_a_constant_shape_past_the_int64_element_count_is_a_located_error(value):
    """s13: (2**63 - 1, 2) zeros made the C build fail inside gcc (a fused loop extent of 2**64 - 2
    emitted as an int64 literal) and the interp VM raise NumPy's bare 'Maximum allowed dimension
    exceeded'; a sum of (2**40, 2**40) ones ran for ever on C. The deduction now refuses such a
    result at its line."""
    text = f'@R.function\ndef main(x: R.Tensor((3,), "f32")):\n    y = {value}\n    return y\n'
    with pytest.raises(ValueError, match=r"more than an int64 counts \(9223372036854775807\)") as info:
        rx.from_source(text)
    assert "<string>:3" in str(info.value)
