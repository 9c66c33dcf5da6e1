"""Random dataflow programs of operators with symbolic dims through the front half of
the pipeline (LegalizeOps -> AnnotateTIROpPattern -> FuseOps -> FuseTIR).

After every pass and after the whole sequence: the input is not mutated, the output
is well-formed, prints and parses back to an equal module, and the reference
interpreter gives the same results for several random values of the symbolic vars
(``assert_pass_preserves``). Every other exported pass leaves such a lowered module
untouched as an input too."""
from hypothesis import HealthCheck, given, settings

import relaxscript as rx
from relaxscript.expr import Call, Function, Op
from relaxscript.transform import (AnnotateTIROpPattern, FuseOps, FuseTIR, LegalizeOps, PassContext,
                                   Sequential)
from relaxscript.transform.testing import assert_pass_preserves, dataflow_modules
from tensorir.analysis import analyze_pattern
from tensorir.functor import collect

from .test_pass_infra import _constructible_passes


def front_half():
    return [LegalizeOps(), AnnotateTIROpPattern(), FuseOps(), FuseTIR()]


def operator_calls(mod) -> set[str]:
    names = set()
    for func in mod.functions.values():
        if isinstance(func, Function):
            names |= {c.op.name for c in collect(func, lambda n: isinstance(n, Call)) if isinstance(c.op, Op)}
    return names


SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(mod=dataflow_modules())
def test_every_pass_of_the_front_half_preserves_random_programs(mod):
    stage = mod
    for p in front_half():
        stage = assert_pass_preserves(p, stage, samples=3)
    # every operator of these programs has a fixed output shape, so nothing stays unlowered
    assert operator_calls(stage) <= {"relax.call_tir"}, operator_calls(stage)
    # each kernel's recorded pattern kind is what Algorithm 1 reads from its loops
    for name, kernel in stage.prim_funcs.items():
        assert kernel.attrs.get("op_pattern") == analyze_pattern(kernel).name, name


@SETTINGS
@given(mod=dataflow_modules())
def test_whole_sequence_preserves_random_programs(mod):
    sequence = Sequential(front_half(), name="FrontHalf")
    after = assert_pass_preserves(sequence, mod, samples=3)
    # checking each pass inside the sequence with the interpreter finds nothing either
    with PassContext(check_with_interpreter=True, check_samples=2):
        checked = Sequential(front_half())(mod)
    rx.assert_structural_equal(checked, after)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mod=dataflow_modules(max_blocks=2, max_steps=3))
def test_no_pass_mutates_a_lowered_module(mod):
    lowered = Sequential(front_half())(mod)
    text, digest = lowered.script(), rx.structural_hash(lowered)
    for p in _constructible_passes():
        try:
            p(lowered)
        except Exception:  # noqa: BLE001 - a pass may reject an input; it still must not mutate it
            pass
        unchanged = lowered.script() == text and rx.structural_hash(lowered) == digest
        assert unchanged, f"{p.name} mutated its input"
