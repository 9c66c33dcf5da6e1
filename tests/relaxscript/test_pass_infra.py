"""Pass infrastructure (transform/pass_infra.py, pass_check.py): IR printing, timing,
interpreter checking that names a wrong pass, and no pass mutating its input."""
import inspect

import pytest
from hypothesis import HealthCheck, given, settings

import relaxscript as rx
from relaxscript import transform
from relaxscript.expr_functor import PassMutator
from tensorir.dispatch import handles
from relaxscript.op import get_op
from relaxscript.transform import (CanonicalizeBindings, DeadCodeElimination, Pass, PassCheckError,
                                   PassContext, Sequential, module_pass)
from relaxscript.transform.testing import dataflow_modules

SOURCE = '''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    with R.dataflow():
        lv0 = R.nn.relu(x)
        lv1 = lv0
        dead = R.exp(lv1)
        gv = R.add(lv1, x)
        R.output(gv)
    return gv
'''


def module():
    return rx.IRModule({"main": rx.from_source(SOURCE)})


class _ReluToExp(PassMutator):
    @handles(rx.Call)
    def visit_Call(self, call):
        new = self.generic_visit(call)
        if isinstance(new.op, rx.Op) and new.op.name == "relax.nn.relu":
            return rx.Call(get_op("relax.exp"), new.args)
        return new


@module_pass(name="WrongRelu")
def wrong_relu(mod, ctx):
    return _ReluToExp(mod).transform_module(mod)


def test_print_ir_prints_each_pass(capsys):
    with PassContext(print_ir=True):
        Sequential([CanonicalizeBindings(), DeadCodeElimination()])(module())
    out = capsys.readouterr().out
    assert "# ---- after CanonicalizeBindings" in out and "# ---- after DeadCodeElimination" in out
    assert out.index("CanonicalizeBindings") < out.index("DeadCodeElimination")
    assert "dead" in out.split("after DeadCodeElimination")[0]
    assert "dead" not in out.split("after DeadCodeElimination")[1]


def test_print_ir_callable_receives_name_and_module():
    seen = []
    with PassContext(print_ir=lambda name, mod: seen.append((name, len(mod["main"].body.blocks[0].bindings)))):
        Sequential([CanonicalizeBindings(), DeadCodeElimination()])(module())
    assert seen == [("CanonicalizeBindings", 3), ("DeadCodeElimination", 2)]


def test_time_passes_reports_every_pass():
    with PassContext(time_passes=True) as ctx:
        Sequential([CanonicalizeBindings(), DeadCodeElimination()])(module())
    assert [t.name for t in ctx.timings] == ["CanonicalizeBindings", "DeadCodeElimination"]
    assert all(t.seconds >= 0 for t in ctx.timings)
    report = ctx.timing_report()
    assert "CanonicalizeBindings" in report and "DeadCodeElimination" in report and "total" in report


def test_check_with_interpreter_names_the_wrong_pass():
    passes = Sequential([CanonicalizeBindings(), wrong_relu, DeadCodeElimination()])
    with PassContext(check_with_interpreter=True):
        with pytest.raises(PassCheckError, match="WrongRelu"):
            passes(module())
        # the correct passes alone pass the check
        Sequential([CanonicalizeBindings(), DeadCodeElimination()])(module())


class _AddToSubtract(PassMutator):
    @handles(rx.Call)
    def visit_Call(self, call):
        new = self.generic_visit(call)
        if isinstance(new.op, rx.Op) and new.op.name == "relax.add":
            return rx.Call(get_op("relax.subtract"), new.args)
        return new


@module_pass(name="WrongAdd")
def wrong_add(mod, ctx):
    return _AddToSubtract(mod).transform_module(mod)


@pytest.mark.parametrize("order", [("WrongRelu", "WrongAdd"), ("WrongAdd", "WrongRelu")])
def test_check_with_interpreter_names_the_first_wrong_pass(order):
    wrong = {"WrongRelu": wrong_relu, "WrongAdd": wrong_add}
    passes = Sequential([CanonicalizeBindings(), *(wrong[name] for name in order), DeadCodeElimination()])
    with PassContext(check_with_interpreter=True):
        with pytest.raises(PassCheckError) as info:
            passes(module())
    message = str(info.value)
    assert f"pass {order[0]} changed the result of function 'main'" in message
    assert order[1] not in message
    # without the check, both wrong passes run and the result silently differs
    text = passes(module()).script()
    assert "R.subtract(" in text and "R.exp(" in text


def test_disabled_pass_is_skipped():
    mod = module()
    with PassContext(disabled=["DeadCodeElimination"]):
        assert DeadCodeElimination()(mod) is mod


def _constructible_passes() -> list:
    passes = []
    for name in dir(transform):
        cls = getattr(transform, name)
        if not (inspect.isclass(cls) and issubclass(cls, Pass)) or cls in (Pass, Sequential):
            continue
        try:
            passes.append(cls())
        except TypeError:
            continue  # needs arguments
    return passes


def test_every_exported_pass_is_checked():
    names = {type(p).__name__ for p in _constructible_passes()}
    assert {"DeadCodeElimination", "CanonicalizeBindings", "FoldConstant", "LambdaLift"} <= names


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mod=dataflow_modules(max_blocks=2, max_steps=3))
def test_no_pass_mutates_its_input(mod):
    text, digest = mod.script(), rx.structural_hash(mod)
    for p in _constructible_passes():
        try:
            p(mod)
        except Exception:  # noqa: BLE001 - a pass may reject an input; it still must not mutate it
            pass
        assert mod.script() == text and rx.structural_hash(mod) == digest, f"{p.name} mutated its input"
