"""One owner for CPU threads: the generated kernels' OpenMP team, sized per call.

What made calls 10-100x slower on a shared machine or beside PyTorch:

- A parallel region waits for every thread of its team at its end. When more
  threads want the cores than there are cores (another process, PyTorch's or
  NumPy's own pools spinning in the same process), a team thread waits a
  scheduler slice for its core in every region, and a call runs dozens of
  regions. So the team is sized per call (``TeamSize``): the cores our
  affinity and cgroup quota allow, less the other runnable threads the kernel
  counts at that moment (``/proc/loadavg``), sampled every few milliseconds.
  Kernels read the size in their parallel loops' ``num_threads`` clause from
  one number the shim owns (``bind``); ``omp_set_num_threads`` would change
  the thread count of a PyTorch sharing the process's libgomp (the first
  libgomp.so.1 loaded serves every library; PyTorch ships one).
- libgomp's default waiting spins 300000 pauses after each region (about 30 ms
  on CPUs with a slow ``pause``), taking a core from everyone else long after a
  call ended. ``prepare_openmp`` loads libgomp with a spin count worth about
  ``SPIN_US`` microseconds (measured once, see ``spin_count``): long enough to
  bridge the gaps between one call's kernels, short enough to sleep between
  calls.
- Two pools on the same cores: OpenBLAS runs single-threaded and BLAS calls
  big enough to share are split into blocks on the team by a small C shim
  (blas_parallel.py).

Settings the user made are kept: ``RELAXSCRIPT_NUM_THREADS`` or
``OMP_NUM_THREADS`` is the most threads a call uses, and the team still
shrinks below it while other threads hold the cores, as OpenMP's
``OMP_DYNAMIC=true`` allows (a count held beside a busy neighbour made a
decode step 3-10x slower, measured); ``OMP_DYNAMIC=false`` or
``RELAXSCRIPT_ADAPTIVE_THREADS=0`` holds the count exactly.
``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` (libgomp's waiting) are left alone.
"""
from __future__ import annotations

import ctypes
import functools
import math
import os
import time

SPIN_US = 100.0               # how long idle team threads spin before they sleep
SAMPLE_INTERVAL_S = 0.005     # how often the team size follows the machine's load
_COUNT_VARIABLES = ("RELAXSCRIPT_NUM_THREADS", "OMP_NUM_THREADS")
_WAIT_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


def adaptive_threads(env=None, policy: int | None = None) -> bool:
    """Whether the team follows the machine's load: yes unless the user holds the count exactly
    (``OMP_DYNAMIC=false``, ``RELAXSCRIPT_ADAPTIVE_THREADS=0``) or the process runs under a
    real-time scheduling policy (``chrt``: ordinary threads, which ``/proc/loadavg`` counts, cannot
    take its cores, so counting them only shrank the team: an MLP call beside a test run took 14 ms
    on one thread against 7.5 on two). ``policy``: the scheduling policy, this process's if None."""
    env = os.environ if env is None else env
    return (env.get("OMP_DYNAMIC", "").strip().lower() not in ("false", "0", "no")
            and env.get("RELAXSCRIPT_ADAPTIVE_THREADS", "").strip().lower() not in ("false", "0", "no")
            and not real_time_policy(policy))


def real_time_policy(policy: int | None = None) -> bool:
    """Whether ``policy`` (this process's scheduling policy if None) is real-time (FIFO or round-robin)."""
    if policy is None:
        try:
            policy = os.sched_getscheduler(0)
        except (AttributeError, OSError):
            return False
    return policy in (getattr(os, "SCHED_FIFO", -1), getattr(os, "SCHED_RR", -1))


def user_num_threads() -> int | None:
    """The thread count the user set in the environment, or None."""
    for name in _COUNT_VARIABLES:
        value = os.environ.get(name, "").strip().split(",")[0]
        if value.isdigit() and int(value) > 0:
            return int(value)
    return None


@functools.lru_cache(maxsize=None)
def num_threads() -> int:
    """The most threads a call uses: the user's setting, else the CPUs this process may run on
    (its affinity mask, capped by a cgroup CPU quota)."""
    fixed = user_num_threads()
    if fixed is not None:
        return fixed
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    quota = cgroup_cpu_quota()
    return max(1, min(cpus, quota) if quota else cpus)


