"""backends.threading: the kernels' OpenMP team is sized per call from the machine's load, and
libgomp is loaded with a bounded spin. (How fast that is under contention is measured in
benchmarks/bench_threading.py, not asserted here.)"""
from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import relaxscript as rx
from backends import blas
from backends import threading as threads
from backends.blas_parallel import shim

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.parametrize("running, spinning, expected", [
    (1, 0, 4),    # only the caller runs: the whole team
    (2, 0, 3),    # one other runnable thread takes a core
    (9, 0, 1),    # a loaded machine: never fewer than one
    (4, 3, 4),    # our own team threads still spinning after the last call are not others
])
def test_team_size_leaves_cores_to_other_runnable_threads(running, spinning, expected):
    assert threads.team_size(4, running, 4, 4, spinning) == expected


def test_team_size_counts_a_share_of_the_others_when_pinned_to_some_cpus():
    # 2 of 16 CPUs allowed, 8 other runnable threads somewhere: about one of them on ours
    assert threads.team_size(2, 9, 16, 2, 0) == 1
    assert threads.team_size(2, 2, 16, 2, 0) == 1
    assert threads.team_size(2, 1, 16, 2, 0) == 2


def _fake_team(tmp_path, running: int, max_threads: int = 4, **options):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text(f"0.50 0.40 0.30 {running}/321 4567\n")
    applied = []
    team = threads.TeamSize(applied.append, max_threads, adaptive=True, loadavg=str(loadavg),
                            cpus_in_machine=max_threads, **options)
    return team, loadavg, applied


