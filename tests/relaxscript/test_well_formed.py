"""Well-formedness checker: one test per class of problem."""
import pytest

import tensorir as tir
from tensorir.errors import IRError
from relaxscript import op
from relaxscript.analysis import check_well_formed, well_formed
from relaxscript.block_builder import BlockBuilder
from relaxscript.expr import (BindingBlock, Call, DataflowBlock, DataflowVar, ExternFunc, Function,
                              GlobalVar, MatchCast, SeqExpr, ShapeExpr, Var, VarBinding)
from relaxscript.irmodule import IRModule
from relaxscript.struct_info import FuncStructInfo, ShapeStructInfo, TensorStructInfo


def T(shape=None, dtype="float32", ndim=-1):
    return TensorStructInfo(shape, dtype, ndim)


def func(params, blocks, body, ret=None):
    """A normalized function built from hand-written (possibly ill-formed) bindings."""
    f = Function(params, SeqExpr(blocks, body), ret)
    f.body.struct_info = body.struct_info
    f.struct_info = FuncStructInfo([p.struct_info for p in params], body.struct_info)
    return f


def annotated(call, sinfo):
    call.struct_info = sinfo
    return call


def problems(f_or_mod, **kwargs):
    with pytest.raises(IRError) as info:
        check_well_formed(f_or_mod, **kwargs)
    assert not well_formed(f_or_mod, **kwargs)
    return str(info.value)


n, m = tir.size_var("n"), tir.size_var("m")
x = Var("x", T((n,)))


def test_builder_output_is_well_formed():
    bb = BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(op.exp(x))
            gv = bb.emit_output(lv)
        cast = bb.match_cast(bb.emit(op.unique(gv)), T((m,)))
        bb.emit_func_output(bb.emit(op.exp(cast)))
    assert well_formed(bb.get())


def test_undefined_variable():
    ghost = Var("ghost", T((n,)))
    y = Var("y", T((n,)))
    f = func([x], [BindingBlock([VarBinding(y, annotated(op.exp(ghost), T((n,))))])], y)
    assert "variable 'ghost' is used but not defined" in problems(f)


def test_dataflow_var_used_outside_its_block():
    lv = DataflowVar("lv", T((n,)))
    y = Var("y", T((n,)))
    f = func([x], [DataflowBlock([VarBinding(lv, annotated(op.exp(x), T((n,))))]),
                   BindingBlock([VarBinding(y, annotated(op.exp(lv), T((n,))))])], y)
    assert "dataflow var 'lv' is used outside its dataflow block" in problems(f)


def test_dataflow_var_bound_outside_a_dataflow_block():
    lv = DataflowVar("lv", T((n,)))
    f = func([x], [BindingBlock([VarBinding(lv, annotated(op.exp(x), T((n,))))])], x)
    assert "DataflowVar 'lv' is bound outside a dataflow block" in problems(f)


def test_impure_calls_in_dataflow_blocks():
    lv = DataflowVar("lv", T((n,)))
    extern = ExternFunc("print")
    extern.struct_info = FuncStructInfo(None, T((n,)), purity=False)
    f = func([x], [DataflowBlock([VarBinding(lv, annotated(Call(extern, [x]), T((n,))))])], x)
    assert "impure call of 'print' inside a dataflow block" in problems(f)
    impure = GlobalVar("log", FuncStructInfo([T((n,))], T((n,)), purity=False))
    lv2 = DataflowVar("lv2", T((n,)))
    g = func([x], [DataflowBlock([VarBinding(lv2, annotated(Call(impure, [x]), T((n,))))])], x)
    mod = IRModule({"main": g, "log": func([Var("a", T((n,)))], [], x)})
    assert "impure call of 'log'" in problems(mod)


def test_undefined_symbolic_var_and_use_before_match_cast():
    y = Var("y", T((m,)))
    f = func([x], [BindingBlock([VarBinding(y, annotated(op.exp(x), T((m,))))])], x)
    assert "symbolic var 'm' in the annotation of 'y' is not defined" in problems(f)
    z = Var("z", T((m,)))
    early = Var("early", ShapeStructInfo([m]))
    g = func([x], [BindingBlock([VarBinding(early, annotated(ShapeExpr([m]), ShapeStructInfo([m]))),
                                 MatchCast(z, x, T((m,)))])], z)
    assert "used before the match_cast that defines it" in problems(g)


def test_return_annotation_must_use_parameter_vars():
    f = func([x], [], x, ret=T((m,)))
    assert "return annotation uses symbolic var 'm'" in problems(f)


def test_variable_bound_twice():
    y = Var("y", T((n,)))
    f = func([x], [BindingBlock([VarBinding(y, annotated(op.exp(x), T((n,)))),
                                 VarBinding(y, annotated(op.exp(x), T((n,))))])], y)
    assert "variable 'y' is bound more than once" in problems(f)


def test_missing_struct_info():
    y = Var("y")
    f = func([x], [BindingBlock([VarBinding(y, op.exp(x))])], x)
    text = problems(f)
    assert "variable 'y' has no annotation" in text and "Call" in text
    assert well_formed(f, check_struct_info=False)


def test_global_var_naming_no_function():
    missing = GlobalVar("nowhere", FuncStructInfo([T((n,))], T((n,))))
    y = Var("y", T((n,)))
    f = func([x], [BindingBlock([VarBinding(y, annotated(Call(missing, [x]), T((n,))))])], y)
    assert "GlobalVar 'nowhere' names no function in the module" in problems(IRModule({"main": f}))


def test_all_problems_are_listed():
    ghost, y = Var("ghost", T((n,))), Var("y", T((m,)))
    f = func([x], [BindingBlock([VarBinding(y, annotated(op.exp(ghost), T((m,))))])], y)
    text = problems(f)
    assert "ghost" in text and "'m'" in text


def test_problems_carry_the_span_of_their_binding():
    from relaxscript.analysis.well_formed import located_problems
    y = Var("y", T((n,)))
    binding = VarBinding(y, annotated(Call(ExternFunc("print"), [x]), T((n,))))
    binding.span = ("model.py", 7, 4, "    y = print(x)")
    f = func([x], [DataflowBlock([binding])], y)
    located = located_problems(f)
    assert ("impure call of 'print' inside a dataflow block", binding.span) in located
    hand_built = func([x], [BindingBlock([VarBinding(Var("z", T((m,))), x)])], x)
    assert located_problems(hand_built)[0][1] is None  # no parser: no location