def cgroup_cpu_quota(path: str = "/sys/fs/cgroup/cpu.max") -> int | None:
    """CPUs a cgroup v2 quota allows (``cpu.max``: "quota period", rounded up), or None."""
    try:
        with open(path) as handle:
            quota, period = handle.read().split()[:2]
        return None if quota == "max" else max(1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        return None


def team_size(max_threads: int, running: int, cpus_in_machine: int, cpus_allowed: int,
              own_spinning: int) -> int:
    """Threads for the next call: ``max_threads`` less the other runnable threads on our CPUs.

    ``running`` counts the machine's runnable threads (the caller included, and ``own_spinning``
    team threads of ours still spinning after the last call); when this process may run on only
    some of the machine's CPUs, its share of the others is counted in proportion.
    """
    others = max(0, running - 1 - own_spinning)
    if cpus_allowed < cpus_in_machine:
        others = math.ceil(others * cpus_allowed / cpus_in_machine)
    return max(1, min(max_threads, cpus_allowed - others))


def runnable_threads(fd: int) -> int | None:
    """Runnable threads on the machine right now (the 4th field of /proc/loadavg: "running/total")."""
    try:
        return int(os.pread(fd, 128, 0).split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None


class TeamSize:
    """Sizes the kernels' thread team before a call (``enter``) and notes when the call ended
    (``leave``). ``set_threads(k)`` applies ``k``: it writes the shim's ``rs_team_threads``, which
    every kernel library reads in its parallel loops' ``num_threads`` clause (``bind``)."""

    def __init__(self, set_threads, max_threads: int, adaptive: bool, loadavg: str = "/proc/loadavg",
                 cpus_in_machine: int | None = None, spin_window_s: float = 2 * SPIN_US * 1e-6):
        self.set_threads = set_threads
        self.spin_window_s = spin_window_s
        self.max_threads = max_threads
        self.current = max_threads
        self.last_wanted = max_threads   # the previous sample's size: a drop needs two in a row
        self.last_sample = -math.inf
        self.last_leave = -math.inf
        self.applied = None
        self.cpus_in_machine = cpus_in_machine or os.cpu_count() or 1
        self.cpus_allowed = min(max_threads, self.cpus_in_machine)
        self.fd = None
        if adaptive and max_threads > 1:
            try:
                self.fd = os.open(loadavg, os.O_RDONLY)
            except OSError:   # no /proc (macOS): the team keeps max_threads
                self.fd = None

    def enter(self) -> None:
        if self.fd is not None:
            now = time.monotonic()
            if now - self.last_sample >= SAMPLE_INTERVAL_S:
                self.last_sample = now
                self.resample(now)
        if self.applied != self.current:
            self.set_threads(self.current)
            self.applied = self.current

    def resample(self, now: float) -> None:
        running = runnable_threads(self.fd)
        if running is None:
            return
        # our team threads spin for a while after a call and count as runnable meanwhile
        spinning = self.current - 1 if now - self.last_leave < self.spin_window_s else 0
        wanted = team_size(self.max_threads, running, self.cpus_in_machine, self.cpus_allowed, spinning)
        # A runnable count is one instant: on an idle machine about one sample in twelve catches a
        # passing kernel worker or timer, and halving the team for it cost idle calls 5-30%. The
        # team shrinks only when two samples in a row (5 ms apart or more) see the cores taken,
        # and grows back on the first sample that sees them free.
        self.current = max(wanted, min(self.last_wanted, self.current))
        self.last_wanted = wanted

    def leave(self) -> None:
        self.last_leave = time.monotonic()


@functools.lru_cache(maxsize=None)
def _team_cell() -> ctypes.c_int | None:
    """The shim's ``rs_team_threads``, or None without a C compiler (no kernels run then)."""
    from .blas_parallel import shim
    lib = shim()
    return None if lib is None else ctypes.c_int.in_dll(lib, "rs_team_threads")


@functools.lru_cache(maxsize=None)
def team() -> TeamSize | None:
    """The process's TeamSize, or None without a C compiler."""
    cell = _team_cell()
    if cell is None:
        return None

    def apply(threads: int) -> None:
        cell.value = threads
    return TeamSize(apply, num_threads(), adaptive=adaptive_threads(), spin_window_s=spin_window_s())


def bind(lib: ctypes.CDLL) -> None:
    """Point a kernel library's parallel loops at the team size (its ``rs_bind_team``)."""
    cell = _team_cell()
    bind_team = getattr(lib, "rs_bind_team", None)
    if cell is not None and bind_team is not None:
        bind_team.argtypes = [ctypes.c_void_p]
        bind_team.restype = None
        bind_team(ctypes.addressof(cell))


_SPIN_PROBE = r"""
#include <time.h>
static double seconds(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
/* nanoseconds per pause instruction (the unit of GOMP_SPINCOUNT), the fastest of a few tries */
double rs_pause_ns(void) {
  double best = 1e9;
  for (int attempt = 0; attempt < 5; ++attempt) {
    double start = seconds();
    for (int i = 0; i < 2000; ++i) __builtin_ia32_pause();
    double ns = (seconds() - start) * 1e9 / 2000;
    if (ns < best) best = ns;
  }
  return best;
}
"""


@functools.lru_cache(maxsize=None)
def pause_ns() -> float | None:
    """Nanoseconds per ``pause`` (3 to 120 depending on the CPU model), or None when it cannot be
    measured (not x86, no compiler)."""
    from .c.compiler import compile_shared
    import platform
    if platform.machine().lower() not in ("x86_64", "amd64", "i686", "i386"):
        return None
    try:
        path, _ = compile_shared(_SPIN_PROBE)   # no OpenMP in it: libgomp is not loaded yet
        probe = ctypes.CDLL(str(path)).rs_pause_ns
    except Exception:  # noqa: BLE001 - no compiler: libgomp keeps its default
        return None
    probe.restype = ctypes.c_double
    return max(probe(), 1.0)


def spin_count(spin_us: float = SPIN_US) -> int | None:
    """GOMP_SPINCOUNT worth ``spin_us`` on this CPU, or None when a pause cannot be timed."""
    ns = pause_ns()
    return None if ns is None else max(100, int(spin_us * 1e3 / ns))


_LIBGOMP_DEFAULT_SPINCOUNT = 300000   # with OMP_WAIT_POLICY unset
_spin_count_in_effect: list = [None]  # set by prepare_openmp


def spin_count_from_environment(env) -> float:
    """The spin count libgomp takes from ``env`` (inf: spins until work comes)."""
    count = env.get("GOMP_SPINCOUNT", "").strip().lower()
    if count == "infinite" or count == "infinity":
        return math.inf
    if count.isdigit():
        return float(count)
    policy = env.get("OMP_WAIT_POLICY", "").strip().lower()
    return {"passive": 0.0, "active": math.inf}.get(policy, float(_LIBGOMP_DEFAULT_SPINCOUNT))


def spin_window_s() -> float:
    """How long an idle team thread keeps spinning (and counts as runnable) after a call, doubled
    for safety: from the spin count libgomp was loaded with and the time of a pause."""
    count = _spin_count_in_effect[0]
    if count is None:
        count = spin_count_from_environment(os.environ)
    return 2 * count * (pause_ns() or 30.0) * 1e-9


def _libgomp_loaded() -> bool:
    """Whether a libgomp.so.1 (the soname kernels link against; PyTorch ships one) is loaded."""
    try:
        with open("/proc/self/maps") as maps:
            return any(line.rstrip().endswith(("/libgomp.so.1", "/libgomp.so.1.0.0")) for line in maps)
    except OSError:
        return False


@functools.lru_cache(maxsize=None)
def prepare_openmp() -> None:
    """Load libgomp with a bounded spin (see the module doc) before any kernel library does.

    libgomp reads GOMP_SPINCOUNT once, when it is loaded; the variable is removed again right after,
    so libraries loaded later (PyTorch's own libgomp) and child processes keep their defaults. A
    libgomp already loaded keeps its settings.
    """
    if any(name in os.environ for name in _WAIT_VARIABLES) or _libgomp_loaded():
        return   # the settings in effect are read from the environment (spin_window_s)
    count = spin_count()
    if count is None:
        return
    _spin_count_in_effect[0] = float(count)
    os.environ["GOMP_SPINCOUNT"] = str(count)
    try:
        ctypes.CDLL("libgomp.so.1")
    except OSError:
        pass
    finally:
        os.environ.pop("GOMP_SPINCOUNT", None)
