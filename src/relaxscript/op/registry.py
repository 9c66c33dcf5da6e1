"""Operator registry of the graph level.

Each operator has one ``OpSpec``: its name (``relax.<R path>``), a
deduction rule ``infer(call, ctx) -> StructInfo``, a NumPy reference, a
purity flag and the ordered names of its keyword attributes (the printer
prints ``R.<path>(args..., attr=value, ...)`` in that order and the parser
calls the constructor back with them).

Deduction is independent of any block builder: ``infer`` reads only the
annotations of the call's arguments and the ``DeductionContext``.

NumPy references receive arguments as the interpreter holds them: tensors
as ndarrays, shape values as tuples of ints, scalars (``PrimValue``) as
Python numbers, tuples as tuples; attributes as keyword arguments.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from tensorir.errors import IRError

from ..expr import Op


class OpDeductionError(IRError):
    """An operator's arguments have conflicting or invalid annotations."""


class OpAttributeError(ValueError):
    """An operator attribute (axis, dtype, ...) is invalid."""


@dataclass(frozen=True)
class OpSpec:
    name: str
    infer: Callable
    reference: Callable | None  # None for calls whose meaning lives elsewhere (call_tir)
    pure: bool = True
    attr_names: tuple[str, ...] = ()
    constructor: Callable | None = field(default=None, compare=False)
    # the attrs the reference runs with, from the call (None: the call's own): where the meaning
    # depends on the deduction (squeeze without axes drops the dims known to be 1)
    reference_attrs: Callable | None = field(default=None, compare=False)

    @property
    def path(self) -> str:
        """The dotted R path, e.g. ``nn.softmax`` for ``relax.nn.softmax``."""
        return self.name[len("relax."):]


_SPECS: dict[str, OpSpec] = {}
_OPS: dict[str, Op] = {}


def register_op(name: str, infer: Callable, reference: Callable | None, *, pure: bool = True,
                attr_names: tuple[str, ...] = (), constructor: Callable | None = None,
                reference_attrs: Callable | None = None) -> OpSpec:
    if not name.startswith("relax."):
        raise ValueError(f"operator names start with 'relax.', got {name!r}")
    if name in _SPECS:
        raise ValueError(f"operator {name!r} is already registered")
    spec = OpSpec(name, infer, reference, pure, tuple(attr_names), constructor, reference_attrs)
    _SPECS[name] = spec
    _OPS[name] = Op(name)
    return spec


def _ensure_loaded() -> None:
    # Importing the package registers every operator family.
    import importlib
    importlib.import_module(__package__)


def get_op_spec(name: str) -> OpSpec:
    if name not in _SPECS:
        _ensure_loaded()
    try:
        return _SPECS[name]
    except KeyError:
        raise OpDeductionError(f"unknown operator {name!r}") from None


def reference_attrs(call) -> dict:
    """The attrs ``call``'s reference runs with (the interpreter, the VM's fallback)."""
    spec = get_op_spec(call.op.name)
    return spec.reference_attrs(call) if spec.reference_attrs is not None else dict(call.attrs)


def get_op(name: str) -> Op:
    """The single ``Op`` object of ``name``."""
    get_op_spec(name)
    return _OPS[name]


def all_op_specs() -> list[OpSpec]:
    _ensure_loaded()
    return [_SPECS[k] for k in sorted(_SPECS)]


class DeductionContext:
    """What ``infer`` may use besides the arguments: an analyzer and a way to fail.

    ``location`` (e.g. ``"model.py:12"``) is appended to error messages when
    the caller knows the source line of the call.
    """

    def __init__(self, analyzer=None, location: str | None = None):
        if analyzer is None:
            from ._infer_util import make_analyzer
            analyzer = make_analyzer()
        self.analyzer = analyzer
        self.location = location

    def error(self, message: str):
        where = f" (at {self.location})" if self.location else ""
        raise OpDeductionError(message + where)
