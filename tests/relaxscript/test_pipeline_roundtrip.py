"""Every intermediate module of ``rx.get_pipeline("c")`` round-trips: it prints, re-parses to a
structurally equal module, and the re-parsed module prints the same text again."""
import pytest
from hypothesis import HealthCheck, given, settings

import relaxscript as rx
from relaxscript.transform.testing import dataflow_modules
from tests.relaxscript.vm_modules import HEADER

QUICK = settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
THOROUGH = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def assert_round_trips(mod, stage: str) -> None:
    text = mod.script()
    again = rx.from_source(text)
    try:
        rx.assert_structural_equal(again, mod)
    except AssertionError as err:
        raise AssertionError(f"after {stage}: the re-parsed module differs: {err}\n{text}") from err
    reprinted = again.script()
    assert reprinted == text, f"after {stage}: printing the re-parsed module changes the text\n" + \
        "\n".join(f"- {a}\n+ {b}" for a, b in zip(text.splitlines(), reprinted.splitlines()) if a != b)


def assert_every_stage_round_trips(mod) -> None:
    assert_round_trips(mod, "parsing")
    for p in rx.get_pipeline("c"):
        mod = p(mod)
        assert_round_trips(mod, type(p).__name__)


BROADCAST_RESHAPE = HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 16, 4, 4), "float32"), b: R.Tensor((16,), "float32")):
        with R.dataflow():
            lv = R.exp(x)
            lv1 = R.reshape(b, [1, 16, 1, 1])
            lv2 = R.add(lv, lv1)
            gv = R.nn.relu(lv2)
            R.output(gv)
        return gv
'''


def test_scheduled_broadcast_of_a_reshape_round_trips():
    """Inlining the reshape at the broadcast's constant index once printed ``b[0 * 16 + v_j + 0 + 0]``,
    which the parser folds; the scheduled kernel now reads ``b[v_j]``."""
    mod = rx.from_source(BROADCAST_RESHAPE)
    for p in rx.get_pipeline("c"):
        mod = p(mod)
        assert_round_trips(mod, type(p).__name__)
    (kernel,) = mod.prim_funcs.values()
    assert "b[v_j" in kernel.script() and "0 * 16" not in kernel.script()


@QUICK
@given(mod=dataflow_modules())
def test_every_pipeline_stage_of_random_programs_round_trips(mod):
    assert_every_stage_round_trips(mod)


@pytest.mark.slow
@THOROUGH
@given(mod=dataflow_modules(max_blocks=4, max_steps=6))
def test_every_pipeline_stage_of_random_programs_round_trips_thoroughly(mod):
    assert_every_stage_round_trips(mod)
