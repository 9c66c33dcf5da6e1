"""floordiv / floormod on canonical polynomials.

Every rule is an identity of floor division, valid for any integers where
the divisor is non-zero (floordiv rounds toward -inf):

* ``(d*q + r) // d == q + r // d`` and ``(d*q + r) % d == r % d``;
* ``r // c == k`` and ``r % c == r - k*c`` when ``r`` provably lies in
  ``[k*c, (k+1)*c)``;
* ``(g*r) // (g*c) == r // c`` and ``(g*r) % (g*c) == (r % c) * g``;
* ``(x // a) // b == x // (a*b)`` and ``(x % a) % b == x % b`` when ``b | a``.

Results of a rule go through the rules again, so the output is a fixed
point (simplify is idempotent).
"""
from __future__ import annotations

from math import gcd

from . import poly as P
from .interval import INF


def floordiv(s, a: dict, b: dict, dtype: str) -> dict:
    c = P.as_const(b)
    if c is None:
        return _floordiv_symbolic(s, a, b, dtype)
    if c == 0:
        return s.binary_atom("FloorDiv", a, b, dtype)
    if c < 0:
        return floordiv(s, P.scale(a, -1), P.const(-c), dtype)
    ca = P.as_const(a)
    if ca is not None:
        return P.const(ca // c)
    if c == 1:
        return a
    q = {m: k // c for m, k in a.items() if k % c == 0}
    r = {m: k for m, k in a.items() if k % c != 0}
    if not r:
        return q
    lo, hi = s.bounds.of_poly(r)
    if lo != -INF and hi != INF and lo // c == hi // c:
        return P.add(q, P.const(lo // c))
    # Terms divisible through Var facts (n with multiple_of=8) divide exactly
    # when what is left stays inside [0, c).
    exact = {m: k for m, k in r.items() if m and (k * s.bounds.divisor_of_mono(m)) % c == 0}
    if exact and len(exact) < len(r):
        rest = {m: k for m, k in r.items() if m not in exact}
        lo, hi = s.bounds.of_poly(rest)
        if lo >= 0 and hi < c:
            return P.add(q, floordiv(s, exact, b, dtype))
    g = gcd(c, P.content(r))
    if g > 1:
        return P.add(q, floordiv(s, P.exact_divide(r, g), P.const(c // g), dtype))
    nested = _single_atom_of_kind(s, r, "FloorDiv")
    if nested is not None:
        x, inner = nested
        inner_c = P.as_const(inner)
        if inner_c is not None and inner_c > 0:
            return P.add(q, floordiv(s, x, P.const(inner_c * c), dtype))
    return P.add(q, s.binary_atom("FloorDiv", r, b, dtype))


def floormod(s, a: dict, b: dict, dtype: str) -> dict:
    c = P.as_const(b)
    if c is None:
        return _floormod_symbolic(s, a, b, dtype)
    if c == 0:
        return s.binary_atom("FloorMod", a, b, dtype)
    if c < 0:  # x % c == -((-x) % -c)
        return P.scale(floormod(s, P.scale(a, -1), P.const(-c), dtype), -1)
    ca = P.as_const(a)
    if ca is not None:
        return P.const(ca % c)
    r = {}
    for m, k in a.items():
        k %= c  # coefficients reduce modulo c: the canonical residue
        if k and (not m or (k * s.bounds.divisor_of_mono(m)) % c):
            r[m] = k
    if not r:
        return {}
    lo, hi = s.bounds.of_poly(r)
    if lo != -INF and hi != INF and lo // c == hi // c:
        return P.add(r, P.const(-(lo // c) * c))
    g = gcd(c, P.content(r))
    if g > 1:
        return P.scale(floormod(s, P.exact_divide(r, g), P.const(c // g), dtype), g)
    nested = _single_atom_of_kind(s, r, "FloorMod")
    if nested is not None:
        x, inner = nested
        inner_c = P.as_const(inner)
        if inner_c is not None and inner_c > 0 and inner_c % c == 0:
            return floormod(s, x, b, dtype)
    return s.binary_atom("FloorMod", r, b, dtype)


def _split_by_monomial(a: dict, b: dict):
    """Split ``a`` into ``q, r`` with ``a == b*q + r`` for a one-term divisor ``b``."""
    if len(b) != 1:
        return {}, a
    (bm, bc), = b.items()
    q, r = {}, {}
    for m, k in a.items():
        rest = P.mono_divide(m, bm)
        if rest is not None and k % bc == 0:
            q[rest] = k // bc
        else:
            r[m] = k
    return q, r


def _in_divisor_range(s, r: dict, b: dict) -> bool:
    """``0 <= r < b`` (which also forces ``b > 0``)."""
    return s.prove_nonneg(r) and s.prove_nonneg(P.add(P.add(b, r, -1), P.const(-1)))


def _floordiv_symbolic(s, a: dict, b: dict, dtype: str) -> dict:
    q, r = _split_by_monomial(a, b)
    if not r or _in_divisor_range(s, r, b):
        return q
    return P.add(q, s.binary_atom("FloorDiv", r, b, dtype))


def _floormod_symbolic(s, a: dict, b: dict, dtype: str) -> dict:
    _, r = _split_by_monomial(a, b)
    if not r:
        return {}
    if _in_divisor_range(s, r, b):
        return r
    return s.binary_atom("FloorMod", r, b, dtype)


def _single_atom_of_kind(s, p: dict, kind: str):
    """``(x, d)`` when ``p`` is exactly the atom ``kind(x, d)``."""
    hit = P.single_atom(p)
    if hit is None or hit[1] != 1:
        return None
    info = s.atoms.info[hit[0]]
    return info.parts if info.kind == kind else None


def fold_div_mod_pairs(s, p: dict) -> dict:
    """``(x // d) * d * k + (x % d) * k -> x * k`` inside a sum, and
    ``(x // c) * c -> x`` when ``c`` provably divides ``x``."""
    for m, k in p.items():
        exact = _exact_quotient_term(s, m, k)
        if exact is not None:
            rest = {mm: kk for mm, kk in p.items() if mm is not m}
            return fold_div_mod_pairs(s, P.add(rest, exact))
        if len(m) != 1:
            continue
        (key, power), = m
        if power != 1 or not isinstance(key, tuple) or key[0] != "FloorMod":
            continue
        div_key = ("FloorDiv",) + key[1:]
        if div_key not in s.atoms.info:
            continue
        x, d = s.atoms.info[key].parts
        if len(d) != 1:
            continue
        (dm, dc), = d.items()
        div_mono = P.mono_mul(frozenset(((div_key, 1),)), dm)
        if p.get(div_mono) != k * dc:
            continue
        out = {mm: kk for mm, kk in p.items() if mm is not m and mm != div_mono}
        return fold_div_mod_pairs(s, P.add(out, P.scale(x, k)))
    return p


def _exact_quotient_term(s, m: frozenset, k: int):
    """``(x // c) * c * rest`` as ``x * rest`` when ``c`` divides every term of ``x``."""
    for key, power in m:
        if power != 1 or not isinstance(key, tuple) or key[0] != "FloorDiv":
            continue
        x, d = s.atoms.info[key].parts
        c = P.as_const(d)
        if c is None or c <= 0 or k % c:
            continue
        if all((kk * s.bounds.divisor_of_mono(mm)) % c == 0 for mm, kk in x.items()):
            rest = P.mono_divide(m, frozenset(((key, 1),)))
            return P.mul(x, {rest: k // c})
    return None
