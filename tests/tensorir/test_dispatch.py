"""Class-keyed dispatch (tensorir.dispatch): handlers only ever receive the classes they name."""
import ast

import pytest

import relaxscript as rx
import tensorir.expr as E
from relaxscript.expr_functor import ExprMutator, ExprVisitor
from tensorir.dispatch import ClassDispatch, handles
from tensorir.functor import Mutator, Visitor


class Base:
    pass


class Child(Base):
    pass


class GrandChild(Child):
    pass


class Unrelated:
    pass


class Walker(ClassDispatch):
    @handles(Base)
    def base(self, node):
        return "base"

    @handles(Child)
    def child(self, node):
        return "child"

    @handles(Unrelated, table="other")
    def unrelated(self, node):
        return "unrelated"


def test_most_specific_registered_class_wins():
    w = Walker()
    assert Walker.handler_for(Base)(w, Base()) == "base"
    assert Walker.handler_for(Child)(w, Child()) == "child"
    assert Walker.handler_for(GrandChild)(w, GrandChild()) == "child"


def test_unnamed_class_and_other_table_get_no_handler():
    assert Walker.handler_for(Unrelated) is None
    assert Walker.handler_for(Base, "other") is None
    assert Walker.handler_for(Unrelated, "other")(Walker(), Unrelated()) == "unrelated"
    assert Walker.handler_for(int, "no such table") is None


def test_subclass_override_keeps_or_replaces_the_registration():
    class KeepsClasses(Walker):
        def child(self, node):  # same name, no mark: still the Child handler
            return "overridden child"

    class Remarked(Walker):
        @handles(GrandChild)
        def child(self, node):  # marked again: handles GrandChild only
            return "grandchild"

    assert KeepsClasses.handler_for(GrandChild)(KeepsClasses(), GrandChild()) == "overridden child"
    assert Remarked.handler_for(GrandChild)(Remarked(), GrandChild()) == "grandchild"
    assert Remarked.handler_for(Child)(Remarked(), Child()) == "base"
    # The base class's table is untouched by its subclasses.
    assert Walker.handler_for(GrandChild)(Walker(), GrandChild()) == "child"


def test_name_keyed_handler_is_rejected_at_class_creation():
    with pytest.raises(TypeError, match=r"visit_For is not registered.*@handles"):
        class Forgotten(Visitor):
            def visit_For(self, node):
                pass


def test_aliases_and_static_handlers_are_rejected():
    with pytest.raises(TypeError, match="alias"):
        class Aliased(ClassDispatch):
            @handles(Base)
            def base(self, node):
                pass
            other = base
    with pytest.raises(TypeError, match="plain method"):
        class Static(ClassDispatch):
            @staticmethod
            @handles(Base)
            def base(node):
                pass


def test_handles_needs_classes():
    with pytest.raises(TypeError):
        handles()
    with pytest.raises(TypeError):
        handles("Call")


def _mixed_level_function():
    """A graph-level function whose values hold loop-level Call, Var and StringImm nodes."""
    n = E.size_var("n")
    x = rx.Var("x", rx.TensorStructInfo((n,), "float32"))
    bb = rx.BlockBuilder()
    with bb.function("main", [x]):
        e = bb.emit(rx.PrimValue(E.call_intrin("exp", E.FloatImm(1.0, "float32"))))
        s = bb.emit(rx.StringImm("exp"))
        shape = bb.emit(rx.ShapeExpr([n * 2]))
        y = bb.emit(rx.op.exp(x))
        bb.emit_func_output(rx.Tuple([y, e, s, shape]))
    return bb.get()["main"]


def test_graph_level_handlers_never_receive_loop_level_nodes():
    seen = []

    class Recorder(ExprVisitor):
        @handles(rx.Call)
        def visit_Call(self, node):
            seen.append(type(node))
            self.generic_visit(node)

        @handles(rx.StringImm)
        def visit_StringImm(self, node):
            seen.append(type(node))

    Recorder().visit(_mixed_level_function())
    assert set(seen) == {rx.Call, rx.StringImm}


def test_graph_and_symbolic_vars_reach_their_own_hooks():
    graph, symbolic = [], []

    class Vars(ExprVisitor):
        def visit_var_use(self, var):
            graph.append(var)

        def visit_symbolic_var(self, var):
            symbolic.append(var)

    Vars().visit(_mixed_level_function())
    assert graph and all(isinstance(v, rx.Var) for v in graph)
    assert symbolic and all(isinstance(v, E.Var) for v in symbolic)


def test_expr_mutator_remaps_both_kinds_of_var():
    func = _mixed_level_function()
    n = func.params[0].struct_info.shape[0]
    m = E.size_var("m")
    mutator = ExprMutator()
    mutator.var_remap[n] = m
    new = mutator.visit(func)
    assert new.params[0].struct_info.shape[0] is m


def test_loop_level_walkers_dispatch_on_loop_level_classes():
    class CountCalls(Visitor):
        def __init__(self):
            self.calls = 0

        @handles(E.Call)
        def visit_call(self, node):
            self.calls += 1
            self.generic_visit(node)

    class DoubleLiterals(Mutator):
        @handles(E.FloatImm)
        def visit_float(self, node):
            return E.FloatImm(node.value * 2, node.dtype)

    expr = E.call_intrin("exp", E.FloatImm(1.5, "float32")) + E.FloatImm(0.5, "float32")
    counter = CountCalls()
    counter.visit(expr)
    assert counter.calls == 1
    doubled = DoubleLiterals().visit(expr)
    assert doubled.a.args[0].value == 3.0 and doubled.b.value == 1.0


def test_python_ast_classes_dispatch_the_same_way():
    class Names(ClassDispatch):
        @handles(ast.Name)
        def name(self, node):
            return node.id

        @handles(ast.expr)
        def other(self, node):
            return type(node).__name__

    tree = ast.parse("f(x)", mode="eval").body
    assert Names.handler_for(type(tree.func))(Names(), tree.func) == "f"
    assert Names.handler_for(type(tree))(Names(), tree) == "Call"


def _leaf_classes(cls):
    subs = cls.__subclasses__()
    return {cls} if not subs else set().union(*(_leaf_classes(s) for s in subs))


def test_every_translator_covers_every_loop_level_expression_class():
    from backends.c.codegen import CFunctionEmitter
    from relaxscript.script.sym_expr import SymExprPrinter
    from relaxscript.vm.sym_table import _TreeBuilder
    from tensorir.arith.evaluate import _Evaluator
    from tensorir.interpreter.evaluator import ExprEvaluator
    from tensorir.script.expr_printer import ExprPrinter

    leaves = {c for c in _leaf_classes(E.PrimExpr) if c.__module__ == E.__name__}
    assert {E.Add, E.Or, E.Call, E.BufferLoad} <= leaves
    not_computable = {  # classes a translator rejects on purpose, with a clear error
        CFunctionEmitter: {E.StringImm},
        _TreeBuilder: {E.StringImm, E.BufferLoad, E.Ramp, E.Broadcast},   # shapes are scalars
        _Evaluator: {E.Ramp, E.Broadcast},   # exact scalar evaluation: "cannot evaluate a Ramp node"
    }
    for walker, table in ((ExprPrinter, "visit"), (SymExprPrinter, "visit"), (_Evaluator, "visit"),
                          (ExprEvaluator, "visit"), (CFunctionEmitter, "expr"), (_TreeBuilder, "visit")):
        missing = {c.__name__ for c in leaves - not_computable.get(walker, set())
                   if walker.handler_for(c, table) is None}
        assert not missing, f"{walker.__qualname__} has no handler for {sorted(missing)}"
