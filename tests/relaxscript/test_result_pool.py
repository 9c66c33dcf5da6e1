"""Large result arrays reuse freed blocks (vm/result_pool.py): a block goes back only when no
array or view reads it, results of calls kept alive never share memory, the idle cap holds, and
compiled functions give NumPy's results whichever block they write."""
from __future__ import annotations

import gc
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends import aligned_memory
from relaxscript.vm import result_pool
from relaxscript.vm.result_pool import SIZE_CLASS, ResultPool
from tests.relaxscript.fuse_helpers import norm_scale_softmax_source

MIB = 1 << 20


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def test_results_below_the_pool_start_on_a_cache_line():
    pool = ResultPool(min_bytes=4 * MIB)
    for shape in [(1023, 1024), (3, 343), (2, 2, 1025)]:
        a = pool.empty(shape, "float32")
        assert a.shape == shape and a.dtype == np.float32 and a.flags.writeable and a.flags.c_contiguous
        assert _address(a) % aligned_memory.ALIGNMENT == 0
        assert pool.idle_bytes == 0
    tiny = pool.empty((7,), "float64")            # under a page: NumPy's own array
    assert tiny.flags.owndata and tiny.shape == (7,)
    with pytest.raises(ValueError):               # NumPy's error for a negative dim
        pool.empty((2, -1), "float32")


def test_pooled_blocks_start_on_a_cache_line():
    pool = ResultPool(min_bytes=MIB)
    arrays = [pool.empty((512 + i, 1024), "float32") for i in range(3)]
    assert all(_address(a) % aligned_memory.ALIGNMENT == 0 for a in arrays)


def test_a_freed_block_is_handed_out_again():
    pool = ResultPool(min_bytes=MIB)
    a = pool.empty((512, 1024), "float32")    # 2 MiB: one size class
    assert not a.flags.owndata and a.flags.writeable and a.shape == (512, 1024)
    first = _address(a)
    b = pool.empty((512, 1024), "float32")
    assert _address(b) != first                  # a is alive: its block is not idle
    del a
    gc.collect()
    assert pool.idle_bytes == SIZE_CLASS
    c = pool.empty((256, 2048), "int32")          # same size class, another shape and dtype
    assert _address(c) == first and pool.idle_bytes == 0
    assert c.shape == (256, 2048) and c.dtype == np.int32


def test_a_view_keeps_its_block_out_of_the_pool():
    pool = ResultPool(min_bytes=MIB)
    a = pool.empty((600, 1024), "float32")
    a[:] = 7.0
    view = a[100:].T                              # its base is the lease, not a
    exported = memoryview(a[5])
    del a
    gc.collect()
    assert pool.idle_bytes == 0
    b = pool.empty((600, 1024), "float32")
    b[:] = -1.0
    assert not np.shares_memory(b, view)
    assert (view == 7.0).all() and exported[0] == 7.0
    del view, exported
    gc.collect()
    assert pool.idle_bytes > 0


def test_the_idle_cap_frees_blocks_beyond_it():
    pool = ResultPool(min_bytes=MIB, max_idle_bytes=2 * SIZE_CLASS)
    arrays = [pool.empty((SIZE_CLASS // 4,), "float32") for _ in range(3)]
    del arrays
    gc.collect()
    assert pool.idle_bytes == 2 * SIZE_CLASS
    pool.clear()
    assert pool.idle_bytes == 0


def test_zero_cap_turns_the_reuse_off():
    pool = ResultPool(min_bytes=MIB, max_idle_bytes=0)
    a = pool.empty((4 * MIB,), "uint8")
    assert not isinstance(a.base, result_pool._Lease)
    del a
    gc.collect()
    assert pool.idle_bytes == 0


def test_bad_shapes_raise_like_numpy():
    pool = ResultPool(min_bytes=1)
    with pytest.raises(ValueError):
        pool.empty((-1, 4), "float32")


@pytest.fixture
def pooled_everything(monkeypatch):
    # every result of the VM from 1 byte up, so small test shapes go through the pool
    monkeypatch.setattr(result_pool.RESULTS, "min_bytes", 1)
    monkeypatch.setattr(result_pool.RESULTS, "max_idle_bytes", 64 * MIB)
    yield result_pool.RESULTS
    result_pool.RESULTS.clear()


def _norm_softmax_numpy(x, g, b):
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b
    e = np.exp(0.125 * y - (0.125 * y).max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@lru_cache(maxsize=None)
def _compiled_norm_softmax(width: int):
    return rx.VirtualMachine(rx.build(rx.from_source(norm_scale_softmax_source(width)), target="c"))["main"]


# the fixture only widens the process pool's range for the whole test, the same for every example
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sizes=st.lists(st.sampled_from([1, 3, 17, 64]), min_size=2, max_size=4), seed=st.integers(0, 2**16))
def test_compiled_results_from_pooled_blocks_equal_numpy(pooled_everything, sizes, seed):
    width = 256
    run = _compiled_norm_softmax(width)
    rng = np.random.default_rng(seed)
    g, b = rng.standard_normal(width).astype(np.float32), rng.standard_normal(width).astype(np.float32)
    kept = []
    for n in sizes:     # every earlier result stays alive: no later call may write over it
        x = rng.standard_normal((n, width)).astype(np.float32)
        kept.append((np.asarray(run(x, g, b)), _norm_softmax_numpy(x, g, b)))
        for got, want in kept:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert all(isinstance(got.base, result_pool._Lease) for got, _ in kept)   # every result came from the pool
    for (a, _), (c, _) in zip(kept, kept[1:]):
        assert not np.shares_memory(a, c)
    del kept, a, c
    gc.collect()
    # the freed results are handed out again to the next calls, and those are still right
    before = pooled_everything.idle_bytes
    x = rng.standard_normal((sizes[0], width)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(run(x, g, b)), _norm_softmax_numpy(x, g, b), rtol=1e-5, atol=1e-6)
    assert before > 0


def test_threads_never_share_a_live_block():
    import threading
    pool = ResultPool(min_bytes=MIB, max_idle_bytes=4 * SIZE_CLASS)
    errors = []

    def work(mark: int):
        for i in range(150):
            a = pool.empty((SIZE_CLASS // 4 - i % 3,), "float32")    # one size class, several shapes
            a[:] = mark
            view = a[::7]
            del a
            if (i % 5) == 0:
                gc.collect()     # leases freed by collections too, from any thread
            if not (view == mark).all():
                errors.append(mark)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert pool.idle_bytes <= 4 * SIZE_CLASS
