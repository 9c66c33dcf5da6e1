"""TensorIR schedules: primitives that transform a PrimFunc's loop nest
while preserving what it computes, recorded in a replayable trace."""
from ..errors import ScheduleError
from .schedule import Schedule
from .state import BlockRV, LoopRV
from .trace import Instruction, Trace

__all__ = ["Schedule", "ScheduleError", "BlockRV", "LoopRV", "Trace", "Instruction"]
