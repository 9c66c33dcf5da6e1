"""relaxscript.nn: modules register parameters, export prints and round-trips, layers equal NumPy."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from relaxscript import R, nn


class Block(nn.Module):
    def __init__(self, dim=16, hidden=32):
        super().__init__()
        self.norm = nn.RMSNorm(dim, eps=1e-5)
        self.up = nn.Linear(dim, hidden, bias=True)
        self.act = nn.GELU()
        self.down = nn.Linear(hidden, dim)
        self.ln = nn.LayerNorm(dim)

    def forward(self, x):
        return self.ln(nn.softmax(self.down(self.act(self.up(self.norm(x)))), axis=-1))


class Embed(nn.Module):
    def __init__(self):
        super().__init__()
        self.table = nn.Embedding(10, 8)
        self.proj = nn.Linear(8, 4)

    def forward(self, ids):
        return nn.relu(self.proj(nn.silu(self.table(ids))))


def numpy_block(x, w):
    x = x.astype(np.float64)
    h = x / np.sqrt(np.mean(x * x, -1, keepdims=True) + 1e-5) * w["norm.weight"]
    h = h @ w["up.weight"].T + w["up.bias"]
    from math import erf
    h = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    h = h @ w["down.weight"].T
    h = np.exp(h - h.max(-1, keepdims=True))
    h = h / h.sum(-1, keepdims=True)
    mean, var = h.mean(-1, keepdims=True), h.var(-1, keepdims=True)
    return (h - mean) / np.sqrt(var + 1e-5) * w["ln.weight"] + w["ln.bias"]


def random_weights(module, seed):
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(p.shape).astype(p.dtype) for name, p in module.named_parameters()}


def test_named_parameters_in_registration_order():
    names = [name for name, _ in Block().named_parameters()]
    assert names == ["norm.weight", "up.weight", "up.bias", "down.weight", "ln.weight", "ln.bias"]
    assert Block().up.weight.shape == (32, 16)    # PyTorch's (out_features, in_features)


def test_export_prints_and_round_trips_with_named_parameters_and_bounds():
    exported = nn.export(Block(), {"forward": {"x": nn.Tensor(("n", 16))}}, dims={"n": 64})
    text = exported.mod.script()
    assert "def forward(x: R.Tensor((\"n\", 16)" in text and "up_weight: R.Tensor((32, 16)" in text
    assert '"relax.memory_upper_bound": {"n": 64}' in text and "T.int64(upper=64)" in text
    again = rx.from_source(text)
    rx.assert_structural_equal(again, exported.mod)
    assert again.script() == text
    assert exported.param_names[:2] == ("norm.weight", "up.weight")


def test_undeclared_dim_is_named():
    with pytest.raises(ValueError, match="symbolic dim 'm'"):
        nn.export(Block(), {"forward": {"x": nn.Tensor(("m", 16))}}, dims={"n": 64})


def test_parameter_rejects_bad_dims():
    with pytest.raises(TypeError, match="non-negative int or a symbolic name"):
        nn.Parameter((3, -1))


@pytest.fixture(scope="module")
def block_vm():
    exported = nn.export(Block(), {"forward": {"x": nn.Tensor(("n", 16))}}, dims={"n": 64})
    return exported, rx.VirtualMachine(rx.build(exported.mod, target="c"))


@settings(max_examples=6, deadline=None)
@given(n=st.integers(1, 64), seed=st.integers(0, 2**16))
def test_block_equals_numpy_in_interpreter_and_vm(block_vm, n, seed):
    exported, vm = block_vm
    weights = random_weights(Block(), seed)
    x = np.random.default_rng(seed + 1).standard_normal((n, 16)).astype("float32")
    args = [weights[name] for name in exported.param_names]
    want = numpy_block(x, weights)
    np.testing.assert_allclose(rx.interpret(exported.mod, "forward", x, *args), want, rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(vm["forward"](x, *args), want, rtol=2e-4, atol=2e-4)


def test_embedding_and_activations_equal_numpy():
    module = Embed()
    exported = nn.export(module, {"forward": {"ids": nn.Tensor(("n",), "int64")}}, dims={"n": 16})
    weights = random_weights(module, 3)
    ids = np.array([0, 9, 3, 3, 7], dtype=np.int64)
    rows = weights["table.weight"][ids].astype(np.float64)
    want = np.maximum((rows / (1 + np.exp(-rows))) @ weights["proj.weight"].T, 0)
    got = rx.interpret(exported.mod, "forward", ids, *[weights[k] for k in exported.param_names])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_shared_parameter_is_listed_once():
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(12, 8)
            self.head = nn.Linear(8, 12)
            self.head.weight = self.embed.weight

        def forward(self, ids):
            return self.head(self.embed(ids))

    exported = nn.export(Tied(), {"forward": {"ids": nn.Tensor((3,), "int64")}})
    assert exported.param_names == ("embed.weight",)
    w = np.random.default_rng(0).standard_normal((12, 8)).astype("float32")
    ids = np.array([1, 4, 11], dtype=np.int64)
    np.testing.assert_allclose(rx.interpret(exported.mod, "forward", ids, w), w[ids] @ w.T, rtol=1e-5, atol=1e-5)


def test_quantized_linear_equals_dequantized_weights():
    from relaxscript.quantization.formats import dequantize_numpy, quantize_numpy
    layer = nn.Linear(64, 8, weight_format=nn.Quantized("q4_1"))
    exported = nn.export(layer, {"forward": {"x": nn.Tensor(("n", 64))}}, dims={"n": 8})
    assert exported.param_names == ("weight.data", "weight.scale", "weight.min")
    rng = np.random.default_rng(5)
    packed = quantize_numpy(rng.standard_normal((64, 8)).astype("float32"), "q4_1")   # (in, out)
    x = rng.standard_normal((3, 64)).astype("float32")
    want = x.astype(np.float64) @ dequantize_numpy(*packed, format="q4_1")
    np.testing.assert_allclose(rx.interpret(exported.mod, "forward", x, *packed), want, rtol=1e-4, atol=1e-4)


def test_a_reused_expression_is_computed_once():
    """forward may read one (unbound) expression twice: it is bound once, not once per use."""
    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(8, 8)

        def forward(self, x):
            for _ in range(12):     # duplicating per use would make 2**12 matmuls
                h = self.proj(x)
                x = nn.relu(rx.op.add(h, h))
            return x

    exported = nn.export(Residual(), {"forward": {"x": nn.Tensor((2, 8))}})
    text = exported.mod.script()
    assert text.count("R.matmul(") == 12 and text.count("R.nn.relu(") == 12


def test_quantized_embedding_with_a_tied_head_equals_dequantized_table():
    from relaxscript.quantization.formats import dequantize_numpy, quantize_numpy

    class TiedQ8(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(16, 64, weight_format=nn.Quantized("q8_0"))
            self.head = nn.Linear(64, 16, weight_format=nn.Quantized("q8_0"))
            self.head.weight = self.embed.weight

        def forward(self, ids):
            return self.head(self.embed(ids))

    exported = nn.export(TiedQ8(), {"forward": {"ids": nn.Tensor(("n",), "int64")}}, dims={"n": 8})
    assert exported.param_names == ("embed.weight.data", "embed.weight.scale")
    assert exported.mod.script().count("R.dequantize(") == 2      # one per use
    rng = np.random.default_rng(6)
    packed = quantize_numpy(rng.standard_normal((64, 16)).astype("float32"), "q8_0")   # (hidden, vocab)
    table = dequantize_numpy(*packed, format="q8_0").T.astype(np.float64)
    ids = np.array([3, 0, 15], dtype=np.int64)
    want = table[ids] @ table.T
    np.testing.assert_allclose(rx.interpret(exported.mod, "forward", ids, *packed), want, rtol=1e-4, atol=1e-4)
    got = rx.VirtualMachine(rx.build(exported.mod, target="c"))["forward"](ids, *packed)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("fmt", ["q8_0", "q4_1"])
def test_quantized_embedding_dequantizes_only_the_picked_rows(fmt):
    """The lookup takes the tokens' columns of the codes and scales, then dequantizes them:
    no kernel of the lowered module holds a float32 buffer the size of the table (a fused
    dequantize-then-take whose rows a norm and a residual both read, as in a Llama's first
    layer, wrote the whole float32
    table per call: 113 MB for SmolLM2)."""
    from relaxscript.quantization.formats import dequantize_numpy, quantize_numpy
    from tensorir.functor import collect
    from tensorir.stmt import Block
    vocab, hidden = 256, 64

    class EmbedThenNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(vocab, hidden, weight_format=nn.Quantized(fmt))
            self.norm = nn.RMSNorm(hidden)

        def forward(self, ids):
            h = self.embed(ids)
            return rx.op.add(h, self.norm(h))   # the lookup is read twice, as by a residual

    # one token, as in decode (where the table was materialized; with n tokens it was inlined)
    exported = nn.export(EmbedThenNorm(), {"forward": {"ids": nn.Tensor((1,), "int64")}})
    lowered = exported.mod
    for step in rx.get_pipeline("c"):
        lowered = step(lowered)
    for name, func in lowered.prim_funcs.items():
        buffers = list(func.buffer_params) + [b for block in collect(func.body, lambda n: isinstance(n, Block))
                                              for b in block.alloc_buffers]
        for buffer in buffers:
            dims = [getattr(d, "value", None) for d in buffer.shape]
            if buffer.dtype == "float32" and None not in dims:
                assert int(np.prod(dims)) < vocab * hidden, (name, buffer.name, dims)
    rng = np.random.default_rng(7)
    packed = quantize_numpy(rng.standard_normal((hidden, vocab)).astype("float32"), fmt)
    table = dequantize_numpy(*packed, format=fmt).T
    ids = np.array([255], dtype=np.int64)
    rows = table[ids].astype(np.float64)
    want = rows + rows / np.sqrt(np.mean(rows ** 2, axis=-1, keepdims=True) + 1e-5)
    norm_weight = np.ones(hidden, np.float32)
    got = rx.VirtualMachine(rx.build(exported.mod, target="c"))["forward"](ids, *packed, norm_weight)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(rx.interpret(exported.mod, "forward", ids, *packed, norm_weight), want,
                               rtol=1e-5, atol=1e-5)


def test_lower_bound_of_a_dim_is_a_fact_checked_at_the_call():
    """``lower={"n": 1}``: the last row's slice has one row (the simplifier proves it), and a
    call with n = 0 is refused with the dim named."""
    class LastRow(nn.Module):
        def forward(self, x):
            (n, _) = x.struct_info.shape
            return R.strided_slice(x, [0], [n - 1], [n])

    spec = nn.ExportSpec({"forward": {"x": nn.Tensor(("n", 4))}}, dims={"n": 8}, lower={"n": 1})
    exported = nn.export(LastRow(), spec)
    out = exported.mod["forward"].ret_struct_info
    assert [int(d.value) for d in out.shape] == [1, 4]
    vm = rx.VirtualMachine(rx.build(exported.mod, target="c"))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_array_equal(vm["forward"](x), x[2:])
    with pytest.raises(ValueError, match="n"):
        vm["forward"](np.zeros((0, 4), np.float32))
    with pytest.raises(ValueError, match="lower bound of dim 'n'"):
        nn.ExportSpec({}, dims={"n": 8}, lower={"n": 9})
    with pytest.raises(ValueError, match="which dims does not declare"):
        nn.ExportSpec({}, dims={"n": 8}, lower={"m": 1})
