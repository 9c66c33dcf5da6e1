"""Run every benchmark script in this folder, one after another, in one process each, then the
ablation report (each optimization switched on and off, per workload)."""
from __future__ import annotations

import pathlib
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent


def main() -> int:
    failures = 0
    for script in sorted(HERE.glob("bench_*.py")):
        print(f"\n=== {script.name}", flush=True)
        failures += subprocess.call([sys.executable, str(script), *sys.argv[1:]]) != 0
    print("\n=== ablation_report.py", flush=True)
    failures += subprocess.call([sys.executable, str(HERE / "ablation_report.py")]) != 0
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
