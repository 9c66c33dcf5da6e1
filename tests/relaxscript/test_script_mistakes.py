"""Issue 12 item 10: every graph-level script mistake is a located ParseError, and the
printer writes only text that parses back (strings escaped, names checked)."""
import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from relaxscript import op

HEAD = '@R.function\ndef main(x: R.Tensor(("n", 4), "f32")):\n'
LONG_SUM = " + ".join(["n"] * 3000)


def parse_error(text: str) -> rx.ParseError:
    with pytest.raises(rx.ParseError) as info:
        rx.from_source(text)
    return info.value


@pytest.mark.parametrize("text, line, message", [
    # metadata constant whose data is not a base64 string (was AttributeError)
    (HEAD + '    lv = R.const(metadata["relax.Constant"][0])\n    return lv\n'
     'metadata = {"relax.Constant": [{"dtype": "float32", "shape": (1,), "data": 5}]}\n',
     5, "data is a base64 string"),
    (HEAD + '    return x\nmetadata = {"relax.Constant": [{"dtype": "float32", "shape": (-1,), "data": ""}]}\n',
     4, "shape is a tuple of non-negative integers"),
    (HEAD + '    return x\nmetadata = {"relax.Constant": 3}\n', 4, "must be a list of constants"),
    # float("abc") (was ValueError)
    (HEAD + '    lv = R.const(float("abc"))\n    return lv\n', 3, "float('abc') is not a number"),
    # thousands of terms (was RecursionError)
    ('@R.function\ndef main(x: R.Tensor(("n", "%s"), "f32")):\n    return x\n' % LONG_SUM, 2,
     "nested more than"),
    (HEAD + '    lv = R.shape([%s])\n    return lv\n' % LONG_SUM, 3, "nested too deeply"),
    (HEAD + '    lv = R.shape([%s])\n    return lv\n' % " + ".join(["n"] * 400), 3, "nested more than"),
    # huge split on a symbolic dim (was OverflowError)
    (HEAD + '    lv = R.split(x, indices_or_sections=100000000000000000000000)\n    return lv\n', 3,
     "does not fit in int64"),
    (HEAD + '    lv = R.split(x, indices_or_sections=1000000000)\n    return lv\n', 3, "at most 65536 sections"),
    # string callee of call_tir (was TypeError from the normalizer)
    (HEAD + '    lv = R.call_tir("name", [x], R.Tensor((n, 4), "f32"))\n    return lv\n', 3,
     "the callee must be a prim_func"),
    # invalid dims (were accepted)
    ('@R.function\ndef main(x: R.Tensor(("n", 1.5), "f32")):\n    return x\n', 2,
     "a dimension must be an integer expression"),
    ('@R.function\ndef main(x: R.Tensor(("1e400",), "f32")):\n    return x\n', 2,
     "a dimension must be an integer expression"),
    ('@R.function\ndef main(x: R.Tensor((100000000000000000000000,), "f32")):\n    return x\n', 2,
     "out of range"),
    ('@R.function\ndef main(x: R.Tensor((T.int32(3000000000),), "f32")):\n    return x\n', 2,
     "does not fit in int32"),
    ('@R.function\ndef main(x: R.Tensor(ndim=-3)):\n    return x\n', 2, "ndim must be -1"),
    # duplicate parameters (were accepted)
    ('@R.function\ndef main(x: R.Tensor((4,), "f32"), x: R.Tensor((4,), "f32")):\n    return x\n', 2,
     "duplicate parameter 'x'"),
    # attribute values the printer cannot write (were accepted, then .script() raised)
    (HEAD + '    R.func_attr({"a": b"xy"})\n    return x\n', 3, "unsupported literal b'xy'"),
    (HEAD + '    R.func_attr({"a": {1, 2}})\n    return x\n', 3, "unsupported literal"),
    (HEAD + '    R.func_attr({"a": 1j})\n    return x\n', 3, "unsupported literal"),
    (HEAD + '    R.func_attr({"a": [{(1, 2): 3}]})\n    return x\n', 3, "dict keys are literals"),
    ('@R.ir_module\nclass M:\n    R.module_attrs({"a": b"x"})\n' + '    ' + HEAD.replace("\n", "\n    ")
     + '    return x\n', 3, "unsupported literal"),
    # a member named like the script namespace (found by the mutation fuzzer: parsed, then unprintable)
    ('@R.ir_module\nclass M:\n    @R.function\n    def R(x: R.Tensor((4,), "f32")):\n        return x\n', 4,
     "cannot be named 'R'"),
])
def test_script_mistakes_are_located_parse_errors(text, line, message):
    err = parse_error(text)
    assert message in str(err), str(err)
    assert err.lineno == line, str(err)


