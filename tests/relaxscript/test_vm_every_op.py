"""Every operator module of test_every_op_module also runs through ``rx.build`` on
both targets with the interpreter's results, at two bindings of the symbolic vars.

All operators go into ONE module (one function per operator, no ``main``) so a
target is built once: one pipeline run and one C library for the whole set."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from tests.targets import VM_TARGETS

from .test_every_op_module import CALLS, ENVS, inputs_for, module_of
from .test_legalize_util import assert_close

NAMES = [f"op{i}_{call.op.name.replace('relax.', '').replace('.', '_')}" for i, call in enumerate(CALLS)]


@pytest.fixture(scope="module")
def every_op():
    functions, params = {}, {}
    for name, call in zip(NAMES, CALLS):
        mod, params[name] = module_of(call)
        functions[name] = mod["main"]
    return rx.IRModule(functions), params


@pytest.fixture(scope="module", params=VM_TARGETS)
def every_op_vm(request, every_op):
    mod, _ = every_op
    return rx.VirtualMachine(rx.build(mod, target=request.param))


@pytest.mark.parametrize("name", NAMES)
def test_every_operator_builds_and_matches_the_interpreter(name, every_op, every_op_vm):
    mod, params = every_op
    for seed, env in enumerate(ENVS):
        values = inputs_for(params[name], env, seed)
        with np.errstate(all="ignore"):
            expected = rx.interpret(mod, name, *values)
            got = every_op_vm[name](*values)
        assert_close(expected, got)
