"""Multi-version kernels: a PrimFunc may name variants guarded by conditions on its symbols.

The function a call site names is the *default* variant. Its attribute
``"tir.variants"`` lists ``[condition, name]`` pairs in order; the first
condition that holds for the call's symbolic values selects the module
function ``name`` instead, and when none holds the default runs (BladeDISC
§5.2, Vortex §6.2: one compiled kernel per shape regime, chosen at run time).

A condition is a boolean PrimExpr over the symbols the kernel receives
(``kernel_sym_vars``: its buffer dims and scalar params), stored as script
text. Function attributes are plain data (compared by value, printed as
literals, written to a saved executable's JSON manifest), so the condition
is text there and becomes a PrimExpr again when read (``variant_guards``).
The names in the text are the ones a fresh ``Namer`` gives the symbols in
``kernel_sym_vars`` order, so two symbols both named ``n`` still read back
as the right one.

Every variant has the default's signature: the same buffers (dtype, rank,
dims equal position by position after mapping the symbols) and scalars, so
the caller binds the call once and any variant reads the same symbol vector.
"""
from __future__ import annotations

import ast

from . import expr as E
from .buffer import Buffer
from .function import PrimFunc
from .functor import collect, substitute

VARIANTS_ATTR = "tir.variants"


class VariantError(ValueError):
    """A malformed variant list: unknown symbol, bad condition, mismatched signature."""


def kernel_symbols(func: PrimFunc) -> list[E.Var]:
    """The symbols a kernel receives, in the calling convention's order (buffer dims, then scalars)."""
    seen: dict[int, E.Var] = {}
    for buf in func.buffer_params:
        for dim in buf.shape + buf.strides + (buf.elem_offset,):
            for v in collect(dim, lambda n: isinstance(n, E.Var)):
                seen.setdefault(id(v), v)
    for v in func.scalar_params:
        seen.setdefault(id(v), v)
    return list(seen.values())


def _symbol_names(func: PrimFunc) -> tuple[dict[str, E.Var], object]:
    from .script.expr_printer import Namer
    namer = Namer()
    names = {namer(v): v for v in kernel_symbols(func)}
    return names, namer


def condition_text(func: PrimFunc, cond) -> str:
    """``cond`` (a boolean PrimExpr over ``func``'s kernel symbols) as the text the attribute holds."""
    from .script.expr_printer import format_expr
    cond = E.convert(cond)
    names, namer = _symbol_names(func)
    symbols = {id(v) for v in names.values()}
    for v in collect(cond, lambda n: isinstance(n, E.Var)):
        if id(v) not in symbols:
            raise VariantError(f"prim_func '{func.name}': a variant condition may only use the symbols "
                               f"the kernel receives ({', '.join(names) or 'none'}), not '{v.name}'")
    if cond.dtype != "bool":
        raise VariantError(f"prim_func '{func.name}': a variant condition must be boolean, "
                           f"got {cond.dtype} {format_expr(cond, namer)}")
    return format_expr(cond, namer)


def parse_condition(func: PrimFunc, text: str) -> E.PrimExpr:
    """The condition ``text`` of one of ``func``'s variants as a PrimExpr over its kernel symbols."""
    from .errors import ParseError
    from .script.diagnostics import SourceInfo
    from .script.expr_parser import MISSING, ExprParser
    names, _ = _symbol_names(func)
    where = f"prim_func '{func.name}': variant condition {text!r}"
    if not isinstance(text, str):
        raise VariantError(f"prim_func '{func.name}': a variant condition must be text, got {text!r:.60}")
    try:
        node = ast.parse(text.strip(), mode="eval").body
        cond = ExprParser(SourceInfo.from_text(text), lambda name: names.get(name, MISSING),
                          context=where).expr(node)
    except (SyntaxError, ParseError) as err:
        raise VariantError(f"{where}: {err.msg if hasattr(err, 'msg') else err}; the kernel's symbols are "
                           f"{', '.join(names) or 'none'}") from None
    if cond.dtype != "bool":
        raise VariantError(f"{where} is not boolean ({cond.dtype})")
    return cond


def with_variants(default: PrimFunc, guards) -> PrimFunc:
    """``default`` naming its variants: ``guards`` is ``[(condition, function name), ...]``, tried in order."""
    entries = []
    for cond, name in guards:
        if not isinstance(name, str) or not name:
            raise VariantError(f"prim_func '{default.name}': a variant is named by a function name, got {name!r}")
        entries.append([condition_text(default, cond), name])
    if not entries:
        attrs = {k: v for k, v in default.attrs.items() if k != VARIANTS_ATTR}
        return default.replace(attrs=attrs)
    return default.with_attr(VARIANTS_ATTR, entries)


def variant_names(func: PrimFunc) -> list[str]:
    """Names of the functions ``func`` may run instead of itself (no parsing)."""
    entries = func.attrs.get(VARIANTS_ATTR) if isinstance(func, PrimFunc) else None
    if not entries:
        return []
    _check_entries(func, entries)
    return [name for _, name in entries]


def _check_entries(func: PrimFunc, entries) -> None:
    if not isinstance(entries, (list, tuple)) or not all(
            isinstance(e, (list, tuple)) and len(e) == 2 and isinstance(e[0], str) and isinstance(e[1], str)
            for e in entries):
        raise VariantError(f"prim_func '{func.name}': attribute {VARIANTS_ATTR!r} must be a list of "
                           f"[condition text, function name] pairs, got {entries!r:.120}")


