"""Shape constraint facts (BladeDISC section 3.1): deduction with facts, and
ApplyShapeConstraints' Before/Expected cases, fusion across regrouping
reshapes, checks removed and kept, wrong inputs still raising, and random
programs against the interpreter."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript.shape_facts import ShapeFacts, shape_facts_disabled
from relaxscript.transform import ApplyShapeConstraints, PassContext
from relaxscript.vm.instructions import CallKernel, MatchValues
from tensorir import expr as E


def _parse(src):
    return rx.from_source(src)


def _apply(mod):
    p = ApplyShapeConstraints()
    out = p(mod)
    rx.assert_structural_equal(rx.from_source(out.script()), out)   # prints and re-parses
    assert rx.analysis.well_formed(out)
    return out, p.stats


# ---------------------------------------------------------------- the facts themselves
def test_facts_bind_a_var_to_an_expression_and_prove_inside_larger_ones():
    a, b, c = (E.Var(n, "int64") for n in "abc")
    facts = ShapeFacts()
    assert facts.add_equal(a * b, c, "test")
    assert facts.equal(c, a * b) and facts.equal(c * 4 + 1, b * a * 4 + 1)
    assert not facts.add_equal(c, b * a, "again")      # already known: no new fact
    assert len(facts) == 1 and not facts.equal(a, c)


def test_facts_product_classes_of_composite_expressions():
    a, b, c, d, e = (E.Var(n, "int64") for n in "abcde")
    facts = ShapeFacts()
    facts.add_equal(a * b, c * d, "regroup")
    assert facts.equal(c * d, a * b) and not facts.equal(a * b, c)
    facts.add_equal(c * d, e * 2, "more")
    assert facts.equal(a * b, e * 2)                   # one class: transitive


# ---------------------------------------------------------------- deduction with facts
ASSERT_FACT = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c",), "float32")):
        a = T.int64()
        b = T.int64()
        c = T.int64()
        R.assert_op(R.prim_value(a * b == c), format="a * b must equal c")
        with R.dataflow():
            e = R.exp(x)
            r = R.reshape(e, R.shape([a * b]))
            z = R.add(r, y)
            R.output(z)
        return z
'''


def test_assert_fact_gives_the_broadcast_a_shape():
    z = _parse(ASSERT_FACT)["main"].body.blocks[1].bindings[-1].var
    assert z.struct_info.shape is not None and len(z.struct_info.shape) == 1
    with shape_facts_disabled():
        coarse = _parse(ASSERT_FACT)["main"].body.blocks[1].bindings[-1].var
    assert coarse.struct_info.shape is None and coarse.struct_info.ndim == 1


def test_a_fact_inside_an_if_branch_does_not_hold_after_it():
    src = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(("m",), "float32"), flag: R.Prim("bool")):
        n = T.int64()
        m = T.int64()
        if flag:
            y2 = R.match_cast(y, R.Tensor((n,), "float32"))
            w = y2
        else:
            w = x
        z = R.add(x, y)
        return z
'''
    z = _parse(src)["main"].body.blocks[-1].bindings[-1].var
    assert z.struct_info.shape is None


# ---------------------------------------------------------------- Before / Expected
TIGHTEN_BEFORE = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c",), "float32")):
        a = T.int64()
        b = T.int64()
        c = T.int64()
        R.assert_op(R.prim_value(a * b == c), format="a * b must equal c")
        with R.dataflow():
            r: R.Tensor((a * b,), "float32") = R.reshape(x, R.shape([a * b]))
            z: R.Tensor(ndim=1, dtype="float32") = R.add(r, y)
            R.output(z)
        return z
'''

TIGHTEN_EXPECTED = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c",), "float32")):
        a = T.int64()
        b = T.int64()
        c = T.int64()
        R.assert_op(R.prim_value(a * b == c), format="a * b must equal c")
        with R.dataflow():
            r: R.Tensor((a * b,), "float32") = R.reshape(x, R.shape([a * b]))
            z: R.Tensor((a * b,), "float32") = R.add(r, y)
            R.output(z)
        return z
'''


def test_before_expected_annotation_tightened_by_an_assert_fact():
    after, stats = _apply(_parse(TIGHTEN_BEFORE))
    rx.assert_structural_equal(after, _parse(TIGHTEN_EXPECTED))
    assert stats["main"].tightened == ["z"]
    assert [f.source for f in stats["main"].facts] == ["R.assert_op"]


CAST_BEFORE = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 2), "float32"), y: R.Tensor(("c",), "float32")):
        n = T.int64()
        c = T.int64()
        with R.dataflow():
            r = R.reshape(x, R.shape([n * 2]))
            m1 = R.match_cast(r, R.Tensor(("m",), "float32"))
            s = R.reshape(m1, R.shape([m, 1]))
            y2 = R.match_cast(y, R.Tensor((n * 2,), "float32"))
            y3 = R.match_cast(y2, R.Tensor((m,), "float32"))
            z = R.add(s, R.reshape(y3, R.shape([m, 1])))
            R.output(z)
        return z
'''

CAST_EXPECTED = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 2), "float32"), y: R.Tensor(("c",), "float32")):
        n = T.int64()
        c = T.int64()
        with R.dataflow():
            r = R.reshape(x, R.shape([n * 2]))
            m1 = r
            s = R.reshape(m1, R.shape([n * 2, 1]))
            y2 = R.match_cast(y, R.Tensor((n * 2,), "float32"))
            y3 = y2
            lv = R.reshape(y3, R.shape([n * 2, 1]))
            z = R.add(s, lv)
            R.output(z)
        return z
'''


def test_before_expected_implied_match_casts_become_plain_bindings():
    after, stats = _apply(_parse(CAST_BEFORE))
    rx.assert_structural_equal(after, _parse(CAST_EXPECTED))
    # m1 only names m = n * 2 (known); y3's dim is proven by y2's check; y2 itself is a real check
    assert stats["main"].casts_removed == ["m1", "y3"]


def test_a_new_var_with_a_bound_keeps_its_check():
    src = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        m = T.int64(upper=8)
        with R.dataflow():
            m1 = R.match_cast(x, R.Tensor((m,), "float32"))
            z = R.exp(m1)
            R.output(z)
        return z
'''
    before = _parse(src)
    after, stats = _apply(before)
    assert stats["main"].casts_removed == []
    rx.assert_structural_equal(after, before)
    ex = rx.build(after, target="interp")
    with pytest.raises(rx.ShapeMismatchError, match="expected <= 8"):
        rx.VirtualMachine(ex)["main"](np.ones(9, "float32"))


RESHAPE_BEFORE = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c", "d"), "float32")):
        a = T.int64()
        b = T.int64()
        c = T.int64()
        d = T.int64()
        with R.dataflow():
            r = R.reshape(x, R.shape([c, d]))
            z = R.add(r, y)
            R.output(z)
        return z
'''

RESHAPE_EXPECTED = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c", "d"), "float32")):
        a = T.int64()
        b = T.int64()
        c = T.int64()
        d = T.int64()
        with R.dataflow():
            r_elements = R.match_cast(R.shape([a * b]), R.Shape([c * d]))
            r = R.reshape(x, R.shape([c, d]))
            z = R.add(r, y)
            R.output(z)
        return z
'''


def test_before_expected_reshape_count_checked_once():
    after, stats = _apply(_parse(RESHAPE_BEFORE))
    rx.assert_structural_equal(after, _parse(RESHAPE_EXPECTED))
    assert stats["main"].checks_added == ["r"]
    assert [str(f.lhs) + " == " + str(f.rhs) for f in stats["main"].facts] == ["a * b == c * d"]


VIEWS_BEFORE = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("k",), "float32")):
        n = T.int64()
        m = T.int64()
        k = T.int64()
        with R.dataflow():
            q = R.squeeze(x, axis=[1])
            p = R.broadcast_to(y, R.shape([2, n]))
            z = R.add(q, p)
            w = R.squeeze(R.reshape(z, R.shape([2, n, 1])), axis=[2])
            R.output(w)
        return w
'''

VIEWS_EXPECTED = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", "m"), "float32"), y: R.Tensor(("k",), "float32")):
        n = T.int64()
        m = T.int64()
        k = T.int64()
        with R.dataflow():
            q_squeezed = R.match_cast(R.shape([m]), R.Shape([1]))
            q = R.squeeze(x, axis=[1])
            p_broadcast = R.match_cast(R.shape([T.Select(k == 1, n, k)]), R.Shape([n]))
            p = R.broadcast_to(y, R.shape([2, n]))
            z = R.add(q, p)
            lv = R.reshape(z, R.shape([2, n, 1]))
            w = R.squeeze(lv, axis=[2])
            R.output(w)
        return w
'''


def test_before_expected_squeeze_and_broadcast_checked_where_not_proven():
    """A squeezed symbolic dim is checked to be 1 and a broadcast dim to be 1 or the target;
    the reshape (counts 2 * n both ways) and the squeeze of its literal 1 are proven: no check."""
    after, stats = _apply(_parse(VIEWS_BEFORE))
    rx.assert_structural_equal(after, _parse(VIEWS_EXPECTED))
    assert stats["main"].checks_added == ["q", "p"]


def test_without_facts_the_pass_changes_nothing():
    src = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        with R.dataflow():
            r = R.reshape(x, R.shape([n * 2, 2]))
            z = R.exp(r)
            R.output(z)
        return z
'''
    before = _parse(src)
    after, stats = _apply(before)
    assert after["main"] is before["main"]
    assert stats["main"].facts == [] and stats["main"].checks_added == []


# ---------------------------------------------------------------- run time
def _kernel_calls(ex, name="main"):
    return sum(isinstance(i, CallKernel) for i in ex.functions[name].code)


def _vm_ops(ex, name="main"):
    return [type(i).__name__ for i in ex.functions[name].code]


@pytest.mark.parametrize("target", ["c"])
def test_assert_fact_fuses_the_reshape_and_the_add(target):
    mod = _parse(ASSERT_FACT)
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    y = np.random.default_rng(1).standard_normal(12).astype("float32")
    with_facts = rx.build(mod, target=target)
    with shape_facts_disabled():
        without = rx.build(_parse(ASSERT_FACT), target=target)
    # exp + reshape + add: one kernel with the fact; without it the coarse add stays a NumPy
    # call (CallFallback) beside the assert's
    assert _kernel_calls(with_facts) == 1 and _vm_ops(with_facts).count("CallFallback") == 1
    assert _vm_ops(without).count("CallFallback") == 2
    np.testing.assert_allclose(rx.VirtualMachine(with_facts)["main"](x, y), np.exp(x).ravel() + y,
                               rtol=1e-6)
    with pytest.raises(AssertionError, match="a \\* b must equal c"):
        rx.VirtualMachine(with_facts)["main"](x, y[:11])


def test_unprovable_reshape_raises_instead_of_reading_past_the_input():
    ex = rx.build(_parse(RESHAPE_BEFORE), target="c")
    vm = rx.VirtualMachine(ex)
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_allclose(vm["main"](x, np.ones((3, 2), "float32")), x.reshape(3, 2) + 1)
    with pytest.raises(rx.ShapeMismatchError, match="r_elements"):
        vm["main"](x, np.ones((3, 3), "float32"))


def test_removed_casts_leave_fewer_checks_and_a_wrong_parameter_still_raises():
    mod = _parse(CAST_BEFORE)
    with_facts = rx.build(mod, target="interp")
    with PassContext(disabled=("ApplyShapeConstraints",)):
        without = rx.build(_parse(CAST_BEFORE), target="interp")
    count = lambda ex: sum(isinstance(i, MatchValues) for i in ex.functions["main"].code)  # noqa: E731
    assert count(with_facts) == count(without) - 2
    vm = rx.VirtualMachine(with_facts)
    x = np.random.default_rng(0).standard_normal((3, 2)).astype("float32")
    y = np.random.default_rng(1).standard_normal(6).astype("float32")
    np.testing.assert_allclose(vm["main"](x, y), (x.reshape(6) + y).reshape(6, 1), rtol=1e-6)
    with pytest.raises(rx.ShapeMismatchError, match="y2"):
        vm["main"](x, y[:5])
    with pytest.raises(rx.ShapeMismatchError, match="parameter 'x'"):
        vm["main"](np.ones((3, 3), "float32"), y)


# ---------------------------------------------------------------- random programs
_UNARY = ["R.exp", "R.negative", "R.sigmoid"]
_BINARY = ["R.add", "R.multiply", "R.subtract"]


@st.composite
def regrouping_programs(draw):
    """x (a, b) through unary ops, reshaped to y's (c, d) (a regrouping the facts must
    prove: by an assert, a match_cast, or the check the pass inserts), then combined
    with y (and a broadcast row of d) and reshaped back."""
    source = draw(st.sampled_from(["assert", "match_cast", "none"]))
    ops = draw(st.lists(st.sampled_from(_UNARY), min_size=0, max_size=2))
    binary = draw(st.sampled_from(_BINARY))
    broadcast = draw(st.booleans())
    lines = []
    h = "x"
    for i, op in enumerate(ops):
        lines.append(f"u{i} = {op}({h})")
        h = f"u{i}"
    if source == "match_cast":
        lines.append(f"flat = R.match_cast(R.reshape({h}, R.shape([a * b])), R.Tensor((c * d,), \"float32\"))")
        h = "flat"
    lines.append(f"r = R.reshape({h}, R.shape([c, d]))")
    lines.append(f"z = {binary}(r, y)")
    if broadcast:
        lines.append("z = R.add(z, row)")
    lines.append("out = R.reshape(z, R.shape([a, b]))")
    body = "\n            ".join(lines)
    fact = '        R.assert_op(R.prim_value(a * b == c * d), format="a*b != c*d")\n' \
        if source == "assert" else ""
    src = f'''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("a", "b"), "float32"), y: R.Tensor(("c", "d"), "float32"),
             row: R.Tensor(("d",), "float32")):
        a = T.int64()
        b = T.int64()
        c = T.int64()
        d = T.int64()
{fact}        with R.dataflow():
            {body}
            R.output(out)
        return out
'''
    return src


@settings(max_examples=12, deadline=None)
@given(regrouping_programs(), st.sampled_from([(2, 6, 3, 4), (4, 3, 6, 2), (1, 5, 5, 1)]),
       st.integers(0, 2 ** 16))
def test_random_regrouping_programs_match_the_interpreter(src, dims, seed):
    a, b, c, d = dims
    mod = _parse(src)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((a, b)).astype("float32")
    y = rng.standard_normal((c, d)).astype("float32")
    row = rng.standard_normal(d).astype("float32")
    expected = rx.interpret(mod, "main", x, y, row)
    vm = rx.VirtualMachine(rx.build(mod, target="interp"))
    np.testing.assert_allclose(vm["main"](x, y, row), expected, rtol=1e-5, atol=1e-6)
    bad = rng.standard_normal((c, d + 1)).astype("float32")
    with pytest.raises((AssertionError, rx.ShapeMismatchError)):
        vm["main"](x, bad, rng.standard_normal(d + 1).astype("float32"))


@pytest.mark.slow
@settings(max_examples=6, deadline=None)
@given(regrouping_programs(), st.sampled_from([(2, 6, 3, 4), (1, 5, 5, 1)]), st.integers(0, 2 ** 16))
def test_random_regrouping_programs_compiled_to_c(src, dims, seed):
    a, b, c, d = dims
    mod = _parse(src)
    rng = np.random.default_rng(seed)
    args = [rng.standard_normal(s).astype("float32") for s in ((a, b), (c, d), (d,))]
    vm = rx.VirtualMachine(rx.build(mod, target="c"))
    np.testing.assert_allclose(vm["main"](*args), rx.interpret(mod, "main", *args), rtol=1e-5, atol=1e-6)
    with pytest.raises((AssertionError, rx.ShapeMismatchError)):
        vm["main"](args[0], np.ones((c, d + 1), "float32"), np.ones(d + 1, "float32"))
