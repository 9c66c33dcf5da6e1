"""Every annotation form: parsing from text, printing, and the Python-level R objects."""
import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from relaxscript import R
from relaxscript.script.namespace import ScriptAnnotation
from relaxscript.script.printer import format_struct_info
from relaxscript.struct_info import (FuncStructInfo, ObjectStructInfo, PrimStructInfo,
                                     ShapeStructInfo, TensorStructInfo, TupleStructInfo)


def param_sinfo(annotation: str, decls: str = ""):
    """The struct info of parameter ``x`` annotated ``annotation``."""
    text = f"@R.function\ndef f(x: {annotation}):\n{decls}    return x\n"
    return rx.from_source(text).params[0].struct_info


def n_var(name="n"):
    return tir.size_var(name)


@pytest.mark.parametrize("annotation, expected", [
    ('R.Tensor((2, 3), "float32")', TensorStructInfo((2, 3), "float32")),
    ('R.Tensor((2, 3), dtype="f16")', TensorStructInfo((2, 3), "float16")),
    ('R.Tensor(ndim=2, dtype="f32")', TensorStructInfo(None, "float32", 2)),
    ('R.Tensor(ndim=None, dtype="f32")', TensorStructInfo(None, "float32")),
    ('R.Tensor(dtype="int32")', TensorStructInfo(None, "int32")),
    ('R.Tensor("bool")', TensorStructInfo(None, "bool")),
    ("R.Tensor()", TensorStructInfo()),
    ("R.Tensor", TensorStructInfo()),
    ("R.Tensor(ndim=3)", TensorStructInfo(None, None, 3)),
    ("R.Shape([2, 4])", ShapeStructInfo((2, 4))),
    ("R.Shape(ndim=2)", ShapeStructInfo(None, 2)),
    ("R.Shape", ShapeStructInfo()),
    ("R.Object", ObjectStructInfo()),
    ("R.Object()", ObjectStructInfo()),
    ('R.Prim("int64")', PrimStructInfo("int64")),
    ('R.Prim(dtype="bool")', PrimStructInfo("bool")),
    ('R.Tuple(R.Tensor((2,), "f32"), R.Object)',
     TupleStructInfo([TensorStructInfo((2,), "float32"), ObjectStructInfo()])),
    ('R.Tuple[R.Tensor((2,), "f32"), R.Object]',
     TupleStructInfo([TensorStructInfo((2,), "float32"), ObjectStructInfo()])),
    ("R.Tuple()", TupleStructInfo([])),
    ('R.Callable([R.Tensor((2,), "f32")], R.Shape(ndim=1))',
     FuncStructInfo([TensorStructInfo((2,), "float32")], ShapeStructInfo(None, 1))),
    ("R.Callable([], R.Object, purity=False)", FuncStructInfo([], ObjectStructInfo(), purity=False)),
    ("R.Callable(None, R.Object)", FuncStructInfo(None, ObjectStructInfo())),
])
def test_static_annotation_forms(annotation, expected):
    rx.assert_structural_equal(param_sinfo(annotation), expected)


def test_symbolic_dims_declare_and_refer():
    n = n_var()
    got = param_sinfo('R.Tuple(R.Tensor(("n", 4), "f32"), R.Shape(["n * 2"]), R.Prim(value="n + 1"))')
    expected = TupleStructInfo([TensorStructInfo((n, 4), "float32"), ShapeStructInfo([n * 2]),
                                PrimStructInfo("int64", n + 1)])
    rx.assert_structural_equal(got, expected)


def test_declared_facts_reach_signature_vars():
    sinfo = param_sinfo('R.Tensor(("n", 4), "f32")', "    n = T.int64(upper=4096, multiple_of=8)\n")
    n = sinfo.shape[0]
    assert (n.lower, n.upper, n.multiple_of) == (0, 4096, 8)


def test_callable_names_are_local_to_the_signature():
    sinfo = param_sinfo('R.Callable([R.Shape(["a", "b"])], R.Tensor(("a * b",), "f32"))')
    a, b = sinfo.params[0].values
    assert isinstance(a, tir.Var) and isinstance(b, tir.Var)
    assert sinfo.ret.shape[0].a is a and sinfo.ret.shape[0].b is b


