"""Every cleanup pass over random modules: same interpreter results for several
symbolic bindings, round trip, well-formedness, input never mutated."""
import pytest
from hypothesis import HealthCheck, given, settings

from relaxscript.transform.canonicalize_bindings import CanonicalizeBindings
from relaxscript.transform.dead_code_elimination import DeadCodeElimination
from relaxscript.transform.fold_constant import FoldConstant
from relaxscript.transform.lambda_lift import LambdaLift
from relaxscript.transform.pass_infra import Sequential
from relaxscript.transform.testing import assert_pass_preserves, dataflow_modules

PASSES = {
    "dce": DeadCodeElimination,
    "canonicalize": CanonicalizeBindings,
    "fold": FoldConstant,
    "lift": LambdaLift,
    "all": lambda: Sequential([LambdaLift(), FoldConstant(), CanonicalizeBindings(), DeadCodeElimination()]),
}


@pytest.mark.parametrize("name", sorted(PASSES))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mod=dataflow_modules())
def test_pass_preserves_random_modules(name, mod):
    assert_pass_preserves(PASSES[name](), mod, samples=3)
