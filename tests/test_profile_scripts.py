"""benchmarks/profile_workload.py and benchmarks/profile_onnxruntime.py: the per-kernel profile of
our side (wall or this thread's CPU time) and the per-operator summary of onnxruntime's profile."""
from __future__ import annotations

import sys
import time

from tests.test_examples import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from benchmarks import profile_onnxruntime, profile_workload  # noqa: E402


def test_operator_times_sum_each_operator_per_call():
    events = [
        {"cat": "Session", "name": "model_run", "dur": 900},
        {"cat": "Node", "name": "MatMul_1_kernel_time", "dur": 300, "args": {"op_name": "MatMul"}},
        {"cat": "Node", "name": "MatMul_2_kernel_time", "dur": 500, "args": {"op_name": "MatMul"}},
        {"cat": "Node", "name": "MatMul_1_fence_before", "dur": 7, "args": {"op_name": "MatMul"}},
        {"cat": "Node", "name": "Add_kernel_time", "dur": 100, "args": {"op_name": "Add"}},
    ] * 2   # two calls
    assert profile_onnxruntime.operator_times(events, calls=2) == [("MatMul", 0.8, 2), ("Add", 0.1, 1)]


def test_cpu_clock_profile_lists_every_kernel_once_per_call():
    plain, instrumented, rows = profile_workload.profile("norm_softmax", 3, calls=3, clock=time.thread_time)
    assert plain > 0 and instrumented > 0
    labels = [label for label, _, _ in rows]
    assert any("CallKernel" in label for label in labels)
    assert all(ms >= 0 and count >= 1 for _, ms, count in rows)


def test_bench_models_cpu_clock_runs_every_peer_on_one_thread():
    from tests.test_examples import run_script
    proc = run_script(ROOT / "benchmarks" / "bench_models.py", "--sizes", "1,7", "--no-torch", "--budget", "0.05",
               "--warmup", "0.05",
                      "--workloads", "mlp", "--processes", "1", "--clock", "cpu", timeout=600)
    assert "1 thread per peer, its thread's CPU time" in proc.stdout


def test_bench_gemm_runs_each_entry_with_its_operands():
    """Every native entry the GEMM benchmark calls (generated, OpenBLAS, prepacked with its
    four operands) runs and agrees with OpenBLAS: a wrong operand count reads past the array."""
    from tests.test_examples import run_script
    proc = run_script(ROOT / "benchmarks" / "bench_gemm.py", "--rows", "1", "7", "--rounds", "1",
                      "--budget", "0.02", timeout=600)
    assert "prepacked speedup" in proc.stdout
