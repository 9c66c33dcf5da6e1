"""llvm_intrinsics: the LLVM intrinsic calls a kernel may run here, as this project's own ops.

TVMScript names LLVM intrinsics directly (``T.call_llvm_pure_intrin(
T.llvm_lookup_intrinsic_id("llvm.ctpop.i8"), x, dtype="uint8")``); they parse and print as
written. A build runs only those with an exact equivalent on every target: the generic
integer and floating-point intrinsics below, by their name without the type suffix
("llvm.ctpop.i8" -> "llvm.ctpop"), with the result dtype the operand's. An optional leading
``T.uint32(n)`` (older TVM's count of signature arguments) is dropped. Any other intrinsic
(a numeric id, a target-specific one such as "llvm.x86.*" or "llvm.aarch64.*") is an
``IRError`` naming the function and the intrinsic: there is no portable meaning to run.
"""
from __future__ import annotations

from .. import expr as E
from ..dispatch import handles
from ..errors import IRError
from ..functor import Mutator, collect

# LLVM name (no type suffix) -> this project's intrinsic of the same meaning.
_SAME = {
    "llvm.ctpop": "popcount", "llvm.sqrt": "sqrt", "llvm.fabs": "abs", "llvm.exp": "exp",
    "llvm.exp2": "exp2", "llvm.log": "log", "llvm.log2": "log2", "llvm.floor": "floor",
    "llvm.ceil": "ceil", "llvm.trunc": "trunc", "llvm.sin": "sin", "llvm.cos": "cos",
    "llvm.pow": "pow", "llvm.copysign": "copysign",
}


def _base_name(name: str) -> str:
    """"llvm.ctpop.i8" -> "llvm.ctpop"; "llvm.sqrt.v4f32" -> "llvm.sqrt" (type suffixes dropped)."""
    parts = name.split(".")
    while len(parts) > 2 and parts[-1][:1] in ("i", "f", "v", "p") and any(c.isdigit() for c in parts[-1]):
        parts.pop()
    return ".".join(parts)


def describe(call: E.Call) -> str:
    ident = call.args[0]
    return repr(ident.value) if isinstance(ident, (E.StringImm, E.IntImm)) else "?"


class _Lower(Mutator):
    def __init__(self, func_name: str):
        super().__init__()
        self.func_name = func_name

    @handles(E.Call)
    def call(self, e: E.Call):
        e = self.generic_visit(e)
        if e.op not in E.LLVM_INTRIN_OPS:
            return e
        ident = e.args[0] if e.args else None
        ours = _SAME.get(_base_name(ident.value)) if isinstance(ident, E.StringImm) else None
        args = list(e.args[1:])
        if ours is not None and len(args) == E.INTRINSICS[ours] + 1 and isinstance(args[0], E.IntImm) \
                and args[0].dtype == "uint32":
            args = args[1:]   # older TVM's count of signature arguments
        if ours is None or len(args) != E.INTRINSICS[ours]:
            raise IRError(f"prim_func {self.func_name!r} calls LLVM intrinsic {describe(e)} "
                          f"(T.{e.op[4:]}): only the generic ones with a meaning on every target run "
                          f"here ({', '.join(sorted(_SAME))})")
        try:
            out = E.call_intrin(ours, *args)
        except (TypeError, ValueError) as err:
            raise IRError(f"prim_func {self.func_name!r}: LLVM intrinsic {describe(e)}: {err}") from None
        if out.dtype != e.dtype:
            raise IRError(f"prim_func {self.func_name!r}: LLVM intrinsic {describe(e)} is declared "
                          f"{e.dtype} but computes {out.dtype} from its operands")
        return out


def lower_llvm_intrinsics(func):
    """``func`` with its LLVM intrinsic calls replaced by this project's ops (see module doc)."""
    if not collect(func.body, lambda n: isinstance(n, E.Call) and n.op in E.LLVM_INTRIN_OPS):
        return func
    return func.with_body(_Lower(func.name).visit(func.body))
