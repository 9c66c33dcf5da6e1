"""What a generated kernel returns, and the Python exception each failure becomes."""
from __future__ import annotations

from tensorir.errors import AllocationError, KernelDivisionByZeroError

STATUS_OK = 0
STATUS_NO_MEMORY = -1        # a scratch buffer's malloc failed
STATUS_ZERO_DIVISION = -2    # an integer divisor was zero (the kernel finished with 0 in its place)

C_DEFINES = (f"#define STATUS_OK {STATUS_OK}\n#define STATUS_NO_MEMORY {STATUS_NO_MEMORY}\n"
             f"#define STATUS_ZERO_DIVISION {STATUS_ZERO_DIVISION}\n")


def raise_for_status(status: int, where: str) -> None:
    """Raise the error a kernel's nonzero ``status`` stands for; ``where`` names function and kernel."""
    if status == STATUS_OK:
        return
    if status == STATUS_ZERO_DIVISION:
        raise KernelDivisionByZeroError(f"{where}: integer division by zero")
    if status == STATUS_NO_MEMORY:
        raise AllocationError(f"{where} failed to allocate its scratch memory")
    raise RuntimeError(f"{where} returned the unknown status {status}")
