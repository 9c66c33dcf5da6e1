"""Sum-of-products polynomials with integer coefficients: the canonical form.

A polynomial is a dict mapping a monomial to its non-zero coefficient. A
monomial is a frozenset of ``(atom_key, power)`` pairs, so it is hashable and
independent of order; the constant term sits under the empty monomial. Atom
keys are Vars (by identity) or structural tuples built from other
polynomials' keys, so equal expressions get equal polynomials.
"""
from __future__ import annotations

from math import gcd

ONE = frozenset()  # the monomial of the constant term


def const(value: int) -> dict:
    return {ONE: value} if value else {}


def atom(key) -> dict:
    return {frozenset(((key, 1),)): 1}


def as_const(p: dict):
    """The constant value of ``p`` or None when it has variable terms."""
    if not p:
        return 0
    if len(p) == 1 and ONE in p:
        return p[ONE]
    return None


def add(p: dict, q: dict, sign: int = 1) -> dict:
    out = dict(p)
    for m, c in q.items():
        v = out.get(m, 0) + sign * c
        if v:
            out[m] = v
        else:
            out.pop(m, None)
    return out


def scale(p: dict, k: int) -> dict:
    return {m: c * k for m, c in p.items()} if k else {}


def exact_divide(p: dict, k: int) -> dict:
    return {m: c // k for m, c in p.items()}


def mono_mul(a: frozenset, b: frozenset) -> frozenset:
    if not a:
        return b
    if not b:
        return a
    merged = dict(a)
    for key, power in b:
        merged[key] = merged.get(key, 0) + power
    return frozenset(merged.items())


def mono_divide(m: frozenset, d: frozenset):
    """``m / d`` when ``d`` divides ``m`` as a monomial, else None."""
    if not d:
        return m
    powers = dict(m)
    for key, power in d:
        have = powers.get(key, 0)
        if have < power:
            return None
        if have == power:
            del powers[key]
        else:
            powers[key] = have - power
    return frozenset(powers.items())


def mul(p: dict, q: dict) -> dict:
    out: dict = {}
    for m1, c1 in p.items():
        for m2, c2 in q.items():
            m = mono_mul(m1, m2)
            v = out.get(m, 0) + c1 * c2
            if v:
                out[m] = v
            else:
                out.pop(m, None)
    return out


def content(p: dict) -> int:
    """gcd of all coefficients (0 for the zero polynomial)."""
    g = 0
    for c in p.values():
        g = gcd(g, c)
    return g


def key(p: dict) -> frozenset:
    """A hashable key for ``p``; ``dict(key(p)) == p``."""
    return frozenset(p.items())


def single_atom(p: dict):
    """``(atom_key, coefficient)`` when ``p`` is ``c * atom``, else None."""
    if len(p) != 1:
        return None
    (m, c), = p.items()
    if len(m) != 1:
        return None
    (k, power), = m
    return (k, c) if power == 1 else None
