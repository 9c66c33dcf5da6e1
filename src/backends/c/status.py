"""What a generated kernel returns, and the Python exception each failure becomes."""
from __future__ import annotations

from tensorir.errors import (AllocationError, IndexOutOfRangeError, KernelAssertionError,
                             KernelDivisionByZeroError, NegativeIntegerPowerError)

STATUS_OK = 0
STATUS_NO_MEMORY = -1        # a scratch buffer's malloc failed
STATUS_ZERO_DIVISION = -2    # an integer divisor was zero (the kernel finished with 0 in its place)
STATUS_INDEX_OUT_OF_RANGE = -3  # a T.checked_index value was outside its axis (the kernel finished
#                                 reading index 0 in its place; the first bad value is reported)
STATUS_ASSERT_FAILED = -4    # an assert's condition was false (the kernel stopped there; its
#                              message is reported, see rs_assert_failure)
STATUS_NEGATIVE_POWER = -5   # T.int_pow's exponent was negative (the element finished as 0)

C_DEFINES = (f"#define STATUS_OK {STATUS_OK}\n#define STATUS_NO_MEMORY {STATUS_NO_MEMORY}\n"
             f"#define STATUS_ZERO_DIVISION {STATUS_ZERO_DIVISION}\n"
             f"#define STATUS_INDEX_OUT_OF_RANGE {STATUS_INDEX_OUT_OF_RANGE}\n"
             f"#define STATUS_ASSERT_FAILED {STATUS_ASSERT_FAILED}\n"
             f"#define STATUS_NEGATIVE_POWER {STATUS_NEGATIVE_POWER}\n")


# A GPU kernel's status buffer: the int32 status word; an int32 that a failing assert raises to
# ASSERT_NUMBER_BASE - its number (atomic max: the first failing assert in program order wins; its
# message is in the launch plan); then the int64 index and extent a STATUS_INDEX_OUT_OF_RANGE
# recorded. The runtime zeroes the first DEVICE_STATUS_CLEARED bytes before a function's launches
# and reads the rest only after the matching status.
DEVICE_STATUS_BYTES = 24
DEVICE_STATUS_CLEARED = 8
ASSERT_NUMBER_BASE = 1 << 30


def failed_assert_number(recorded: int) -> int:
    """The assert number a GPU status buffer's second int32 holds."""
    return ASSERT_NUMBER_BASE - int(recorded)


def device_status_readers(read_words, assert_message_of):
    """``(bad_index, assert_message)`` for ``raise_for_status`` over a GPU status buffer:
    ``read_words()`` copies the buffer to the host as int64 words, ``assert_message_of(number)``
    is the launch plan's message for an assert number."""
    def bad_index() -> tuple[int, int]:
        words = read_words()
        return int(words[1]), int(words[2])

    def assert_message():
        return assert_message_of(failed_assert_number(read_words()[0:1].view("int32")[1]))
    return bad_index, assert_message


def raise_for_status(status: int, where: str, bad_index=None, assert_message=None) -> None:
    """Raise the error a kernel's nonzero ``status`` stands for; ``where`` names function and kernel;
    ``bad_index()`` gives the (value, extent) an index failure recorded, ``assert_message()`` the
    message of the assert that failed."""
    if status == STATUS_OK:
        return
    if status == STATUS_ASSERT_FAILED:
        message = assert_message() if assert_message is not None else None
        raise KernelAssertionError(f"{where}: {message or 'assertion failed'}")
    if status == STATUS_ZERO_DIVISION:
        raise KernelDivisionByZeroError(f"{where}: integer division by zero")
    if status == STATUS_NEGATIVE_POWER:
        raise NegativeIntegerPowerError(f"{where}: integers to negative integer powers are not allowed")
    if status == STATUS_INDEX_OUT_OF_RANGE:
        value, extent = bad_index() if bad_index is not None else (None, None)
        if value is None:
            raise IndexOutOfRangeError(f"{where}: an index is out of range")
        raise IndexOutOfRangeError(f"{where}: index {value} is out of range for an axis of size {extent}")
    if status == STATUS_NO_MEMORY:
        raise AllocationError(f"{where} failed to allocate its scratch memory")
    raise RuntimeError(f"{where} returned the unknown status {status}")
