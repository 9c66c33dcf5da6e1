"""The reference interpreter's run of a prim_func with variants (``tensorir.variants``).

It runs the variant the conditions select, as the VM does. With
``RELAXSCRIPT_CHECK_VARIANTS=1`` it also runs every other applicable
version (each variant whose condition holds, and the default) on copies of
the arguments and raises ``VariantMismatchError`` when one writes different
values: a variant is an optimisation and must never change a result.
"""
from __future__ import annotations

import os

import numpy as np

import tensorir
from tensorir.errors import ShapeMismatchError
from tensorir.function import PrimFunc
from tensorir.variants import VariantError, check_variant, kernel_symbols, variant_guards

from backends.kernel_signature import bind_kernel_symbols

CHECK_ENV = "RELAXSCRIPT_CHECK_VARIANTS"


class VariantMismatchError(AssertionError):
    """Two applicable versions of one kernel wrote different values."""


def run_with_variants(func: PrimFunc, mod, arrays: list, scalars: dict) -> None:
    try:
        guards = variant_guards(func)
        versions = {}
        for _, name in guards:
            versions[name] = mod[name] if name in mod else None
            check_variant(func, name, versions[name])
    except VariantError as err:
        raise ShapeMismatchError(str(err)) from None
    symbols = dict(zip(kernel_symbols(func), bind_kernel_symbols(func.name, func, arrays, scalars)))
    applicable = [name for cond, name in guards if bool(tensorir.arith.evaluate(cond, symbols))]
    chosen = versions[applicable[0]] if applicable else func
    if os.environ.get(CHECK_ENV) != "1":
        tensorir.interpret(chosen, *arrays, **_scalars_for(chosen, func, scalars))
        return
    originals = [a.copy() for a in arrays]
    tensorir.interpret(chosen, *arrays, **_scalars_for(chosen, func, scalars))
    for other in [versions[n] for n in applicable[1:]] + ([func] if applicable else []):
        copies = [a.copy() for a in originals]
        tensorir.interpret(other, *copies, **_scalars_for(other, func, scalars))
        for i, (want, got) in enumerate(zip(arrays, copies)):
            if not np.allclose(want, got, rtol=1e-4, atol=1e-5, equal_nan=True):
                raise VariantMismatchError(
                    f"prim_func '{func.name}': version '{other.name}' wrote different values to buffer "
                    f"{i} than '{chosen.name}' (symbols {({v.name: x for v, x in symbols.items()})})")


def _scalars_for(version: PrimFunc, default: PrimFunc, scalars: dict) -> dict:
    """The default's scalar arguments under the version's parameter names (same positions)."""
    return {q.name: scalars[p.name] for p, q in zip(default.scalar_params, version.scalar_params)}
