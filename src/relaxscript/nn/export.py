"""``export(module, spec) -> IRModule``: trace each method of a Module into a graph function.

Every function takes the method's inputs, then every Parameter of the module
by its dotted name made an identifier (``layers.0.attn.q_proj.weight`` ->
``layers_0_attn_q_proj_weight``). Weights are parameters rather than
constants so one compiled module serves any checkpoint, the printed module
stays small, and the VM receives NumPy arrays it uses without copying
(``Exported.param_names`` gives their order). The body is one dataflow
block; ``forward`` returns an expression or a tuple of them.
"""
from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass

from tensorir.expr import size_var

from ..block_builder import BlockBuilder
from ..expr import Expr, Tuple, Var
from ..irmodule import IRModule
from ..struct_info import ShapeStructInfo, TensorStructInfo
from ..transform.static_plan_block_memory import UPPER_BOUND_ATTR
from .module import Module
from .spec import ACTIVATIONS, ExportSpec, Tensor

NUM_INPUT_ATTR = "num_input"

_ACTIVE: list[BlockBuilder] = []


class _TracingBuilder(BlockBuilder):
    """A BlockBuilder that binds each traced expression once.

    ``forward`` code builds expression trees whose nodes it reuses (``pairs``
    read for the even and the odd half, a layer's input read by the norm and
    the residual); plain A-normalization would bind a shared subtree once per
    use, duplicating its computation (exponentially over stacked layers).
    """

    def __init__(self):
        super().__init__()
        self._bound_exprs: dict[int, tuple] = {}   # id(expr) -> (expr kept alive, its var)

    def forget_traced(self) -> None:
        self._bound_exprs.clear()

    def normalize_argument(self, expr):
        hit = self._bound_exprs.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        result = super().normalize_argument(expr)
        if result is not expr:
            self._bound_exprs[id(expr)] = (expr, result)
        return result

    def emit(self, expr, name_hint: str = "lv"):
        hit = self._bound_exprs.get(id(expr))
        if hit is not None and hit[0] is expr:
            return hit[1]
        var = super().emit(expr, name_hint)
        self._bound_exprs[id(expr)] = (expr, var)
        return var


def builder() -> BlockBuilder:
    """The BlockBuilder of the method being exported (to add prim_funcs, name bindings)."""
    if not _ACTIVE:
        raise RuntimeError("nn.builder() is only available while nn.export traces a method")
    return _ACTIVE[-1]


def emit(expr: Expr, name: str = "lv") -> Var:
    """Bind ``expr`` under ``name`` in the function being exported."""
    return builder().emit(expr, name)


def identifier(dotted: str) -> str:
    name = re.sub(r"\W", "_", dotted)
    return name if name and not name[0].isdigit() else f"p_{name}"


@dataclass(frozen=True)
class Exported:
    """The IRModule and, per function, the names of its weight parameters in order."""
    mod: IRModule
    param_names: tuple     # dotted Parameter names, the order the functions take them
    num_inputs: dict       # function name -> number of inputs before the weights


def export(module: Module, spec: ExportSpec | dict, dims: dict | None = None) -> Exported:
    """Trace ``spec.methods`` of ``module``; ``spec`` may also be ``{method: inputs}`` with ``dims``."""
    if not isinstance(spec, ExportSpec):
        spec = ExportSpec(dict(spec), dict(dims or {}))
    named = list(module.named_parameters())
    bb = _TracingBuilder()
    num_inputs = {}
    for method, inputs in spec.methods.items():
        fn = getattr(module, method, None)
        if not callable(fn):
            raise AttributeError(f"nn.export: {type(module).__name__} has no method {method!r}")
        sym = {}

        def dim(d, where, sym=sym):   # sym: this function's vars (bound now, not at loop end)
            if isinstance(d, int):
                return d
            if d not in spec.dims:
                raise ValueError(f"nn.export: {where} uses symbolic dim {d!r}, which the spec's "
                                 f"dims do not declare (with its upper bound)")
            if d not in sym:
                sym[d] = size_var(d, upper=spec.dims[d], lower=spec.lower.get(d, 0))
            return sym[d]

        input_vars = []
        for arg, value in inputs.items():
            if isinstance(value, Tensor):
                sinfo = TensorStructInfo([dim(d, f"{method}({arg})") for d in value.shape], value.dtype)
            else:
                sinfo = ShapeStructInfo([dim(d, f"{method}({arg})") for d in value.dims])
            input_vars.append(Var(arg, sinfo))
        weight_vars = {}
        for name, param in named:
            shape = [dim(d, f"parameter {name}") for d in param.shape]
            weight_vars[param] = Var(identifier(name), TensorStructInfo(shape, param.dtype))
        attrs = {NUM_INPUT_ATTR: len(input_vars)}
        if sym:
            attrs[UPPER_BOUND_ATTR] = {d: spec.dims[d] for d in sym}
        bb.forget_traced()                 # a var of another function is not in scope here
        with _tracing(bb, module, weight_vars), \
                bb.function(method, input_vars + list(weight_vars.values()), attrs=attrs):
            with bb.dataflow():
                result = fn(*input_vars)
                if isinstance(result, (list, tuple)):
                    result = Tuple([bb.normalize_argument(r) for r in result])
                out = bb.emit_output(result, "out")
            bb.emit_func_output(out)
        num_inputs[method] = len(input_vars)
    mod = bb.get()
    if ACTIVATIONS[spec.activations] is not None:
        from ..transform.quantize_activations import QuantizeActivations
        mod = QuantizeActivations(ACTIVATIONS[spec.activations])(mod)
    return Exported(mod, tuple(name for name, _ in named), num_inputs)


@contextlib.contextmanager
def _tracing(bb: BlockBuilder, module: Module, weight_vars: dict):
    _ACTIVE.append(bb)
    module.bind_parameters(weight_vars)
    try:
        yield
    finally:
        module.bind_parameters(None)
        _ACTIVE.pop()
