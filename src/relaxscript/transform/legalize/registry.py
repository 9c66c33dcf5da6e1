"""Registry of legalizations: op name -> function lowering one call to ``call_tir``.

A legalization is ``fn(ctx, call) -> Expr | None`` where ``ctx`` is the
``LegalizeContext`` of the running pass (``ctx.te(call)`` starts a
TE-style prim_func for the call, ``ctx.bb`` is the BlockBuilder) and
``call`` is the normalized ``Call``. Returning ``None`` keeps the call.
"""
from __future__ import annotations

from typing import Callable

_LEGALIZATIONS: dict[str, Callable] = {}


def register_legalize(op_name: str):
    """Decorator: ``@register_legalize("relax.add")`` registers ``fn(ctx, call)``."""
    if not op_name.startswith("relax."):
        raise ValueError(f"operator names start with 'relax.', got {op_name!r}")

    def decorator(fn: Callable) -> Callable:
        if op_name in _LEGALIZATIONS:
            raise ValueError(f"a legalization of {op_name!r} is already registered")
        _LEGALIZATIONS[op_name] = fn
        return fn
    return decorator


def get_legalize(op_name: str) -> Callable | None:
    """The registered legalization of ``op_name`` (None when the op has none)."""
    _ensure_loaded()
    return _LEGALIZATIONS.get(op_name)


def legalized_op_names() -> list[str]:
    _ensure_loaded()
    return sorted(_LEGALIZATIONS)


def _ensure_loaded() -> None:
    # Importing the package registers every op family.
    import importlib
    importlib.import_module(__package__)
