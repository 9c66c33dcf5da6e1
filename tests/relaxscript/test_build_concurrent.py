"""Two processes building the same module at the same moment into one cache both
succeed, and the cache ends up holding one library for it (written atomically)."""
from __future__ import annotations

import multiprocessing
import os

import numpy as np

from backends import blas_parallel
from backends import threading as threads
from backends.c import kernel_runs
from backends.c.compiler import compile_shared
from tests.relaxscript import vm_modules as M


def _build_and_run(barrier, results, seed: int) -> None:
    import relaxscript as rx
    mod = M.parse(M.NORMS)
    args = M.inputs_for("NORMS", np.random.default_rng(seed), 5, 7)
    try:
        barrier.wait(timeout=60)
        exe = rx.build(mod, target="c")
        got = rx.VirtualMachine(exe)["main"](*args)
        expected = rx.interpret(mod, "main", *args)
        same = all(np.allclose(g, e, rtol=1e-4, atol=1e-5) for g, e in zip(got, expected))
        results.put((seed, "ok" if same else "wrong result", exe.c_library.path, exe.compiled))
    except Exception as err:  # noqa: BLE001 - reported to the parent as text
        results.put((seed, f"{type(err).__name__}: {err}", "", False))


def test_concurrent_builds_of_one_module_share_one_cached_library(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_CACHE_DIR", str(tmp_path))   # inherited by the children
    ctx = multiprocessing.get_context("spawn")   # no fork of a process that loaded OpenMP
    barrier, results = ctx.Barrier(2), ctx.Queue()
    workers = [ctx.Process(target=_build_and_run, args=(barrier, results, seed)) for seed in (1, 2)]
    for w in workers:
        w.start()
    outcomes = [results.get(timeout=300) for _ in workers]
    for w in workers:
        w.join(timeout=60)
        assert w.exitcode == 0
    assert [status for _, status, _, _ in outcomes] == ["ok", "ok"], outcomes
    assert any(compiled for *_, compiled in outcomes)   # the cache started empty
    cache = tmp_path / "c"
    libraries = sorted(p.name for p in cache.glob("*.so"))
    # besides the module's one library, only the runtime's own: the BLAS shim, the spin probe, the
    # kernel-run loop
    runtime = {compile_shared(source)[0].name
               for source in (blas_parallel._SOURCE, threads._SPIN_PROBE, kernel_runs.RUNNER_C)}
    module_libraries = {os.path.basename(path) for _, _, path, _ in outcomes}
    assert len(module_libraries) == 1, outcomes
    assert module_libraries <= set(libraries) and set(libraries) - module_libraries <= runtime, libraries
    assert not [p.name for p in cache.iterdir() if p.name.startswith(".")]   # no temporaries left
