"""What a legalization function gets: the BlockBuilder and shared, deduplicated prim_funcs."""
from __future__ import annotations

from tensorir.function import PrimFunc
from tensorir.identity_names import first_free
from tensorir.structural import structural_equal, structural_hash

from ...block_builder import BlockBuilder
from ...expr import Call, GlobalVar
from .call_cache import LegalizationCache
from .te_call import TECall


class LegalizeContext:
    """Passed to every legalization as ``ctx``.

    ``ctx.bb``: the BlockBuilder rebuilding the current function (emit helper
    bindings with it). ``ctx.te(call)``: start the prim_func of ``call``.
    ``ctx.add_prim_func(func, name)``: add a prim_func to the module, reusing
    a structurally equal one that is already there.
    """

    def __init__(self, bb: BlockBuilder):
        self.bb = bb
        self._by_hash: dict[int, list[str]] | None = None
        self.emitted: list = []            # TECall.emit records, read by the legalization cache
        self.cache = LegalizationCache()

    def te(self, call: Call) -> TECall:
        return TECall(self, call)

    def add_prim_func(self, func: PrimFunc, name_hint: str) -> GlobalVar:
        mod = self.bb.get()
        index = self._index(mod)
        key = structural_hash(func)
        for name in index.get(key, ()):
            if structural_equal(mod[name], func):
                return mod.get_global_var(name)
        name = _unique_name(mod, name_hint)
        gvar = self.bb.update_func(name, func.replace(name=name))
        index.setdefault(key, []).append(name)
        return gvar

    def _index(self, mod) -> dict[int, list[str]]:
        if self._by_hash is None:
            self._by_hash = {}
            for name, func in mod.prim_funcs.items():
                self._by_hash.setdefault(structural_hash(func), []).append(name)
        return self._by_hash


def _unique_name(mod, hint: str) -> str:
    """``hint``, else ``hint1``, ``hint2``, ... (the first one free in ``mod``)."""
    return first_free(hint, mod, separator="")