def test_team_follows_the_load_and_applies_only_changes(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(threads.time, "monotonic", lambda: clock[0])
    team, loadavg, applied = _fake_team(tmp_path, running=3)   # the caller and two others
    team.enter(); team.leave()
    assert applied == [4]                # one sample is an instant: the team keeps its size
    clock[0] += 2 * threads.SAMPLE_INTERVAL_S
    team.enter(); team.leave()
    assert applied == [4, 2]             # the second sample in a row confirms the load
    clock[0] += 0.001                    # within the sampling interval: no new sample
    loadavg.write_text("0.50 0.40 0.30 1/321 4567\n")
    team.enter(); team.leave()
    assert applied == [4, 2]
    clock[0] += threads.SAMPLE_INTERVAL_S
    team.leave()
    clock[0] += 50e-6                    # right after a call: our second thread still spins
    loadavg.write_text("0.50 0.40 0.30 4/321 4567\n")
    team.enter()
    assert applied == [4, 2]
    clock[0] += threads.SAMPLE_INTERVAL_S + 1.0   # long after: the machine is free again
    loadavg.write_text("0.50 0.40 0.30 1/321 4567\n")
    team.enter()
    assert applied == [4, 2, 4]


def test_team_is_fixed_when_not_adaptive(tmp_path):
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("9.0 9.0 9.0 12/321 4567\n")
    applied = []
    team = threads.TeamSize(applied.append, 3, adaptive=False, loadavg=str(loadavg))
    team.enter()
    assert applied == [3]


def test_user_thread_count_is_the_most_a_call_uses(monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_NUM_THREADS", "3")
    assert threads.user_num_threads() == 3
    monkeypatch.delenv("RELAXSCRIPT_NUM_THREADS")
    monkeypatch.setenv("OMP_NUM_THREADS", "2,1")   # OpenMP's per-level list: the first level counts
    assert threads.user_num_threads() == 2
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert threads.user_num_threads() is None


@pytest.mark.parametrize("env, expected", [
    ({}, True), ({"OMP_NUM_THREADS": "2"}, True), ({"RELAXSCRIPT_NUM_THREADS": "2"}, True),
    ({"OMP_DYNAMIC": "true"}, True), ({"OMP_DYNAMIC": "FALSE"}, False), ({"OMP_DYNAMIC": "0"}, False),
    ({"RELAXSCRIPT_ADAPTIVE_THREADS": "0"}, False), ({"RELAXSCRIPT_ADAPTIVE_THREADS": "1"}, True)])
def test_a_user_count_still_shrinks_under_load_unless_held_exactly(env, expected):
    # a count held beside a busy neighbour made every parallel region wait a scheduler slice
    assert threads.adaptive_threads(env, policy=os.SCHED_OTHER) is expected


@pytest.mark.parametrize("policy, expected", [("SCHED_OTHER", True), ("SCHED_BATCH", True),
                                              ("SCHED_FIFO", False), ("SCHED_RR", False)])
def test_a_real_time_policy_keeps_the_whole_team(policy, expected):
    # ordinary threads cannot take a real-time process's cores: counting them only shrank the team
    assert threads.adaptive_threads({}, policy=getattr(os, policy)) is expected


@pytest.mark.parametrize("text, expected", [("max 100000\n", None), ("250000 100000\n", 3),
                                            ("50000 100000\n", 1), ("garbage", None)])
def test_cgroup_quota_caps_the_thread_count(tmp_path, text, expected):
    path = tmp_path / "cpu.max"
    path.write_text(text)
    assert threads.cgroup_cpu_quota(str(path)) == expected


def test_vm_call_sets_the_team_before_its_kernels(tmp_path, monkeypatch):
    monkeypatch.setattr(threads, "SAMPLE_INTERVAL_S", 0.0)
    mod = rx.from_source('''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 64), "float32"), w: R.Tensor((64, 32), "float32")):
        with R.dataflow():
            y = R.nn.relu(R.matmul(x, w))
            R.output(y)
        return y
''')
    vm = rx.VirtualMachine(rx.build(mod, target="c"))
    assert vm.team is threads.team()
    # three others on four cores; no spin window: a fast second call would otherwise start within
    # it and count our own (fake) spinning threads among the four
    team, _, applied = _fake_team(tmp_path, running=4, spin_window_s=0.0)
    vm.team = team
    x, w = np.ones((3, 64), np.float32), np.ones((64, 32), np.float32)
    np.testing.assert_allclose(vm["main"](x, w), x @ w)
    np.testing.assert_allclose(vm["main"](x, w), x @ w)
    assert applied == [4, 1]   # the second call's sample confirms the first's


def test_blas_splits_follow_the_team_size_and_leave_openmp_settings_alone():
    # blas.num_threads() is 0: a split uses the team size the runtime sets per call
    assert blas.num_threads() == 0
    gomp = ctypes.CDLL("libgomp.so.1")
    cell = ctypes.c_int.in_dll(shim(), "rs_team_threads")
    before, openmp_default = cell.value, gomp.omp_get_max_threads()
    try:
        for team in (1, 3):
            cell.value = team
            rng = np.random.default_rng(team)
            a = rng.standard_normal((200, 1024)).astype(np.float32)
            b = rng.standard_normal((1024, 600)).astype(np.float32)
            c = np.full((200, 600), np.nan, np.float32)
            blas.sgemm(a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
            # a PyTorch sharing this libgomp keeps its thread count
            assert gomp.omp_get_max_threads() == openmp_default
    finally:
        cell.value = before


def _display_env(extra_env: dict) -> tuple[str, str]:
    """libgomp's settings (OMP_DISPLAY_ENV) in a fresh process that loads a kernel library."""
    script = textwrap.dedent('''
        import os
        from backends.blas_parallel import shim
        shim()
        print("GOMP_SPINCOUNT" in os.environ)
    ''')
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    env.update(PYTHONPATH=os.pathsep.join([os.path.join(ROOT, "src"), ROOT]), OMP_DISPLAY_ENV="verbose",
               **extra_env)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    return proc.stdout, proc.stderr


def _spin_count(display: str) -> int:
    line = next(line for line in display.splitlines() if "GOMP_SPINCOUNT" in line)
    return int(line.split("'")[1])


def test_libgomp_spins_briefly_and_the_environment_is_restored():
    # libgomp's default spins 300000 pauses (about 30 ms on some CPUs) after every region
    stdout, stderr = _display_env({})
    assert stdout.strip() == "False"      # the variable was only there while libgomp loaded
    assert 100 <= _spin_count(stderr) < 300000


def test_user_wait_policy_is_left_alone():
    _, stderr = _display_env({"GOMP_SPINCOUNT": "12345"})
    assert _spin_count(stderr) == 12345


@pytest.mark.parametrize("env, expected", [
    ({}, 300000.0), ({"OMP_WAIT_POLICY": "passive"}, 0.0), ({"OMP_WAIT_POLICY": "ACTIVE"}, float("inf")),
    ({"GOMP_SPINCOUNT": "2500", "OMP_WAIT_POLICY": "passive"}, 2500.0), ({"GOMP_SPINCOUNT": "infinite"}, float("inf")),
])
def test_spin_count_of_a_libgomp_loaded_by_someone_else(env, expected):
    # e.g. PyTorch imported first: its libgomp serves our kernels with the spin it was loaded with
    assert threads.spin_count_from_environment(env) == expected


def test_team_threads_spinning_longer_are_not_counted_as_others(tmp_path, monkeypatch):
    clock = [100.0]
    monkeypatch.setattr(threads.time, "monotonic", lambda: clock[0])
    loadavg = tmp_path / "loadavg"
    loadavg.write_text("0.5 0.5 0.5 1/321 4567\n")
    applied = []
    team = threads.TeamSize(applied.append, 2, adaptive=True, loadavg=str(loadavg), cpus_in_machine=2,
                            spin_window_s=0.02)   # a libgomp loaded with its default spin
    team.enter(); team.leave()
    clock[0] += 0.01                      # our second thread still spins
    loadavg.write_text("0.5 0.5 0.5 2/321 4567\n")
    team.enter()
    assert applied == [2]
