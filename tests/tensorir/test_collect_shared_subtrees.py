"""collect and used_names on IR with shared subtrees: each distinct node is
expanded once (cost grows with nodes, not paths) and the result is the same
as a walk over every occurrence."""
from __future__ import annotations

from tensorir import functor
from tensorir.expr import Add, Mul, Var
from tensorir.functor import children, collect, post_order
from tensorir.schedule.state import used_names


def _doubling_chain(depth: int):
    """x, then e + e (one shared child) ``depth`` times: 2**depth paths, depth + 1 nodes."""
    expr = Var("x")
    for _ in range(depth):
        expr = Add(expr, expr)
    return expr


def _collect_every_occurrence(node, predicate):
    """The reference: walk every occurrence, keep first occurrences."""
    seen, out = set(), []

    def visit(n):
        if predicate(n) and id(n) not in seen:
            seen.add(id(n))
            out.append(n)
    post_order(node, visit)
    return out


def test_collect_expands_each_distinct_node_once(monkeypatch):
    calls = []

    def counting_children(node):
        calls.append(node)
        return children(node)
    monkeypatch.setattr(functor, "children", counting_children)   # collect's child lists
    expr = _doubling_chain(40)  # 2**40 paths: a walk over every occurrence would never end
    found = collect(expr, lambda n: True)
    assert len(found) == 41
    assert len(calls) == 41


def test_collect_order_matches_walk_over_every_occurrence():
    x, y, z = Var("x"), Var("y"), Var("z")
    shared = Mul(Add(x, y), z)
    expr = Add(Add(shared, Mul(y, shared)), Add(z, Mul(shared, x)))
    for predicate in (lambda n: True, lambda n: isinstance(n, Var), lambda n: isinstance(n, Add)):
        assert collect(expr, predicate) == _collect_every_occurrence(expr, predicate)


def test_used_names_is_every_name_and_a_fresh_copy():
    from tensorir import compute
    from tensorir.buffer import Buffer
    from tensorir.stmt import Block
    n = Var("n")
    a = compute.placeholder((n, 4), "float32", name="A")
    b = compute.compute((n, 4), lambda i, j: a[i, j] * 2.0, name="B")
    func = compute.create_prim_func([a, b])
    expected = {v.name for v in _collect_every_occurrence(func, lambda x: isinstance(x, Var))}
    expected |= {v.name for v in _collect_every_occurrence(func, lambda x: isinstance(x, (Block, Buffer)))}
    expected |= {p.name for p in func.params}
    first = used_names(func)
    assert first == expected and {"n", "A", "B"} <= first
    first.add("taken_by_caller")  # callers extend their copy; the remembered names stay
    assert used_names(func) == expected