def test_attribute_values_read_back_with_non_finite_floats_inside_containers():
    text = HEAD + '    R.func_attr({"a": [{"b": float("nan")}, (float("-inf"),)]})\n    return x\n'
    func = rx.from_source(text)
    again = rx.from_source(func.script())
    assert again.script() == func.script()
    value = again.attrs["a"]
    assert np.isnan(value[0]["b"]) and value[1] == (float("-inf"),)


def _exp_function(attrs):
    x = rx.Var("x", rx.TensorStructInfo((4,), "float32"))
    bb = rx.BlockBuilder()
    with bb.function("main", [x], attrs=attrs):
        out = bb.emit(op.exp(x))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.parametrize("symbol", ["ma\nimport os\nos.system('echo HI')\nin", 'a"b', "a\\b", "\u2028x",
                                    "\ud800", "\U0001F600", "class", "1abc", "caf\u00e9", "a\x00b"])
def test_function_printed_under_any_global_symbol_parses_back(symbol):
    func = _exp_function({"global_symbol": symbol})["main"]
    text = func.script()
    assert "\nimport os" not in text  # the newline stays inside the string literal
    again = rx.from_source(text)
    assert again.attrs["global_symbol"] == symbol
    tir.assert_structural_equal(again, func)
    assert again.script() == text


@pytest.mark.parametrize("name", ["a b", "class", "R", "x\nimport os"])
def test_module_member_that_cannot_be_named_is_refused_by_the_printer(name):
    mod = rx.IRModule({name: _exp_function({})["main"]})
    with pytest.raises(ValueError, match="cannot print a function named"):
        mod.script()


@pytest.mark.parametrize("hint", ["a b", "x\u00b2", "\ufb01", "fi", "lambda", "R", "9x", ""])
def test_variable_names_print_as_ascii_identifiers(hint):
    x = rx.Var(hint, rx.TensorStructInfo((4,), "float32"))
    y = rx.Var("fi", rx.TensorStructInfo((4,), "float32"))  # NFKC folds "\ufb01" to "fi"
    bb = rx.BlockBuilder()
    with bb.function("main", [x, y]):
        out = bb.emit(op.add(x, y))
        bb.emit_func_output(out)
    mod = bb.get()
    again = rx.from_source(mod.script())
    tir.assert_structural_equal(again, mod)
    assert again.script() == mod.script()


PRIM = ('@R.function\ndef main(x: R.Tensor(("n", "m"), "f32")):\n    n = T.int64()\n    m = T.int64()\n'
        '    s = R.prim_value({value})\n    return s\n')


@pytest.mark.parametrize("value, message", [
    ("18446744073709551615", "does not fit in int64"),  # was a ValueError from convert
])
def test_prim_value_mistakes_are_parse_errors(value, message):
    err = parse_error(PRIM.format(value=value))
    assert message in str(err) and err.lineno == 5, str(err)


@pytest.mark.parametrize("value", ["T.float32('nan')", "T.Cast('int32', n) + 1",
                                   "T.abs(n) * (T.Cast('float16', n) <= (-True))"])  # -True: AttributeError
def test_prim_values_round_trip_through_signature_strings(value):
    # The deduced return annotation is written as a string in the signature: quotes
    # inside it (T.float32("nan"), T.Cast("int32", ...)) used to end that string.
    func = rx.from_source(PRIM.format(value=value))
    printed = func.script()
    again = rx.from_source(printed)
    tir.assert_structural_equal(func, again)
    assert again.script() == printed


def test_module_attributes_with_non_finite_floats_round_trip():
    # Found by odd_relax_module_texts: R.module_attrs was read with ast.literal_eval,
    # which cannot read the float("nan") the printer writes.
    mod = rx.IRModule({"main": _exp_function({})["main"]}, {"a": [float("nan"), {"b": float("-inf")}]})
    again = rx.from_source(mod.script())
    assert again.script() == mod.script()
    assert np.isnan(again.attrs["a"][0]) and again.attrs["a"][1] == {"b": float("-inf")}