@pytest.mark.parametrize("sinfo, body_text, signature_text", [
    (TensorStructInfo((n_var(), 4), "float32"), 'R.Tensor((n, 4), dtype="float32")',
     'R.Tensor(("n", 4), dtype="float32")'),
    (TensorStructInfo(None, "float32", 2), 'R.Tensor(ndim=2, dtype="float32")', None),
    (TensorStructInfo(), "R.Tensor", None),
    (ShapeStructInfo([n_var() * 4]), "R.Shape([n * 4])", 'R.Shape(["n * 4"])'),
    (ShapeStructInfo(None, 3), "R.Shape(ndim=3)", None),
    (PrimStructInfo("bool"), 'R.Prim("bool")', None),
    (PrimStructInfo("int64", n_var() + 1), 'R.Prim("int64", value=n + 1)', 'R.Prim("int64", value="n + 1")'),
    (ObjectStructInfo(), "R.Object", None),
    (FuncStructInfo([ObjectStructInfo()], ShapeStructInfo(None, 1), purity=False),
     "R.Callable([R.Object], R.Shape(ndim=1), purity=False)", None),
])
def test_printing(sinfo, body_text, signature_text):
    assert format_struct_info(sinfo) == body_text
    assert format_struct_info(sinfo, signature=True) == (signature_text or body_text)


def test_printed_annotations_parse_back_exactly():
    n = n_var()
    cases = [TensorStructInfo(((n + 1) * 4, n // 2, n % 3), "int8"),
             TupleStructInfo([ShapeStructInfo([tir.Max(n, 2)]), PrimStructInfo("float32")]),
             TensorStructInfo((4 - n,), "bool")]
    for sinfo in cases:
        text = format_struct_info(sinfo, signature=True)
        rx.assert_structural_equal(param_sinfo(text, "    n = T.int64()\n"), sinfo)


# ---------------------------------------------------------------- Python-level R objects
def test_python_annotations_build_struct_info():
    n = R.sym_var(upper=64)
    assert isinstance(n, tir.Var) and n.upper == 64 and n.lower == 0
    rx.assert_structural_equal(R.Tensor((n, 4), "f32"), TensorStructInfo((n, 4), "float32"))
    rx.assert_structural_equal(R.Tensor(ndim=2, dtype="f32"), TensorStructInfo(None, "float32", 2))
    rx.assert_structural_equal(R.Shape([n, 4]), ShapeStructInfo([n, 4]))
    rx.assert_structural_equal(R.Tuple(R.Object(), R.Prim("int64")),
                               TupleStructInfo([ObjectStructInfo(), PrimStructInfo("int64")]))
    rx.assert_structural_equal(R.Callable([R.Shape(ndim=1)], R.Object()),
                               FuncStructInfo([ShapeStructInfo(None, 1)], ObjectStructInfo()))


def test_string_dims_are_inert_records_in_python():
    record = R.Tensor(("n", 4), "float32")
    assert isinstance(record, ScriptAnnotation)
    assert "n" in repr(record)


def test_python_values():
    c = R.const([[1, 2]], "int32")
    assert c.data.dtype == np.int32 and c.data.shape == (1, 2)
    assert R.const(1.5).data.dtype == np.float32
    assert R.shape([2, 3]).values[1].value == 3
    assert R.prim_value(4).value.value == 4
    assert R.str("hi").value == "hi"


def test_namespace_forwards_every_registered_operator():
    from relaxscript.op import all_op_specs
    for spec in all_op_specs():
        target = R
        for part in spec.path.split("."):
            target = getattr(target, part)
        assert callable(target), spec.path
    call = R.nn.softmax(rx.Var("x", TensorStructInfo((2, 3), "float32")), axis=-1)
    assert call.op.name == "relax.nn.softmax"


def test_statement_forms_fail_clearly_outside_scripts():
    with pytest.raises(RuntimeError, match="R.dataflow"):
        R.dataflow()
    with pytest.raises(AttributeError, match="no attribute 'frobnicate'"):
        R.frobnicate  # noqa: B018
