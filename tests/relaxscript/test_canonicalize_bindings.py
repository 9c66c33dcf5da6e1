"""CanonicalizeBindings: exact before/after modules."""
import relaxscript as rx
from relaxscript.transform import CanonicalizeBindings
from relaxscript.transform.testing import assert_pass_preserves


def check(before: str, expected: str) -> None:
    after = assert_pass_preserves(CanonicalizeBindings(), rx.IRModule({"main": rx.from_source(before)}))
    rx.assert_structural_equal(after["main"], rx.from_source(expected))


def test_trivial_copies_and_output_takeover():
    check('''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    with R.dataflow():
        lv0 = R.exp(x)
        lv1 = lv0
        lv2 = R.add(lv1, lv0)
        gv = lv2
        gv2 = lv2
        R.output(gv, gv2)
    y = gv2
    return (y, gv)
''', '''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    with R.dataflow():
        lv0 = R.exp(x)
        gv = R.add(lv0, lv0)
        R.output(gv)
    return (gv, gv)
''')


def test_copy_with_coarser_annotation_is_kept():
    text = '''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    y: R.Tensor(ndim=2, dtype="float32") = x
    return y
'''
    check(text, text)


def test_proven_match_cast_becomes_binding_and_new_vars_are_replaced():
    check('''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    m = T.int64()
    lv = R.match_cast(x, R.Tensor((m, 4), "float32"))
    lv1 = R.reshape(lv, R.shape([m * 4]))
    return lv1
''', '''
@R.function
def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(ndim=1, dtype="float32"):
    # the signature is kept as deduced before the pass (m erased at the boundary)
    n = T.int64()
    lv1 = R.reshape(x, R.shape([n * 4]))
    return lv1
''')


def test_unproven_match_cast_stays_a_check():
    text = '''
@R.function
def main(x: R.Tensor(("n", 4), "float32")):
    n = T.int64()
    lv = R.match_cast(x, R.Tensor((8, 4), "float32"))
    also = R.match_cast(x, R.Tensor(("k", 2 * 2), "float32"))
    return lv
'''
    func = rx.from_source(text)
    mod = rx.IRModule({"main": func})
    after = CanonicalizeBindings()(mod)
    casts = [b for b in after["main"].body.blocks[0].bindings if isinstance(b, rx.MatchCast)]
    assert len(casts) == 1 and casts[0].struct_info.shape[0].value == 8


def test_tuple_literal_indexing():
    check('''
@R.function
def main(x: R.Tensor((2,), "float32"), y: R.Tensor((3,), "float32")):
    t = (x, y)
    a = t[1]
    b = t[-2]
    c = R.exp(a)
    return (b, c)
''', '''
@R.function
def main(x: R.Tensor((2,), "float32"), y: R.Tensor((3,), "float32")):
    t = (x, y)
    c = R.exp(y)
    return (x, c)
''')
