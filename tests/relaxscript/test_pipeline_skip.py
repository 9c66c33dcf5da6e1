"""rx.get_pipeline(target, skip=...): leaving named passes out, checked by name."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from relaxscript.vm.instructions import VMBuildError
from tests.relaxscript.vm_modules import chain_module


def _names(passes):
    return [p.name for p in passes]


def test_skip_removes_exactly_the_named_passes():
    full = _names(rx.get_pipeline("c"))
    kept = _names(rx.get_pipeline("c", skip=["FuseOps", "FuseTIR"]))
    assert kept == [name for name in full if name not in ("FuseOps", "FuseTIR")]
    assert _names(rx.get_pipeline("c", skip="StaticPlanBlockMemory")) == full[:-1]


def test_unknown_name_is_an_error_listing_the_pipeline():
    with pytest.raises(VMBuildError, match=r"no pass named 'FuseOp' in the c pipeline \(its passes: .*FuseOps"):
        rx.get_pipeline("c", skip=["FuseOp"])
    # the interpreter target has no schedule pass: skipping one there is a mistake too
    with pytest.raises(VMBuildError, match="'DefaultCPUSchedule'"):
        rx.get_pipeline("interp", skip=["DefaultCPUSchedule"])


@pytest.mark.parametrize("skip", [(), ("FuseOps", "FuseTIR"), ("StaticPlanBlockMemory",)])
def test_a_build_without_a_pass_gives_the_same_results(skip):
    mod = chain_module(6, 4)
    got = rx.VirtualMachine(rx.build(mod, target="c", pipeline=rx.get_pipeline("c", skip=skip)))["main"]
    want = rx.VirtualMachine(rx.build(mod, target="interp"))["main"]
    x = np.random.default_rng(0).uniform(0.5, 1.0, 4).astype("float32")
    np.testing.assert_allclose(got(x), want(x), rtol=1e-6)
