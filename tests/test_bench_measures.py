"""The benchmarks' own measuring loops (bench_llm's memory read, machine_peak's multiply-adds) count
what they claim: a loop that skipped or double-read bytes would report a wrong bandwidth or limit."""
from __future__ import annotations

import sys
import time

import numpy as np
import pytest

from tests.test_examples import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_llm  # noqa: E402
import machine_peak  # noqa: E402


@pytest.fixture(scope="module")
def read_sum():
    return bench_llm._read_loop()


@pytest.mark.parametrize("threads", [1, 2, 3])
@pytest.mark.parametrize("start", [0, 1, 3, 15, 16])
@pytest.mark.parametrize("size", [0, 1, 15, 16, 129, 1000, 128 * 16 * 3 + 7])
def test_read_loop_reads_every_element_once(read_sum, threads, start, size):
    """Unaligned starts (a NumPy array's data need not sit on a 64-byte boundary), sizes that no
    thread's share of whole lines divides, more threads than lines."""
    rng = np.random.default_rng(size * 31 + start)
    data = rng.integers(0, 8, size=start + size).astype(np.float32)
    view = data[start:]
    assert read_sum(view.ctypes.data, view.size, threads) == float(view.astype(np.float64).sum())


def test_read_cold_times_a_read_of_the_requested_bytes(monkeypatch):
    monkeypatch.setattr(bench_llm, "last_level_cache_bytes", lambda: 1 << 20)
    evict = bench_llm.CacheEvictor(1)
    assert evict.buffer.nbytes == 3 << 20
    assert evict.read_cold(1 << 16) > 0.0
    assert evict.probe.nbytes == 1 << 16


def test_multiply_add_peak_is_positive_and_finite():
    peak = machine_peak.peak_gflops(1, passes=1, iterations=1000)
    assert np.isfinite(peak) and peak > 0.0


def test_warm_up_runs_the_work_once_at_least_and_then_until_the_time_is_spent():
    calls = []
    bench_llm.warm_up(lambda: calls.append(1), 0.0)
    assert len(calls) == 1   # a zero warm-up (--quick) still touches the buffers once
    calls.clear()
    start = time.perf_counter()
    bench_llm.warm_up(lambda: (calls.append(1), time.sleep(0.01)), 0.05)
    assert time.perf_counter() - start >= 0.05 and 3 <= len(calls) <= 10
