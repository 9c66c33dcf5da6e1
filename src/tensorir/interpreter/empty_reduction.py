"""Empty reductions: the interpreter runs a reduction's init where lowering puts it.

Upstream TensorIR runs a block's ``init`` when every reduce var is at its
minimum, so a reduction over an empty extent (a symbolic ``m = 0``) never
runs it and leaves the output unwritten. Lowering places the init before
the reduction loops where that is legal (``transform/hoist_init.py``), so
compiled code writes the identity (0 for a sum, -inf for a max), as NumPy's
``sum`` does. The interpreter agrees: a loop nest with such a reduction and
an empty extent runs in its hoisted form. Non-empty nests keep their form
(the same result; the perfect nest stays vectorisable).
"""
from __future__ import annotations

from ..expr import Var
from ..functor import collect
from ..stmt import For

_FORMS: dict[int, tuple] = {}   # id(For) -> (For, hoisted form or None)
_BOUND: dict[int, tuple] = {}   # id(func) -> (func, ids of its loop and iter vars)
_CACHE_LIMIT = 4096


def _remember(cache: dict, key, value):
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[id(key)] = (key, value)
    return value


def hoisted_form(func, loop: For):
    """``loop`` with its inits hoisted, or None when nothing in it is hoisted."""
    cached = _FORMS.get(id(loop))
    if cached is not None and cached[0] is loop:
        return cached[1]
    from ..transform.hoist_init import bound_var_ids, hoist_inits
    bound = _BOUND.get(id(func))
    if bound is None or bound[0] is not func:
        bound = (func, _remember(_BOUND, func, bound_var_ids(func.body)))
    hoisted = hoist_inits(loop, bound[1])
    return _remember(_FORMS, loop, None if hoisted is loop else hoisted)


def nest_is_empty(ex, loop: For) -> bool:
    """Whether a loop of the perfect nest from ``loop`` has no iteration (extents that depend
    on the nest's own loop vars are left to the inner loop's turn)."""
    loops = [loop]
    while isinstance(loops[-1].body, For):
        loops.append(loops[-1].body)
    own = {id(lp.loop_var) for lp in loops}
    for lp in loops:
        if collect(lp.extent, lambda n: isinstance(n, Var) and id(n) in own):
            continue
        if ex.eval_int(lp.extent) <= 0:
            return True
    return False
