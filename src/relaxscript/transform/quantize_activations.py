"""QuantizeActivations: round the left operand of every matmul whose weight is an
``R.dequantize`` to 8-bit block codes (``R.fake_quantize``), as llama.cpp does.

    w = R.dequantize(qd, qs, qm, format="q4_1")          w = R.dequantize(qd, qs, qm, format="q4_1")
    y = R.matmul(x, w)                          ->       xq = R.fake_quantize(x, format="q8_0")
                                                         y = R.matmul(xq, w)

One ``fake_quantize`` per matmul, bound just before it, even when matmuls share ``x``: each
then fuses into its own matmul's kernel as a prologue (as each ``R.dequantize`` does), where
the generated one-token GEMV computes the codes once per call and multiplies integer codes
(``backends/c/quantized_gemv.py``). One shared call would be stored as float32 between
kernels and only its first consumer would see the rounding.

Opt-in (it changes results by the activations' rounding): ``nn.ExportSpec(activations="q8")``
and ``llm.Engine.from_gguf(..., activations="q8")`` apply it. Matmuls whose left operand's
last axis is not provably whole 32-value blocks, or whose operand is not float32, stay as
they are.
"""
from __future__ import annotations

from tensorir import expr as tir

from ..expr import Call, Op, Var, VarBinding
from ..expr_functor import PassMutator
from ..irmodule import IRModule
from ..op.quantize_activations import fake_quantize
from ..quantization.activations import activation_block
from ..struct_info import TensorStructInfo
from .pass_infra import Pass


class QuantizeActivations(Pass):
    """Put ``R.fake_quantize(x, format)`` in front of each ``matmul(x, R.dequantize(...))``."""
    name = "QuantizeActivations"

    def __init__(self, format: str = "q8_0"):  # noqa: A002 - the op's attribute name
        self.block = activation_block(format)
        self.format = format

    def transform_module(self, mod: IRModule, ctx) -> IRModule:
        return _Inserter(mod, self.format, self.block).transform_module(mod)


def _is_op(value, name: str) -> bool:
    return isinstance(value, Call) and isinstance(value.op, Op) and value.op.name == name


class _Inserter(PassMutator):
    def __init__(self, mod: IRModule, fmt: str, block: int):
        super().__init__(mod)
        self.format, self.block = fmt, block
        self.dequantized: set = set()    # vars bound to an R.dequantize call

    def visit_binding(self, binding):
        value = binding.value
        if isinstance(binding, VarBinding) and _is_op(value, "relax.dequantize"):
            self.dequantized.add(binding.var)
        if isinstance(binding, VarBinding) and _is_op(value, "relax.matmul") and \
                value.args[1] in self.dequantized and self._whole_blocks(value.args[0]):
            x = self.visit_expr(value.args[0])
            rounded = self.builder.emit(fake_quantize(x, format=self.format), "xq")
            new = Call(value.op, [rounded, self.visit_expr(value.args[1])], value.attrs)
            self.var_remap[binding.var] = self._rebind(binding.var, self.builder.normalize(new))
            return None
        return super().visit_binding(binding)

    def _whole_blocks(self, x) -> bool:
        sinfo = x.struct_info
        if not isinstance(x, Var) or not isinstance(sinfo, TensorStructInfo) or sinfo.dtype != "float32" \
                or sinfo.shape is None or not sinfo.shape:
            return False
        last = sinfo.shape[-1]
        return isinstance(last, tir.IntImm) and last.value % self.block == 0
