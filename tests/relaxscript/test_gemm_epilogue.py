"""DispatchLibrary's epilogue patterns: ``x @ W [+ b]`` followed by an activation and/or a residual add
become one generated-GEMM call (transform/dispatch_library.py, EPILOGUE_PATTERNS). Before/Expected
per shape of the graph, the cases that must not fuse, and C builds equal to the NumPy reference
interpreter on the unfused module at symbolic ``n`` bound to random values and to every run-time
variant boundary."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.gemm.params import gemm_params
from backends.library_gemm import epilogue_entry, prepacked_rows, skinny_rows
from relaxscript.expr import Constant
from relaxscript.transform import DispatchLibrary
from relaxscript.transform.dispatch_library import EPILOGUE_ACTIVATIONS, gemm_dispatch_report

pytestmark = pytest.mark.skipif(skinny_rows() is None, reason="no C compiler: the generated GEMM is not built")

HEADER = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((n, 16), "float32"), w: R.Tensor((16, 16), "float32"), b: R.Tensor((16,), "float32"),
             r: R.Tensor((n, 16), "float32")):
        n = T.int64()
        with R.dataflow():
'''


def _module(body: str, out: str = "y") -> rx.IRModule:
    lines = "".join(f"            {line}\n" for line in body.strip().splitlines())
    return rx.from_source(HEADER.replace("(n, 16)", '("n", 16)') + lines
                          + f"            R.output({out})\n        return {out}\n")


def _call(library: str, operands: str) -> str:
    return f'y = R.call_dps_library("{library}", ({operands}), out_sinfo=R.Tensor(("n", 16), "float32"))'


@pytest.mark.parametrize("before, library, operands", [
    ("y = R.nn.gelu_tanh(R.add(R.matmul(x, w), b))", "generated.sgemm_bias.gelu_tanh", "x, w, b"),
    ("y = R.nn.gelu(R.add(b, R.matmul(x, w)))", "generated.sgemm_bias.gelu", "x, w, b"),
    ("y = R.nn.silu(R.matmul(x, w))", "generated.sgemm.silu", "x, w"),
    ("y = R.add(R.add(R.matmul(x, w), b), r)", "generated.sgemm_bias.residual", "x, w, b, r"),
    ("y = R.add(r, R.matmul(x, w))", "generated.sgemm.residual", "x, w, r"),
    ("y = R.add(x, R.nn.relu(R.add(R.matmul(x, w), b)))", "generated.sgemm_bias.relu.residual", "x, w, b, x"),
    ("y = R.nn.relu(R.add(R.add(R.matmul(x, w), b), r))", "generated.sgemm_bias.residual.relu", "x, w, b, r"),
    ("y = R.sigmoid(R.add(R.matmul(x, w), r))", "generated.sgemm.residual.sigmoid", "x, w, r"),
    ("y = R.add(R.tanh(R.matmul(x, w)), r)", "generated.sgemm.tanh.residual", "x, w, r"),
])
def test_before_expected(before, library, operands):
    """Each shape of the epilogue (with the adds' operands either way round) becomes one call whose
    name lists the steps in the order they apply."""
    after = DispatchLibrary()(_module(before))
    rx.assert_structural_equal(after, _module(_call(library, operands)))


def test_what_does_not_fuse():
    """An activation whose input is used again keeps its own kernel (the product is needed too); a
    broadcast second add is not a residual (it stays an add after the bias entry); an activation of a
    transposed-weight product is left to OpenBLAS's sgemm_nt."""
    shared = _module("p = R.add(R.matmul(x, w), b)\nq = R.nn.relu(p)\ny = R.add(q, p)")
    rx.assert_structural_equal(DispatchLibrary()(shared), _module(
        'p = R.call_dps_library("generated.sgemm_bias", (x, w, b), out_sinfo=R.Tensor(("n", 16), "float32"))\n'
        "q = R.nn.relu(p)\ny = R.add(q, p)"))
    broadcast = _module("p = R.add(R.matmul(x, w), b)\ny = R.add(p, b)")
    rx.assert_structural_equal(DispatchLibrary()(broadcast), _module(
        'p = R.call_dps_library("generated.sgemm_bias", (x, w, b), out_sinfo=R.Tensor(("n", 16), "float32"))\n'
        "y = R.add(p, b)"))
    transposed = _module("y = R.nn.relu(R.matmul(x, R.permute_dims(w)))")
    (binding,) = [bd for bd in DispatchLibrary()(transposed)["main"].body.blocks[0].bindings
                  if "call_dps_library" in str(bd.value.op)]
    assert binding.value.args[0].global_symbol.endswith("sgemm_nt")


def test_rows_provably_past_the_generated_variants_still_fuse_through_the_generated_entry():
    """Rows provably beyond what the generated kernels keep: the plain product goes to OpenBLAS, the one
    with an epilogue to the generated entry (which runs OpenBLAS for those rows and then the epilogue
    pass); the report says both."""
    mod = rx.from_source(HEADER.replace("(n, 16)", "(600, 16)").replace("n = T.int64()", "pass")
                         + "            y = R.nn.gelu_tanh(R.add(R.matmul(x, w), b))\n"
                         + "            R.output(y)\n        return y\n")
    (choice,) = gemm_dispatch_report(mod)
    assert choice.library == "generated.sgemm_bias.gelu_tanh"
    assert "OpenBLAS" in choice.reason and "epilogue fused: gelu_tanh" in choice.reason


WEIGHTS = np.random.default_rng(5).standard_normal((16, 16)).astype(np.float32) / 4
BIAS = np.random.default_rng(6).standard_normal(16).astype(np.float32)


def _all_epilogues(bound: bool) -> tuple[rx.IRModule, list[str]]:
    """One function computing every activation x (bias or not) x (residual before, after, none) as
    separate outputs, its weights bound as constants (the prepacked entries) or passed at run time."""
    body, outs = [], []
    for op in [None, *EPILOGUE_ACTIVATIONS]:
        for bias in (False, True):
            for order in (None, "before", "after"):
                if op is None and order != "after":
                    continue
                v = "R.matmul(x, w)"
                v = f"R.add({v}, b)" if bias else v
                v = f"R.add({v}, r)" if order == "before" else v
                v = f"{op.replace('relax.', 'R.')}({v})" if op else v
                v = f"R.add(r, {v})" if order == "after" else v
                name = f"o{len(outs)}"
                body.append(f"{name} = {v}")
                outs.append(name)
    body.append(f"y = ({', '.join(outs)})")
    mod = _module("\n".join(body))
    if bound:
        mod = rx.transform.BindParams("main", {"w": WEIGHTS, "b": BIAS})(mod)
    return mod, outs


_BUILT: dict = {}


def _built(bound: bool):
    if bound not in _BUILT:
        mod, outs = _all_epilogues(bound)
        dispatch = DispatchLibrary()
        fused = dispatch(mod)
        libraries = [c.library for c in dispatch.choices]
        _BUILT[bound] = (mod, rx.VirtualMachine(rx.build(mod, target="c")), libraries, fused)
    return _BUILT[bound]


@pytest.mark.parametrize("bound", [False, True])
def test_every_combination_is_one_call(bound):
    mod, vm, libraries, fused = _built(bound)
    _, outs = _all_epilogues(bound)
    assert len(libraries) == len(outs)
    assert all(lib.startswith("generated.sgemm") and ("prepacked" in lib) == bound for lib in libraries)
    bindings = fused["main"].body.blocks[0].bindings
    ops = [getattr(bd.value.op, "name", None) for bd in bindings[:-1]]
    assert ops == ["relax.call_dps_library"] * len(outs)   # nothing else left: no activation, no add
    if bound:   # the constant weight replaced by its panels, the weight itself beside them
        call = fused["main"].body.blocks[0].bindings[0].value
        assert isinstance(call.args[1].fields[1], Constant) and call.args[1].fields[1].data.ndim == 3
    assert epilogue_entry("generated.sgemm_bias_prepacked", "gelu_tanh", "after") in libraries or not bound


def _check_against_interpreter(bound: bool, n: int, seed: int, scale: float = 1.0):
    mod, vm, _, _ = _built(bound)
    rng = np.random.default_rng(seed)
    x = (scale * rng.standard_normal((n, 16))).astype(np.float32)
    r = rng.standard_normal((n, 16)).astype(np.float32)
    args = [x, r] if bound else [x, WEIGHTS, BIAS, r]
    got, want = vm["main"](*args), rx.interpret(mod, "main", *args)
    for g, e in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(e), rtol=2e-4, atol=2e-4)


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 300), bound=st.booleans(), seed=st.integers(0, 2**31),
       scale=st.sampled_from([0.5, 4.0, 60.0]))
