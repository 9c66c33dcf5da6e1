"""Issue 15, items 2 and 8: modules in TVM's printed form (``I`` namespace,
``cls = Module``, ``T.handle`` prim_funcs) parse, round-trip, interpret equal
to NumPy and build with the C target; the IRModule API TVM code calls."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript import I, R  # noqa: F401  (the names a decorated TVMScript class uses)
from relaxscript.script.ir_namespace import VDevice
from tensorir import ParseError, T  # noqa: F401

from .tvmscript_modules import ADD_ONE_MODULE, MODULES

by_name = pytest.mark.parametrize("entry", MODULES, ids=[m[0] for m in MODULES])


@functools.lru_cache(maxsize=None)
def parsed(name):
    return rx.from_source(next(m[1] for m in MODULES if m[0] == name))


@functools.lru_cache(maxsize=None)
def built(name):
    return rx.VirtualMachine(rx.build(parsed(name), target="c"))


@by_name
def test_round_trip(entry):
    mod = parsed(entry[0])
    text = mod.script()
    again = rx.from_source(text)
    rx.assert_structural_equal(mod, again)
    assert again.script() == text


@by_name
@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 9))
def test_interpreter_and_c_build_match_numpy(entry, n):
    name, _source, func, inputs, reference = entry
    args = inputs(np.random.default_rng(n), n)
    expected = reference(*args)
    np.testing.assert_allclose(rx.interpret(parsed(name), func, *args), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(built(name)[func](*args), expected, rtol=1e-5, atol=1e-5)


def test_module_level_forms_are_kept():
    mod = parsed("add_one_module")
    assert mod.attrs["system_lib_prefix"] == "demo_"
    assert mod.global_infos == {"vdevice": (VDevice({"keys": ["cpu"], "kind": "llvm"}, 0, "global"),)}
    text = mod.script()
    assert 'I.module_global_infos({"vdevice": [I.vdevice({"keys": ["cpu"], "kind": "llvm"}, 0, "global")]})' in text
    # cls.helper resolved to the module's function; the printer binds cls as TVM's does
    assert "cls.helper(x)" in text
    main_text = text[text.index("def main"):]
    assert main_text.index("cls = Module") < main_text.index("cls.helper(x)")


def test_decorated_class_with_the_i_namespace():
    @I.ir_module
    class Module:
        I.module_attrs({"version": 1})

        @T.prim_func
        def double(a: T.handle, b: T.handle) -> None:
            n = T.int64()
            A = T.match_buffer(a, (n,))
            B = T.match_buffer(b, (n,))
            for i in T.grid(*A.shape):
                with T.block("B"):
                    vi = T.axis.spatial(n, i)
                    B[vi] = A[vi] * T.float32(2)

        @R.function
        def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
            n = T.int64()
            cls = Module
            y = R.call_tir(cls.double, (x,), out_sinfo=R.Tensor((n,), dtype="float32"))
            return y

    assert isinstance(Module, rx.IRModule) and Module.attrs == {"version": 1}
    x = np.arange(4, dtype="float32")
    np.testing.assert_allclose(rx.interpret(Module, "main", x), 2 * x)
    np.testing.assert_allclose(rx.VirtualMachine(rx.build(Module, target="c"))["main"](x), 2 * x)


@pytest.mark.parametrize("source,message", [
    (ADD_ONE_MODULE.replace("cls = Module\n        y = R.call_tir", "cls = Other\n        y = R.call_tir"),
     "`cls = ...` names the module class"),
    (ADD_ONE_MODULE.replace('I.module_global_infos({"vdevice": [', 'I.module_global_infos({"vdevice": 3, "x": [')
     .replace('"global")]})', '"global")]})', 1), "is a list"),
    (ADD_ONE_MODULE.replace('I.vdevice({"keys": ["cpu"], "kind": "llvm"}, 0, "global")',
                            'I.vdevice({"keys": ["cpu"]}, "zero", "global")'), "vdevice_id must be an int"),
    (ADD_ONE_MODULE.replace('I.module_attrs({"system_lib_prefix": "demo_"})',
                            'I.module_attrs({"global_infos": 1})'), "I.module_global_infos"),
])
def test_module_form_mistakes(source, message):
    with pytest.raises(ParseError, match=message):
        rx.from_source(source)


def test_irmodule_api_tvm_code_calls():
    mod = parsed("matmul_bias_module")
    gvs = mod.get_global_vars()
    assert [gv.name_hint for gv in gvs] == ["matmul", "bias_relu", "main"]
    gv = mod.get_global_var("main")
    assert mod[gv] is mod["main"]
    renamed = mod["matmul"].with_attr("note", "scheduled")
    updated = mod.update_func(mod.get_global_var("matmul"), renamed)
    assert updated["matmul"].attrs["note"] == "scheduled" and "note" not in mod["matmul"].attrs
    with pytest.raises(KeyError, match="no function 'absent' to update"):
        mod.update_func("absent", renamed)
    with pytest.raises(TypeError, match="Function or PrimFunc"):
        mod.update_func("matmul", 3)


def test_op_pattern_reads_tvm_integers_and_readable_names():
    from relaxscript.transform import OpPattern
    from relaxscript.transform.annotate_op_pattern import pattern_of
    from tensorir.analysis import PatternKind
    func = parsed("matmul_bias_module")["bias_relu"]
    assert pattern_of(func) == PatternKind.ElementWise  # computed from the loops
    assert pattern_of(func.with_attr("op_pattern", OpPattern.OPAQUE)) == PatternKind.Opaque
    assert pattern_of(func.with_attr("op_pattern", 4)) == PatternKind.OutputWiseFusible
    assert pattern_of(func.with_attr("op_pattern", OpPattern.TUPLE)) == PatternKind.Opaque
    assert pattern_of(func.with_attr("op_pattern", "Injective")) == PatternKind.Injective
    assert (OpPattern.ELEMWISE, OpPattern.BROADCAST, OpPattern.INJECTIVE, OpPattern.COMM_REDUCE) == (0, 1, 2, 3)
    with pytest.raises(ValueError, match="op_pattern 5 is not a pattern kind"):
        pattern_of(func.with_attr("op_pattern", 5))
