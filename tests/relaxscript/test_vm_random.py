"""Random modules through ``rx.build`` on every target give the reference
interpreter's results for several bindings of the symbolic vars: the pass-test
generator's operator programs (whole default pipeline) and random call_tir
programs with and without an upper bound (static memory plans)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tests.hang_guard import hang_guard
from tests.targets import AVAILABLE_VM_TARGETS
from relaxscript.transform.pass_check import _same, random_inputs
from relaxscript.transform.testing import dataflow_modules
from backends.gpu import GPULoweringError
from tensorir.errors import IndexOutOfRangeError, ShapeMismatchError

from .test_memory_random import STEP
from .test_memory_random import build as call_tir_program

TARGETS = AVAILABLE_VM_TARGETS
QUICK = settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
THOROUGH = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
# one target's run of one sample; far above any real run: past it a kernel is taken not to end
# (s14: an OpenCL run of a SHAPE_STEPS program that spun for 30 min), and the process stops with
# the program and its inputs on stderr (tests/hang_guard.py)
RUN_LIMIT_S = 300


def _shapes(args) -> list:
    return [getattr(a, "shape", a) for a in args]


def built_vms(mod) -> dict:
    """A VM per target. A program the GPU lowering refuses (a GPULoweringError at build time: a
    clear error, never a wrong result; e.g. a tiled matmul's shared tile whose size the bound
    analysis cannot prove constant) is left out on OpenCL only, and counted as a hypothesis event."""
    vms = {}
    for target in TARGETS:
        try:
            vms[target] = rx.VirtualMachine(rx.build(mod, target=target))
        except GPULoweringError as err:
            if target != "opencl":
                raise
            event(f"opencl: the GPU lowering refused the program ({str(err).split(':')[0]})")
    return vms


def _guarded_run(mod, vm, args, where: str):
    """``vm["main"](*args)``; past RUN_LIMIT_S the process stops with ``where`` and the program."""
    with hang_guard(RUN_LIMIT_S, lambda: f"{where}, inputs {_shapes(args)}, program:\n{mod.script()}"):
        return vm["main"](*args)


def check_builds_match_interpreter(mod, seed: int, samples: int = 3) -> None:
    vms = built_vms(mod)
    # the interpreter runs dead bindings, which builds drop: an index out of range in one is no error
    live = rx.transform.DeadCodeElimination()(mod)
    rng = np.random.default_rng(seed)
    for sample in range(samples):
        # the first sample makes about half the symbolic vars 0 (empty tensors and reductions), the
        # second about half of them 1 (size-1 dims that broadcast, squeeze, reshape)
        args = random_inputs(mod["main"], rng, zero_chance=0.5 if sample == 0 else 0.0,
                             one_chance=0.5 if sample == 1 else 0.0)
        try:
            expected = rx.interpret(live, "main", *args)
        except IndexOutOfRangeError:
            # a data-dependent index outside its axis: an error on every target too, naming the
            # kernel and the value (which bad index is met first may differ between targets)
            event("an index out of range")
            for target, vm in vms.items():
                with pytest.raises(IndexOutOfRangeError, match=r"kernel '.*': index -?\d+ is out of range "
                                                               r"for an axis of size \d+"):
                    _guarded_run(mod, vm, args, f"target {target!r}, seed {seed}, sample {sample}")
            continue
        except ShapeMismatchError as err:   # (IndexOutOfRangeError is one too: above)
            # an argmax / argmin of an empty axis: an error on every target too
            event("a shape error")
            for target, vm in vms.items():
                with pytest.raises(ShapeMismatchError, match="arg(max|min)"):
                    _guarded_run(mod, vm, args, f"target {target!r}, seed {seed}, sample {sample}")
            assert "arg" in str(err)
            continue
        for target, vm in vms.items():
            try:
                got = _guarded_run(mod, vm, args, f"target {target!r}, seed {seed}, sample {sample}")
            except ShapeMismatchError as err:
                # a dead binding's check a build keeps: an argmax / argmin of an empty axis (its
                # check stays where the build drops the op), or an index out of range in a dead op
                # fused into a kernel with live results (dead code goes after fusion). The program
                # as written raises the same kind of error.
                with pytest.raises(type(err)):
                    rx.interpret(mod, "main", *args)
                event("a dead binding's check")
                continue
            assert _same(expected, got, 1e-4, 1e-5), \
                f"target {target!r} differs from the interpreter for inputs {_shapes(args)}"


@QUICK
@given(mod=dataflow_modules(), seed=st.integers(0, 2**16))
def test_random_operator_programs_build_and_match(mod, seed):
    check_builds_match_interpreter(mod, seed)


@pytest.mark.slow
@THOROUGH
@given(mod=dataflow_modules(max_blocks=4, max_steps=6), seed=st.integers(0, 2**16))
def test_random_operator_programs_build_and_match_thoroughly(mod, seed):
    check_builds_match_interpreter(mod, seed, samples=4)


# logic (comparisons, and / or / xor / not, where) and integer detours (int32 / int64 division
# and modulo of negative values) mixed with a few float steps, so they fuse with them
BRANCHING_STEPS = ("logic", "integer", "unary", "binary", "broadcast")


@QUICK
@given(mod=dataflow_modules(max_blocks=2, max_steps=3, kinds=BRANCHING_STEPS), seed=st.integers(0, 2**16))
def test_random_logic_and_integer_programs_build_and_match(mod, seed):
    check_builds_match_interpreter(mod, seed)


@pytest.mark.fuzz
@THOROUGH
@given(mod=dataflow_modules(max_blocks=4, max_steps=6, kinds=BRANCHING_STEPS), seed=st.integers(0, 2**16))
def test_random_logic_and_integer_programs_build_and_match_thoroughly(mod, seed):
    check_builds_match_interpreter(mod, seed, samples=4)


# take / gather_nd / scatter_nd / scatter_elements with indices computed from the data: in
# range for some inputs, out of range (an error on every target) for others
INDEX_STEPS = ("gather", "unary", "binary", "broadcast", "permute")


@QUICK
@given(mod=dataflow_modules(max_blocks=2, max_steps=3, kinds=INDEX_STEPS), seed=st.integers(0, 2**16))
def test_random_gather_scatter_programs_build_and_match(mod, seed):
    check_builds_match_interpreter(mod, seed)


@pytest.mark.fuzz
@THOROUGH
@given(mod=dataflow_modules(max_blocks=4, max_steps=6, kinds=INDEX_STEPS), seed=st.integers(0, 2**16))
def test_random_gather_scatter_programs_build_and_match_thoroughly(mod, seed):
    check_builds_match_interpreter(mod, seed, samples=4)


# view chains (reshape with -1, regrouping, expand_dims / squeeze with negative axes, permute),
# argmax / argmin, more reductions with negative axes and keepdims, (1, m) against (n, 1)
# broadcasting, casts of floats out of a signed integer range (s12-fuzz)
SHAPE_STEPS = ("views", "wide_cast", "arg_reduce", "more_reduce", "outer_broadcast", "broadcast", "reduce",
               "unary", "binary")


@QUICK
@given(mod=dataflow_modules(max_blocks=2, max_steps=3, kinds=SHAPE_STEPS), seed=st.integers(0, 2**16))
def test_random_view_and_reduction_programs_build_and_match(mod, seed):
    check_builds_match_interpreter(mod, seed)


@pytest.mark.fuzz
@THOROUGH
@given(mod=dataflow_modules(max_blocks=4, max_steps=6, kinds=SHAPE_STEPS), seed=st.integers(0, 2**16))
def test_random_view_and_reduction_programs_build_and_match_thoroughly(mod, seed):
    check_builds_match_interpreter(mod, seed, samples=4)


def _check_call_tir_program(steps, escape, bound, seed):
    mod = call_tir_program(steps, escape, bound)
    rng = np.random.default_rng(seed)
    largest = bound or 9
    # empty tensors too: the interpreter's results must agree with compiled code's for 0
    sizes = [(1, 1), (int(rng.integers(1, largest + 1)), int(rng.integers(1, 5))), (largest, 3),
             (0, 2), (2, 0)]
    for target, vm in built_vms(mod).items():
        for n, m in sizes:
            x = rng.standard_normal((n, m)).astype("float32")
            expected, got = rx.interpret(mod, "main", x), vm["main"](x)
            assert _same(expected, got, 1e-5, 1e-5), f"target {target!r}, n = {n}, m = {m}"
        if bound:
            with pytest.raises(ShapeMismatchError, match=f"symbolic var n: expected <= {bound}"):
                vm["main"](np.zeros((bound + 1, 2), "float32"))


@QUICK
@given(steps=st.lists(STEP, min_size=1, max_size=6), escape=st.integers(0, 6),
       bound=st.sampled_from([None, 6]), seed=st.integers(0, 2**16))
def test_random_call_tir_programs_build_and_match(steps, escape, bound, seed):
    _check_call_tir_program(steps, escape, bound, seed)


@pytest.mark.slow
@THOROUGH
@given(steps=st.lists(STEP, min_size=1, max_size=10), escape=st.integers(0, 10),
       bound=st.sampled_from([None, 6, 9]), seed=st.integers(0, 2**16))
def test_random_call_tir_programs_build_and_match_thoroughly(steps, escape, bound, seed):
    _check_call_tir_program(steps, escape, bound, seed)