def test_c_build_equals_the_interpreter_at_random_n(n, bound, seed, scale):
    _check_against_interpreter(bound, n, seed, scale)


@pytest.mark.parametrize("bound", [False, True])
def test_c_build_equals_the_interpreter_at_every_variant_boundary(bound):
    """The rows where the run-time choice changes: the GEMV, in-place A, packed A in one and several
    tiles, the per-call skinny limit beside OpenBLAS, the prepacked limit, the rows split over threads."""
    p = gemm_params()
    s, limit = skinny_rows(16), prepacked_rows()
    for n in sorted({1, 2, p.a_in_place_rows, p.a_in_place_rows + 1, p.mr, p.mr + 1, s, s + 1, p.skinny_rows,
                     p.skinny_rows + 1, limit, limit + 1, 2 * p.mc + 1, 2 * p.packed_mc + 1}):
        _check_against_interpreter(bound, n, n)


def test_a_registry_without_the_choice_still_calls_an_entry_that_takes_the_epilogue():
    """A registry whose patterns keep only their own library (``choose=None``, as a user replacing
    the choice writes it): each epilogue pattern's library is the generated entry with that epilogue,
    which takes the activation and residual operands. It named OpenBLAS's sgemm_bias, whose
    parameters take 4 shapes, not 5: a TypeError at the first call."""
    import dataclasses

    from relaxscript.transform.dispatch_library import DEFAULT_CPU_REGISTRY, LibraryRegistry
    registry = LibraryRegistry([dataclasses.replace(p, choose=None) for p in DEFAULT_CPU_REGISTRY])
    mod = _module("y = R.add(R.nn.relu(R.add(R.matmul(x, w), b)), r)")
    rx.assert_structural_equal(DispatchLibrary(registry)(mod),
                               _module(_call("generated.sgemm_bias.relu.residual", "x, w, b, r")))
    pipeline = [DispatchLibrary(registry) if isinstance(p, DispatchLibrary) else p for p in rx.get_pipeline("c")]
    run = rx.VirtualMachine(rx.build(mod, pipeline=pipeline))["main"]
    rng = np.random.default_rng(0)
    for n in (1, 5, 40):
        x, r = rng.standard_normal((n, 16)).astype("float32"), rng.standard_normal((n, 16)).astype("float32")
        w, b = rng.standard_normal((16, 16)).astype("float32"), rng.standard_normal(16).astype("float32")
        np.testing.assert_allclose(run(x, w, b, r), np.maximum(x @ w + b, 0) + r, rtol=1e-4, atol=1e-4)
