"""R.assert_op and R.print as TVM's printer writes them (``_: R.Tuple = ...`` in an
impure function): round trip, kept by every pass, run in order on the interpreter
and both VMs; a false assertion raises AssertionError with the formatted message."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from relaxscript.op.registry import OpAttributeError, OpDeductionError
from tensorir.errors import ParseError

from .tvm_compat import TARGETS, assert_round_trip, module_of

CHECKED = '''
@R.function(pure=False)
def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor((), dtype="float32"):
    n = T.int64()
    s: R.Tensor((), dtype="float32") = R.sum(x)
    ok: R.Tensor((), dtype="bool") = R.greater_equal(s, R.const(0, "float32"))
    _: R.Tuple = R.assert_op(ok, [s, R.prim_value(n)], format="sum {} of {} elements is negative")
    _1: R.Tuple = R.print(s, format="sum={}")
    return s
'''


def runners(mod):
    yield lambda *args: rx.interpret(mod, "main", *args)
    for target in TARGETS:
        yield rx.VirtualMachine(rx.build(mod, target=target))["main"]


def test_assert_and_print_run_on_every_target(capsys):
    mod = module_of(CHECKED)
    for run in runners(mod):
        assert float(run(np.ones(3, "float32"))) == 3.0
        assert capsys.readouterr().out == "sum=3.0\n"
        with pytest.raises(AssertionError, match="sum -2.0 of 2 elements is negative"):
            run(-np.ones(2, "float32"))
        assert capsys.readouterr().out == ""   # the assertion comes first


def test_side_effects_round_trip():
    text = assert_round_trip(module_of(CHECKED))
    assert 'R.assert_op(ok, s, R.prim_value(n), format="sum {} of {} elements is negative")' in text


@pytest.mark.parametrize("call, error, message", [
    ("R.assert_op(x)", OpDeductionError, "condition must be a bool scalar"),
    ("R.print(x, format='{0.real}')", OpAttributeError, "may only hold"),
])
def test_bad_side_effect_arguments_are_clear(call, error, message):
    text = f'''
@R.function(pure=False)
def main(x: R.Tensor((4,), dtype="float32")):
    _: R.Tuple = {call}
    return x
'''
    with pytest.raises((error, ParseError), match=message):
        module_of(text)
