"""Reduction loops the C emitter can vectorize.

An accumulation into one element (tensorir/analysis/accumulation.py), written
as is, does not vectorize: gcc must not reassociate float additions on its
own. So the emitter keeps the element in a scalar and emits
``#pragma omp simd reduction(op:acc)``, which allows partial sums per lane
(the same reassociation ``rfactor`` makes explicitly).
"""
from __future__ import annotations

from tensorir import expr as E
from tensorir.analysis.accumulation import Accumulation, match_accumulation  # noqa: F401

# IR combiner -> OpenMP reduction identifier
OMP_OPS = {E.Add: "+", E.Mul: "*", E.Max: "max", E.Min: "min"}
