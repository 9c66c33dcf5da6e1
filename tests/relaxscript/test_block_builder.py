"""BlockBuilder: emission, dataflow scoping, A-normal form, modules; PassMutator."""
import pytest

import tensorir as tir
from tensorir.errors import IRError
from tensorir.structural import structural_equal
from relaxscript import op
from relaxscript.analysis import check_well_formed
from relaxscript.block_builder import BlockBuilder
from relaxscript.expr import BindingBlock, Call, DataflowBlock, DataflowVar, Var
from relaxscript.expr_functor import ExprMutator, ExprVisitor, PassMutator
from tensorir.dispatch import handles
from relaxscript.struct_info import TensorStructInfo


def T(shape=None, dtype="float32", ndim=-1):
    return TensorStructInfo(shape, dtype, ndim)


def _mlp_module():
    bb = BlockBuilder()
    n = tir.size_var("n")
    x = Var("x", T((n, 4)))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(op.exp(x))
            lv1 = bb.emit(op.flatten(lv0))
            gv = bb.emit_output(lv1)
        out = bb.emit(op.nn.relu(gv))
        bb.emit_func_output(out)
    return bb.get(), (lv0, lv1, gv, out)


def test_dataflow_blocks_get_dataflow_vars_and_outputs_escape():
    mod, (lv0, lv1, gv, out) = _mlp_module()
    assert type(lv0) is DataflowVar and type(lv1) is DataflowVar
    assert type(gv) is Var and type(out) is Var
    blocks = mod["main"].body.blocks
    assert [type(b) for b in blocks] == [DataflowBlock, BindingBlock]
    assert blocks[0].bindings[-1].var is gv
    assert mod["main"].body.body is out
    check_well_formed(mod)


def test_builder_misuse_is_reported():
    bb = BlockBuilder()
    x = Var("x", T((3,)))
    with pytest.raises(IRError, match="emit_output"):
        with bb.function("f", [x]):
            bb.emit_output(x)
    with pytest.raises(IRError, match="inside a dataflow block"):
        with bb.function("g", [x]):
            with bb.dataflow():
                bb.emit_func_output(x)
    with pytest.raises(IRError, match="without bb.emit_func_output"):
        with bb.function("h", [x]):
            bb.emit(op.exp(x))
    with pytest.raises(IRError, match="annotation"):
        with bb.function("k", [Var("bare")]):
            pass
    with pytest.raises(IRError, match="needs an open block"):
        BlockBuilder().emit(op.exp(x))


def test_nested_calls_are_bound_first():
    bb = BlockBuilder()
    x = Var("x", T((3,)))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv = bb.emit(op.add(op.exp(x), op.negative(x)))
            gv = bb.emit_output(lv)
        bb.emit_func_output(gv)
    bindings = bb.get()["main"].body.blocks[0].bindings
    assert len(bindings) == 4
    assert all(isinstance(a, Var) for a in bindings[2].value.args)
    assert [b.value.op.name for b in bindings[:3]] == ["relax.exp", "relax.negative", "relax.add"]


def test_emit_func_output_of_a_call_binds_it():
    bb = BlockBuilder()
    x = Var("x", T((3,)))
    with bb.function("main", [x]):
        bb.emit_func_output(op.exp(x))
    func = bb.get()["main"]
    assert isinstance(func.body.body, Var)
    check_well_formed(bb.get())


def test_add_func_reuses_identical_functions_and_renames_clashes():
    mod, _ = _mlp_module()
    bb = BlockBuilder(mod)
    same = bb.add_func(mod["main"], "other")
    assert same.name_hint == "main"
    y = Var("y", T((2,)))
    with bb.function("main", [y]):
        bb.emit_func_output(y)
    assert sorted(bb.get().functions) == ["main", "main_1"]


class _ExpToNegative(PassMutator):
    @handles(Call)
    def visit_Call(self, call):
        call = self.generic_visit(call)
        if getattr(call.op, "name", None) == "relax.exp":
            return op.negative(call.args[0])
        return call


class _FlattenToIdentity(PassMutator):
    @handles(Call)
    def visit_Call(self, call):
        call = self.generic_visit(call)
        if getattr(call.op, "name", None) == "relax.flatten":
            return call.args[0]
        return call


def test_pass_mutator_keeps_vars_whose_annotation_is_unchanged():
    mod, (lv0, *_rest) = _mlp_module()
    new = _ExpToNegative().transform_module(mod)
    bindings = new["main"].body.blocks[0].bindings
    assert bindings[0].var is lv0 and bindings[0].value.op.name == "relax.negative"
    assert mod["main"].body.blocks[0].bindings[0].value.op.name == "relax.exp"  # input untouched
    check_well_formed(new)


def test_pass_mutator_rededuces_downstream_annotations():
    bb = BlockBuilder()
    n = tir.size_var("n")
    x = Var("x", T((n, 4)))
    with bb.function("main", [x]):
        with bb.dataflow():
            lv0 = bb.emit(op.flatten(x))
            lv1 = bb.emit(op.nn.relu(lv0))
            gv = bb.emit_output(op.reshape(lv1, (n, 4)))
        bb.emit_func_output(gv)
    mod = bb.get()
    new = _FlattenToIdentity().transform_module(mod)
    bindings = new["main"].body.blocks[0].bindings
    alias, relu, out = bindings
    assert alias.value is x and alias.var is not lv0  # flatten(x) became x: new annotation, new var
    assert relu.value.op.name == "relax.nn.relu" and relu.value.args[0] is alias.var
    assert relu.var is not lv1
    assert structural_equal(relu.var.struct_info, T((n, 4)), map_free_vars=False)
    assert out.var is gv and out.value.args[0] is relu.var  # reshape still gives (n, 4)
    assert structural_equal(new["main"].struct_info, mod["main"].struct_info, map_free_vars=False)
    check_well_formed(new)


def test_expr_mutator_substitutes_symbolic_vars_everywhere():
    mod, _ = _mlp_module()
    func = mod["main"]
    n = func.params[0].struct_info.shape[0]
    mutator = ExprMutator()
    mutator.var_remap[n] = tir.IntImm(8)
    new = mutator.visit(func)
    assert structural_equal(new.params[0].struct_info, T((8, 4)))
    assert structural_equal(new.body.body.struct_info, T((8 * 4,)))
    assert structural_equal(new.struct_info.ret, T((8 * 4,)))
    check_well_formed(new)


def test_expr_visitor_sees_definitions_before_uses():
    mod, _ = _mlp_module()
    events = []

    class Recorder(ExprVisitor):
        def visit_var_def(self, var):
            events.append(("def", var.name_hint))

        def visit_var_use(self, var):
            events.append(("use", var.name_hint))

    Recorder().visit(mod["main"])
    assert events[0] == ("def", "x")
    for i, (kind, name) in enumerate(events):
        if kind == "use":
            assert ("def", name) in events[:i]