def variant_guards(func: PrimFunc) -> list[tuple[E.PrimExpr, str]]:
    """``[(condition over func's kernel symbols, variant name), ...]``; empty when it has none."""
    entries = func.attrs.get(VARIANTS_ATTR)
    if not entries:
        return []
    _check_entries(func, entries)
    return [(parse_condition(func, text), name) for text, name in entries]


def check_variant(default: PrimFunc, name: str, variant) -> dict:
    """Raise VariantError unless ``variant`` can stand in for ``default``; returns the map from
    the variant's kernel symbols to the default's (for checks and tests)."""
    where = f"prim_func '{default.name}': variant '{name}'"
    if not isinstance(variant, PrimFunc):
        raise VariantError(f"{where} is not a prim_func of the module")
    if variant.attrs.get(VARIANTS_ATTR):
        raise VariantError(f"{where} has variants of its own; a variant list is one level deep")
    mine, theirs = kernel_symbols(default), kernel_symbols(variant)
    if len(default.params) != len(variant.params) or len(mine) != len(theirs):
        raise VariantError(f"{where}: takes {len(variant.params)} parameters and {len(theirs)} symbols, "
                           f"the default {len(default.params)} and {len(mine)}")
    vmap = dict(zip(theirs, mine))
    from .structural import structural_equal
    for i, (p, q) in enumerate(zip(default.params, variant.params)):
        if isinstance(p, Buffer) != isinstance(q, Buffer) or p.dtype != q.dtype \
                or (not isinstance(p, Buffer) and p.name != q.name):   # scalars are passed by name too
            raise VariantError(f"{where}: parameter {i} ('{q.name}') differs from the default's ('{p.name}')")
        if isinstance(p, Buffer):
            dims = [substitute(d, vmap) for d in q.shape]
            if len(dims) != len(p.shape) or not all(
                    structural_equal(a, b, map_free_vars=False) for a, b in zip(p.shape, dims)):
                raise VariantError(f"{where}: parameter '{q.name}' has shape {tuple(q.shape)}, "
                                   f"the default's '{p.name}' {tuple(p.shape)}")
    return vmap


def select_variant(func: PrimFunc, symbols: dict) -> str | None:
    """Name of the first variant whose condition holds for ``symbols`` (kernel symbol Var -> int),
    or None for the default (the interpreters' choice; the VM compiles the same test)."""
    from .arith import evaluate
    for cond, name in variant_guards(func):
        if bool(evaluate(cond, symbols)):
            return name
    return None


def _conjuncts(cond: E.PrimExpr) -> list:
    if isinstance(cond, E.And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    return [cond]


def specialize(func: PrimFunc, cond) -> PrimFunc:
    """``func`` with what ``cond`` says about its symbols made visible to schedules and lowering:
    ``v == c`` substitutes ``c`` for ``v`` in the body (the signature keeps ``v``, so the variant
    binds like the default), ``v % m == 0`` gives ``v`` the fact ``multiple_of=m`` everywhere,
    ``v <= c`` (or ``v < c + 1``) the fact ``upper=c``.
    Other conjuncts are only checked at run time by the selection. The result shares no
    binder (symbol, buffer, loop var) with ``func``: functions of one module never do, which
    structural equality of the module (and so its print/parse round trip) relies on."""
    from .script import from_source
    copy = from_source(func.script())
    cond = substitute(E.convert(cond), dict(zip(kernel_symbols(func), kernel_symbols(copy))))
    func = copy
    symbols = {id(v): v for v in kernel_symbols(func)}
    body_map, everywhere = {}, {}
    for part in _conjuncts(E.convert(cond)):
        if isinstance(part, (E.LE, E.LT)) and isinstance(part.a, E.Var) and id(part.a) in symbols \
                and isinstance(part.b, E.IntImm):
            var = everywhere.get(part.a, part.a)
            bound = part.b.value - (1 if isinstance(part, E.LT) else 0)
            upper = bound if var.upper is None else min(var.upper, bound)
            everywhere[part.a] = E.Var(var.name, var.dtype, lower=var.lower, upper=upper,
                                       multiple_of=var.multiple_of)
            continue
        if not isinstance(part, E.EQ):
            continue
        lhs, rhs = part.a, part.b
        if isinstance(rhs, E.Var) and isinstance(lhs, E.IntImm):
            lhs, rhs = rhs, lhs
        if isinstance(lhs, E.Var) and id(lhs) in symbols and isinstance(rhs, E.IntImm):
            body_map[lhs] = E.IntImm(rhs.value, lhs.dtype)
        elif isinstance(lhs, E.FloorMod) and isinstance(lhs.a, E.Var) and id(lhs.a) in symbols \
                and isinstance(lhs.b, E.IntImm) and lhs.b.value > 0 and E.is_const_int(rhs, 0):
            var = everywhere.get(lhs.a, lhs.a)
            known = var.multiple_of or 1
            multiple = known * lhs.b.value // _gcd(known, lhs.b.value)
            everywhere[lhs.a] = E.Var(var.name, var.dtype, lower=var.lower, upper=var.upper, multiple_of=multiple)
    if everywhere:
        func = substitute(func, everywhere)
        body_map = {everywhere.get(v, v): c for v, c in body_map.items()}
    if body_map:
        # buffers keep their dims (the signature binds them); loops, indices and predicates get c
        keep = {b: b for b in collect(func.body, lambda n: isinstance(n, Buffer))}
        func = func.with_body(substitute(func.body, {**keep, **body_map}))
    return func


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a
