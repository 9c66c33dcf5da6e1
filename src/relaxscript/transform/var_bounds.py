"""Bounds of a function's symbolic vars given as function attributes, read by memory
planning, inlining and the VM's argument checks:

- ``relax.memory_upper_bound = {"n": 1024}`` (ours) and TVM's ``tir_var_upper_bound``
  (same meaning; where both name a var the smaller bound holds): storages are planned
  for the size at the bounds, and the VM rejects a larger value before any kernel runs;
- TVM's ``tir_var_lower_bound = {"n": 1}``: the VM rejects a smaller value, and planning
  may use it to compare sizes.

As in TVM a bad value is an error (``MemoryPlanError``): an upper bound must be a
positive int, a lower bound a non-negative int not above the upper bound, and (stricter
than TVM, which ignores them) a name must be a symbolic var of the function.
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.functor import collect

UPPER_BOUND_ATTR = "relax.memory_upper_bound"
TVM_UPPER_BOUND_ATTR = "tir_var_upper_bound"
TVM_LOWER_BOUND_ATTR = "tir_var_lower_bound"


class MemoryPlanError(ValueError):
    """A memory-planning input is invalid (e.g. a bound names no symbolic var)."""


def _bound_dict(func, attr: str, name: str, least: int) -> dict:
    bounds = func.attrs.get(attr) or {}
    if not isinstance(bounds, dict):
        raise MemoryPlanError(f"{name}: {attr} must be a dict {{name: int}}, got {bounds!r}")
    for var_name, value in bounds.items():
        if not isinstance(var_name, str):
            raise MemoryPlanError(f"{name}: {attr} keys are symbolic var names, got {var_name!r}")
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            kind = "a positive int" if least > 0 else "a non-negative int"
            raise MemoryPlanError(f"{name}: {attr}[{var_name!r}] must be {kind}, got {value!r}")
    return bounds


def var_bounds(func, name: str = "function") -> dict[str, tuple[int | None, int | None]]:
    """``{var name: (lower or None, upper or None)}`` from the function's bound attributes."""
    uppers = [_bound_dict(func, UPPER_BOUND_ATTR, name, 0),
              _bound_dict(func, TVM_UPPER_BOUND_ATTR, name, 1)]
    lowers = _bound_dict(func, TVM_LOWER_BOUND_ATTR, name, 0)
    names = set(lowers).union(*uppers)
    if not names:
        return {}
    by_name = {v.name: v for v in collect(func, lambda n: isinstance(n, E.Var))}
    out = {}
    for var_name in sorted(names):
        var = by_name.get(var_name)
        if var is None:
            raise MemoryPlanError(f"{name}: a bound attribute names {var_name!r}, which is no "
                                  f"symbolic variable of the function (it has {sorted(by_name)})")
        given = [u[var_name] for u in uppers if var_name in u]
        upper = min(given) if given else None
        lower = lowers.get(var_name)
        floor = max(lower if lower is not None else 0, var.lower or 0)
        if upper is not None and upper < floor:
            raise MemoryPlanError(f"{name}: upper bound of {var_name!r} must be an int >= {floor}, "
                                  f"got {upper!r}")
        out[var_name] = (lower, upper)
    return out


__all__ = ["var_bounds", "MemoryPlanError", "UPPER_BOUND_ATTR", "TVM_UPPER_BOUND_ATTR",
           "TVM_LOWER_BOUND_ATTR"]
