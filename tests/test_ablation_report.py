"""benchmarks/ablation_report.py: every switch builds a different, working configuration."""
from __future__ import annotations

import numpy as np
import pytest

import relaxscript as rx
from benchmarks import ablation_report as report
from tests.test_examples import ROOT, run_script


def _names(passes):
    return [(type(p).__name__, getattr(p, "variants", None), getattr(p, "registry", None)) for p in passes]


def test_every_setting_switches_something_off():
    everything = _names(report.ALL_ON.pipeline())
    for setting in report.SETTINGS:
        passes = setting.pipeline()
        assert all(isinstance(p, rx.transform.Pass) for p in passes), setting.label
        # a pass left out or replaced, or the VM's prebinding off
        assert _names(passes) != everything or not setting.prebind, setting.label
    assert len({s.label for s in report.SETTINGS}) == len(report.SETTINGS)


def test_markdown_table_gives_gains_relative_to_everything_on():
    settings = report.SETTINGS[:2]
    times = {"mlp": {(report.ALL_ON.label, 1): 2.0, (settings[0].label, 1): 3.0, (settings[1].label, 1): 1.0}}
    table = report.markdown_table([("mlp", 1)], times, settings).splitlines()
    assert table[0] == "| optimization switched off | mlp n=1 |"
    assert table[2] == "| (everything on, ms) | 2.000 |"
    assert table[3] == f"| {settings[0].label} | 1.50x |" and table[4] == f"| {settings[1].label} | 0.50x |"


@pytest.mark.slow
def test_ablation_report_runs_and_checks_every_build():
    out = run_script(ROOT / "benchmarks" / "ablation_report.py", "--workloads", "norm_softmax", "--sizes", "1,3",
                     "--rounds", "1", "--budget", "0.01", timeout=900).stdout
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + len(report.SETTINGS)
    gains = [float(cell.strip().rstrip("x")) for row in rows[2:] for cell in row.split("|")[2:-1]]
    assert all(np.isfinite(g) and g > 0 for g in gains)


def test_profile_workload_times_every_step_of_every_function():
    from benchmarks import profile_workload
    plain, instrumented, rows = profile_workload.profile("norm_softmax", 2, calls=3)
    assert plain > 0 and instrumented > 0
    labels = [label for label, _, _ in rows]
    assert any(label.startswith("main/CallKernel:") for label in labels), labels
    assert all(ms >= 0 and count >= 1 for _, ms, count in rows)
