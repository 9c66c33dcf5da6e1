"""Random dataflow programs of call_tirs with symbolic dims: FuseOps, FuseTIR and
both keep the interpreter's results (several values of n), round-trip through
the printer and parser, and stay well-formed."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx

from .fuse_helpers import assert_same, build_program, count_call_tir, random_inputs

KERNEL_NAMES = ["relu", "scale", "add", "bias", "flip", "rownorm", "mm", "flip_opaque"]
OPERANDS = {"relu": 1, "scale": 1, "add": 2, "bias": 2, "flip": 1, "rownorm": 1, "mm": 2,
            "flip_opaque": 1}


@st.composite
def programs(draw):
    count = draw(st.integers(2, 7))
    steps = []
    for index in range(count):
        name = draw(st.sampled_from(KERNEL_NAMES))
        # operands index the values so far (x, then one per step); favour recent ones
        operands = [draw(st.integers(max(0, index - 2), index)) for _ in range(OPERANDS[name])]
        steps.append((name, operands))
    flatten = draw(st.booleans())
    cast_at = draw(st.one_of(st.none(), st.integers(1, count - 1)))
    outputs = draw(st.lists(st.integers(1, count + 1), min_size=1, max_size=2))
    return steps, flatten, cast_at, outputs


def _check_module(mod):
    rx.assert_structural_equal(rx.from_source(mod.script()), mod)
    assert rx.analysis.well_formed(mod)


@settings(max_examples=25, deadline=None)
@given(programs(), st.integers(0, 2**16))
def test_fusion_preserves_results(program, seed):
    steps, flatten, cast_at, outputs = program
    mod, oracle = build_program(steps, flatten, cast_at, outputs)
    annotated = rx.transform.AnnotateTIROpPattern()(mod)
    grouped = rx.transform.FuseOps()(annotated)
    merged = rx.transform.FuseTIR()(grouped)
    direct = rx.transform.FuseTIR()(annotated)  # nothing primitive yet: unchanged
    assert direct is annotated
    for stage in (grouped, merged):
        _check_module(stage)
    assert count_call_tir(merged) <= count_call_tir(mod)
    rng = np.random.default_rng(seed)
    for n in (1, 2, 5):
        args = random_inputs(rng, n, flatten)
        expected = oracle(*args)
        for stage in (mod, grouped, merged):
            assert_same(rx.interpret(stage, "main", *args), expected)
