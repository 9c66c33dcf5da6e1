"""Rule for a matmul whose weight is decoded from 8-bit integer codes on the fly
(a ``dequantize`` prologue fused in front of ``matmul``; formats and layout:
``relaxscript.quantization.formats``).

When it applies: the function's single reduction block has ``[S...]SSR`` loops
and reads, once spatial producers are inlined, a uint8/int8 parameter buffer
(the codes). Otherwise it raises ``ScheduleError`` and the next rule runs (the
plain gemm rule, which keeps operand producers materialized: right for a
transpose, but for a quantized weight that would be the float32 copy this
design exists to avoid).

What it does: every spatial producer is inlined, so each weight value is
computed from its code and block scale where the product needs it and the
float32 weight is never stored; then the gemm rule's tiling applies. Its
vector lanes run along the weight's columns (output features), which the
layout keeps adjacent, and its ``TILE_I`` unrolled rows share each decoded
vector (the compiler sees the same loads and folds them), so a prefill
decodes each weight once per four tokens and a decode step streams the codes
once, contiguously.
"""
from __future__ import annotations

from ..errors import ScheduleError
from ..schedule import Schedule
from ..schedule.state import StmtIndex
from .common import inline_spatial_intermediates, is_reduction_block, leaf_block_names
from .gemm import schedule_gemm

CODE_DTYPES = ("uint8", "int8")


def _reads_codes(sch: Schedule, name: str) -> bool:
    params = {id(b) for b in sch.func.buffer_params}
    block = StmtIndex(sch.func).realize(name).block
    return any(id(r.buffer) in params and r.buffer.dtype in CODE_DTYPES for r in block.reads)


def schedule_quantized_gemm(sch: Schedule) -> None:
    if not any(_reads_codes(sch, n) for n in leaf_block_names(sch)):
        raise ScheduleError("quantized gemm rule: no block reads 8-bit integer codes")
    inline_spatial_intermediates(sch)
    reductions = [n for n in leaf_block_names(sch) if is_reduction_block(sch, n)]
    if len(reductions) != 1 or not _reads_codes(sch, reductions[0]):
        raise ScheduleError("quantized gemm rule: the codes are not read by a single product block")
    schedule_gemm(sch)
