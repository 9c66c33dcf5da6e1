"""Every library operator (one sample call each, from test_op_registry) inside a module:
the interpreter, checking each binding against its deduced annotation, gives what
the NumPy reference gives; and every operator with a legalization becomes
``call_tir`` of a prim_func with the same results at two bindings of the symbolic
vars, with static dims kept static in the loop program."""
import numpy as np
import pytest

import relaxscript as rx
import tensorir as tir
from relaxscript.block_builder import BlockBuilder
from relaxscript.expr import Tuple, Var
from relaxscript.op import get_op_spec
from relaxscript.struct_info import ShapeStructInfo
from relaxscript.transform.legalize.registry import get_legalize
from tensorir.functor import collect

from .op_helpers import SYMBOLS, arg_value, valid_index_arrays
from .test_legalize_util import assert_close, legalize_and_check
from .test_op_registry import sample_calls

ENVS = [dict(zip(SYMBOLS, values)) for values in ((3, 5, 2), (4, 5, 1))]
CALLS = [c for c in sample_calls() if get_op_spec(c.op.name).reference is not None]


def module_of(call):
    """``main(<tensor vars of the call>..., dims: R.Shape([n, m, k]))`` returning the call.

    The shape parameter defines the symbolic vars that no tensor parameter carries
    (``R.zeros((n, 3))``)."""
    params = []
    for arg in call.args:
        params += [v for v in collect(arg, lambda node: isinstance(node, Var)) if v not in params]
    dims = Var("dims", ShapeStructInfo(list(SYMBOLS)))
    bb = BlockBuilder()
    with bb.function("main", params + [dims]):
        with bb.dataflow():
            out = bb.emit_output(bb.emit(call))
        bb.emit_func_output(out)
    return bb.get(), params


def inputs_for(params, env, seed):
    rng = np.random.default_rng(seed)
    overrides = valid_index_arrays(env, rng)
    values = [arg_value(p, env, rng, overrides) for p in params]
    return values + [tuple(env[v] for v in SYMBOLS)]


def reference_result(call, params, values, env):
    """The reference on the same tensors (non-tensor arguments evaluated at ``env``)."""
    by_var = dict(zip(params, values))
    rng = np.random.default_rng(0)

    def value(arg):
        if isinstance(arg, Tuple):
            return tuple(value(field) for field in arg.fields)
        return by_var[arg] if arg in by_var else arg_value(arg, env, rng, {})
    args = [value(a) for a in call.args]
    with np.errstate(all="ignore"):
        return get_op_spec(call.op.name).reference(*args, **call.attrs)


@pytest.mark.parametrize("call", CALLS, ids=lambda c: c.op.name)
def test_interpreter_runs_every_operator_like_its_reference(call):
    mod, params = module_of(call)
    for seed, env in enumerate(ENVS):
        values = inputs_for(params, env, seed)
        with np.errstate(all="ignore"):
            result = rx.interpret(mod, "main", *values, check_bindings=True)
        assert_close(reference_result(call, params, values, env), result)


def _static_dims_stay_static(call_sinfo, prim_func) -> bool:
    """The output buffer's dims are constants exactly where the call's annotation has constants."""
    out_buffer = prim_func.buffer_params[-1]
    return all(isinstance(ours, tir.IntImm) == isinstance(theirs, tir.IntImm)
               for ours, theirs in zip(out_buffer.shape, call_sinfo.shape))


@pytest.mark.parametrize("call", [c for c in CALLS if get_legalize(c.op.name) is not None],
                         ids=lambda c: c.op.name)
def test_every_legalizable_operator_becomes_call_tir(call):
    mod, params = module_of(call)
    with np.errstate(all="ignore"):
        legalized = legalize_and_check(mod, [inputs_for(params, env, seed) for seed, env in enumerate(ENVS)])
    out_sinfo = legalized["main"].body.body.struct_info
    kernels = list(legalized.prim_funcs.values())
    assert kernels
    if hasattr(out_sinfo, "shape") and out_sinfo.shape is not None and len(kernels) == 1:
        assert _static_dims_stay_static(out_sinfo, kernels[0]), kernels[0].script()
