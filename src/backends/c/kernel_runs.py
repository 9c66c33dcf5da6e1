"""Runs of kernel calls executed by one native call (the VM's ``Frame.steps``, C target, host memory).

A decode step of a 30-layer LLM is about 300 kernel calls. Linked one by one, each is a Python step
(argument pointers, a ctypes call): 1-2 us a call, 0.3-0.5 ms of a 5-8 ms step, on a machine where
the kernels themselves spend that step streaming weights. Consecutive calls whose arguments the VM
can resolve before the first of them runs are linked into one step: it fills the calls' pointer
arrays that may change between calls, runs their call sites' symbol work, and makes one ctypes call
of ``rs_run_kernels``, a loop over function pointers that stops at the first nonzero status.
"""
from __future__ import annotations

import ctypes

from ..host_pointer import data_pointer
from .status import raise_for_status

RUNNER_C = r"""
#include <stdint.h>
#include <time.h>
typedef int32_t (*rs_kernel_fn)(void* const*, const int64_t*);
/* Call fns[0..n) in order; the index of the first that returns a nonzero status (written to
   *status), or -1 when all return 0. */
int64_t rs_run_kernels(int64_t n, const rs_kernel_fn* fns, void* const* const* bufs,
                       const int64_t* const* syms, int32_t* status) {
  for (int64_t i = 0; i < n; ++i) {
    const int32_t s = fns[i](bufs[i], syms[i]);
    if (s != 0) { *status = s; return i; }
  }
  return -1;
}
static double rs_now_ns(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }
/* The same, adding each call's wall time to ns[i] (profiling: KernelModule.time_runs). */
int64_t rs_run_kernels_timed(int64_t n, const rs_kernel_fn* fns, void* const* const* bufs,
                             const int64_t* const* syms, int32_t* status, double* ns) {
  for (int64_t i = 0; i < n; ++i) {
    const double start = rs_now_ns();
    const int32_t s = fns[i](bufs[i], syms[i]);
    ns[i] += rs_now_ns() - start;
    if (s != 0) { *status = s; return i; }
  }
  return -1;
}
"""


_RUNNERS: dict = {}


def runner(timed: bool = False):
    """``rs_run_kernels`` (or its timed sibling) through ctypes, or None when it cannot be built (the
    calls then stay one step each). Only a built runner is remembered: a failure (no compiler at
    that moment, e.g. a loaded executable run where compiling is not allowed) is retried later."""
    if timed in _RUNNERS:
        return _RUNNERS[timed]
    from .compiler import compile_shared
    try:
        path, _ = compile_shared(RUNNER_C)
    except Exception:  # noqa: BLE001 - no compiler: kernels could not have been built either
        return None
    fn = getattr(ctypes.CDLL(str(path)), "rs_run_kernels_timed" if timed else "rs_run_kernels")
    fn.argtypes = None     # prebuilt ctypes arguments: no conversion per call
    fn.restype = ctypes.c_int64
    _RUNNERS[timed] = fn
    return fn


def link_run(module, calls, early: tuple, nxt: int, frame, fixed_values: dict, kills: tuple, where: str):
    """One step: the ``early`` steps (call sites' symbol work, allocations) in order, the kernel
    ``calls`` (CallKernel instructions) in order in one native call, then the deferred ``kills``;
    ``fixed_values``: registers whose value is the same on every call of this frame. With
    ``module.time_runs`` set when the frame is linked, each call's time in ns is added to
    ``step.times[k]`` (``step.kernels[k]`` names the kernel): a per-kernel profile of joined runs."""
    timed = bool(getattr(module, "time_runs", False))
    run = runner(timed)
    if run is None:
        return None
    regs, ptrs, t = frame.regs, frame.ptrs, frame.table
    n = len(calls)
    fns = (ctypes.c_void_p * n)()
    bufs_of = (ctypes.c_void_p * n)()
    syms_of = (ctypes.c_void_p * n)()
    arrays = []          # the per-call pointer arrays (kept alive by this step)
    dynamic: dict = {}   # register -> [(array, slot)]: looked up on every call
    changing: dict = {}  # register -> [(array, slot)]: compared with the value seen last call
    fixed = frame.fixed_ptr_regs
    for k, ins in enumerate(calls):
        fns[k] = ctypes.cast(module.functions[ins.kernel], ctypes.c_void_p).value
        bufs = (ctypes.c_void_p * max(1, len(ins.buffers)))()
        arrays.append(bufs)
        bufs_of[k] = ctypes.addressof(bufs)
        syms_of[k] = ctypes.addressof(t) + 8 * ins.sym_base if ins.sym_base >= 0 else None
        for i, r in enumerate(ins.buffers):
            if r in fixed:
                bufs[i] = ptrs[r]
            elif r in frame.ptr_regs:
                dynamic.setdefault(r, []).append((bufs, i))
            elif r in fixed_values:
                bufs[i] = data_pointer(fixed_values[r])
            else:
                changing.setdefault(r, []).append((bufs, i))
    dynamic = tuple((r, tuple(slots)) for r, slots in dynamic.items())
    changing = tuple((k, r, tuple(slots)) for k, (r, slots) in enumerate(changing.items()))
    seen: list = [None] * len(changing)
    labels = tuple(f"{where}: kernel '{ins.kernel}'" for ins in calls)
    count, status = ctypes.c_int64(n), (ctypes.c_int32 * 1)()
    bad_index, assert_message = module.bad_index, module.assert_message
    times = (ctypes.c_double * n)()
    extra = (times,) if timed else ()

    def step():
        for work in early:
            work()
        for r, slots in dynamic:
            p = ptrs[r]
            for bufs, i in slots:
                bufs[i] = p
        for k, r, slots in changing:
            value = regs[r]
            if value is not seen[k]:
                p = data_pointer(value)
                for bufs, i in slots:
                    bufs[i] = p
                seen[k] = value
        failed = run(count, fns, bufs_of, syms_of, status, *extra)
        if failed >= 0:
            raise_for_status(status[0], labels[failed], bad_index, assert_message)
        for r in kills:
            regs[r] = None
        return nxt
    step.kept = (arrays, fixed_values)   # the pointer arrays and fixed values live as long as the step
    step.times, step.kernels = times, tuple(ins.kernel for ins in calls)
    return step
