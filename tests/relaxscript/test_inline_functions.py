"""InlineFunctions: small pure leaf functions are copied into their callers
(results unchanged, runtime checks never lost), the plain blocks around the
inlined calls join the dataflow blocks, and fusion then crosses the old
function boundary."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from tests.targets import COMPILED_TARGETS
import tensorir as tir
from relaxscript.analysis import check_well_formed
from relaxscript.expr import Call, DataflowBlock, GlobalVar
from relaxscript.transform import InlineFunctions, PassContext
from relaxscript.vm import instructions as I
from tensorir.errors import ShapeMismatchError

HEADER = "from relaxscript import R\nfrom tensorir import T\n"

ROPE = HEADER + '''
@R.ir_module
class Module:
    @R.function
    def rope(x: R.Tensor(("n", 2, 8), "float32"), cos: R.Tensor(("n", 8), "float32"),
             sin: R.Tensor(("n", 8), "float32")) -> R.Tensor(("n", 2, 8), "float32"):
        n = T.int64(upper=64)
        with R.dataflow():
            x1 = R.strided_slice(x, [2], [0], [4])
            x2 = R.strided_slice(x, [2], [4], [8])
            rotated = R.concat((R.negative(x2), x1), axis=2)
            out = R.add(R.multiply(x, R.expand_dims(cos, 1)), R.multiply(rotated, R.expand_dims(sin, 1)))
            R.output(out)
        return out

    @R.function
    def main(x: R.Tensor(("n", 16), "float32"), w: R.Tensor((16, 16), "float32"),
             cos: R.Tensor(("n", 8), "float32"), sin: R.Tensor(("n", 8), "float32")):
        n = T.int64(upper={upper})
        with R.dataflow():
            q = R.reshape(R.matmul(x, w), R.shape([n, 2, 8]))
            R.output(q)
        q_rot = cls.rope(q, cos, sin)
        with R.dataflow():
            out = R.permute_dims(q_rot, [1, 0, 2])
            R.output(out)
        return out
'''


def _module(upper=64):
    return rx.from_source(ROPE.replace("{upper}", str(upper)))


def _calls_of(func, name: str) -> int:
    return len(tir.collect(func, lambda e: isinstance(e, Call) and isinstance(e.op, GlobalVar)
                           and e.op.name_hint == name))


@functools.lru_cache(maxsize=None)
def _built(target: str):
    return rx.VirtualMachine(rx.build(_module(), target=target))


def _args(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype("float32") for s in [(n, 16), (16, 16), (n, 8), (n, 8)]]


def _callee_module(callee_body: str, callee_sig: str = 'x: R.Tensor(("n", 4), "float32")',
                   caller_sig: str = 'x: R.Tensor(("n", 4), "float32")', caller_head: str = "n = T.int64()",
                   callee_head: str = "n = T.int64()", ret: str = "", decorator: str = "@R.function") -> rx.IRModule:
    return rx.from_source(HEADER + f'''
@R.ir_module
class Module:
    {decorator}
    def f({callee_sig}){ret}:
        {callee_head}
{callee_body}

    @R.function
    def main({caller_sig}):
        {caller_head}
        y = cls.f(x)
        return y
''')


# main -> f -> g: g is a leaf, f is not
NESTED = HEADER + '''
@R.ir_module
class Module:
    @R.function
    def g(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        y = R.exp(x)
        return y

    @R.function
    def f(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        y = cls.g(x)
        return y

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        y = cls.f(x)
        return y
'''

SIMPLE_BODY = '''        y = R.exp(x)
        return y'''


def test_rope_is_inlined_into_one_dataflow_block():
    mod = _module()
    after = InlineFunctions()(mod)
    check_well_formed(after)
    rx.assert_structural_equal(rx.from_source(after.script()), after)
    main = after["main"]
    assert _calls_of(main, "rope") == 0 and "rope" in after   # the callee stays callable
    assert len(main.body.blocks) == 1 and isinstance(main.body.blocks[0], DataflowBlock)


@pytest.mark.parametrize("target", COMPILED_TARGETS)
@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 12), seed=st.integers(0, 2**16))
def test_inlined_module_gives_the_same_results(target, n, seed):
    mod = _module()
    after = InlineFunctions()(mod)
    args = _args(n, seed)
    want = rx.interpret(mod, "main", *args)
    np.testing.assert_allclose(rx.interpret(after, "main", *args), want, rtol=1e-5, atol=1e-5)
    vm = _built(target)
    np.testing.assert_allclose(vm["main"](*args), want, rtol=1e-4, atol=1e-4)


def test_fusion_crosses_the_inlined_call():
    exe = rx.build(_module(), target="c")
    code = exe.functions["main"].code
    kinds = [type(ins) for ins in code]
    assert I.CallFunc not in kinds
    kernels = [ins.kernel for ins in code if isinstance(ins, I.CallKernel)]
    # the reshape before the call and the rotary embedding are one kernel
    assert any("reshape" in k and "negative" in k for k in kernels), kernels
    without = rx.get_pipeline("c")
    without[:] = [p for p in without if not isinstance(p, InlineFunctions)]
    separate = rx.build(_module(), target="c", pipeline=without)
    assert I.CallFunc in [type(ins) for ins in separate.functions["main"].code]
    separate_kernels = sum(isinstance(ins, I.CallKernel) for f in ("main", "rope")
                           for ins in separate.functions[f].code)
    assert len(kernels) < separate_kernels


def test_pass_check_with_the_interpreter_accepts_inlining():
    with PassContext(check_with_interpreter=True, check_samples=3):
        InlineFunctions()(_module())


@pytest.mark.parametrize("target", COMPILED_TARGETS)
def test_a_bound_the_caller_cannot_prove_keeps_the_call_and_its_check(target):
    mod = _module(upper=100)   # rope accepts n <= 64
    after = InlineFunctions()(mod)
    assert _calls_of(after["main"], "rope") == 1
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    np.testing.assert_allclose(vm["main"](*_args(5)), rx.interpret(mod, "main", *_args(5)), rtol=1e-4, atol=1e-4)
    with pytest.raises(ShapeMismatchError, match="rope"):
        vm["main"](*_args(70))
    assert _calls_of(InlineFunctions()(_module(upper=32))["main"], "rope") == 0


@pytest.mark.parametrize("caller_head, inlined", [("n = T.int64()", False), ("n = T.int64(upper=8)", True)])
def test_bounds_given_as_the_callee_attribute_must_be_proven(caller_head, inlined):
    body = '        R.func_attr({"relax.memory_upper_bound": {"n": 16}})\n' + SIMPLE_BODY
    after = InlineFunctions()(_callee_module(body, caller_head=caller_head))
    assert _calls_of(after["main"], "f") == (0 if inlined else 1)


@pytest.mark.parametrize("case", ["shape needs a check", "no shape", "dtype", "fact multiple_of", "non-leaf",
                                  "if", "match_cast", "impure", "narrower return", "too big"])
def test_calls_that_would_lose_a_check_or_cannot_be_copied_stay(case):
    kwargs = {}
    body = SIMPLE_BODY
    if case == "shape needs a check":
        kwargs["caller_sig"] = 'x: R.Tensor(("n", "m"), "float32")'
        kwargs["caller_head"] = "n = T.int64()\n        m = T.int64()"
    elif case == "no shape":
        kwargs["caller_sig"] = 'x: R.Tensor(ndim=2, dtype="float32")'
        kwargs["caller_head"] = ""
    elif case == "dtype":
        kwargs["caller_sig"] = 'x: R.Tensor(("n", 4))'
    elif case == "fact multiple_of":
        kwargs["callee_head"] = "n = T.int64(multiple_of=4)"
    elif case == "if":
        kwargs["callee_sig"] = 'x: R.Tensor(("n", 4), "float32"), flag: R.Prim("bool") = None'
    elif case == "match_cast":
        body = '''        z = R.match_cast(x, R.Tensor((n, 4), "float32"))
        y = R.exp(z)
        return y'''
    elif case == "impure":
        kwargs["decorator"] = "@R.function(pure=False)"
    elif case == "narrower return":
        kwargs["ret"] = ' -> R.Tensor((n, 4), "float32")'
        kwargs["callee_sig"] = 'x: R.Tensor(("n", "k"), "float32")'
        kwargs["callee_head"] = "n = T.int64()\n        k = T.int64()"
    if case == "if":
        mod = rx.from_source(HEADER + '''
@R.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(("n", 4), "float32"), flag: R.Prim("bool")):
        n = T.int64()
        if flag:
            y = R.exp(x)
        else:
            y = R.negative(x)
        return y

    @R.function
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        y = cls.f(x, R.prim_value(True))
        return y
''')
    elif case == "non-leaf":   # g keeps its match_cast, so f still calls a graph function
        mod = rx.from_source(NESTED.replace("        y = R.exp(x)\n        return y\n\n    @R.function\n    def f(",
                                            "        z = R.match_cast(x, R.Tensor((n, 4), \"float32\"))\n"
                                            "        y = R.exp(z)\n        return y\n\n    @R.function\n    def f(", 1))
    else:
        mod = _callee_module(body, **kwargs)
    pass_ = InlineFunctions(max_bindings=0 if case == "too big" else 32)
    after = pass_(mod)
    assert _calls_of(after["main"], "f") == 1, after.script()


def test_a_non_leaf_callee_is_inlined_once_its_own_callees_are():
    # g is a leaf: inlined into f in the first round; f is then a leaf and goes into main
    mod = rx.from_source(NESTED)
    after = InlineFunctions()(mod)
    assert _calls_of(after["f"], "g") == 0 and _calls_of(after["main"], "f") == 0
    assert _calls_of(after["main"], "g") == 0
    x = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    np.testing.assert_allclose(rx.interpret(after, "main", x), np.exp(x), rtol=1e-6)


def test_plain_block_with_an_impure_binding_is_not_merged():
    mod = rx.from_source(HEADER + '''
@R.ir_module
class Module:
    @R.function
    def f(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        y = R.exp(x)
        return y

    @R.function(pure=False)
    def main(x: R.Tensor(("n", 4), "float32")):
        n = T.int64()
        y = cls.f(x)
        e = R.call_packed("test.effect", y, sinfo_args=R.Object)
        return y
''')
    after = InlineFunctions()(mod)
    check_well_formed(after)
    main = after["main"]
    assert _calls_of(main, "f") == 0
    assert not any(isinstance(b, DataflowBlock) for b in main.body.blocks)


SMALL_LLAMA = dict(hidden=32, heads=2, ffn=48, layers=2, max_len=16)


@settings(max_examples=4, deadline=None)
@given(n=st.integers(1, 16), seed=st.integers(0, 2**16))
def test_transformer_layers_are_inlined_through_their_rotary_helper(n, seed):
    # main -> layer -> rope: rope goes into layer, then layer (46 bindings) into main: no VM call
    # and no parameter checks per layer; the results stay the interpreter's and NumPy's
    from examples import llama_decoder as llama
    cfg = llama.LlamaConfig(**SMALL_LLAMA)
    mod = llama.build_module(cfg)
    after = InlineFunctions()(mod)
    assert _calls_of(after["main"], "layer") == 0 and _calls_of(after["main"], "rope") == 0
    exe = rx.build(mod, target="c")
    assert I.CallFunc not in [type(ins) for ins in exe.functions["main"].code]
    x = np.random.default_rng(seed).standard_normal((n, cfg.hidden)).astype("float32")
    args = llama.main_args(x, llama.make_weights(cfg, seed=seed % 7), cfg)
    want = rx.interpret(mod, "main", *args)
    np.testing.assert_allclose(rx.interpret(after, "main", *args), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rx.VirtualMachine(exe)["main"](*args), want, rtol=1e-4, atol=1e-4)
