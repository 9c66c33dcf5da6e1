"""Schedule rule of the fused attention kernel (marked ``relax.fused_attention``).

Every (head, query row) pair is independent, so the two outer loops are fused
and shared by the threads; the key loop stays sequential inside a row (the
online softmax carries its running max and sum from one key to the next), and
the head-dim loops are left innermost for the C compiler to vectorize.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..schedule import Schedule

ATTENTION_ATTR = "relax.fused_attention"
# buffer positions, key/value axis orders and mask kind, for a target's generated kernel
# (backends/c/attention.py); the loop nest stays the function's meaning
ATTENTION_LAYOUT_ATTR = "c.fused_attention"


def schedule_attention(sch: Schedule) -> None:
    if not sch.func.attrs.get(ATTENTION_ATTR):
        raise ScheduleError("not a fused attention kernel")
    head, row = sch.get_loops(sch.get_block("row_start"))[:2]
    sch.parallel(sch.fuse(head, row))
