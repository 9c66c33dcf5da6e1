"""The generated one-token quantized GEMV (backends/c/quantized_gemv.py): when the schedule
rule marks a kernel, what the C emitter puts in its place, and that it equals
dequantize-then-matmul (NumPy) on random blocks, ragged columns and every format."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.compiler import find_compiler
from backends.c.quantized_gemv import (AVX2, AVX512, SSE, MICRO_KERNEL_ATTR, VectorFeatures,
                                       columns_per_tile, detect_features, features_from_macros,
                                       gemv_source)
from relaxscript.quantization import dequantize_numpy, quantize_numpy
from tensorir.schedule_rules.quantized import QUANTIZED_GEMV_ATTR, function_epilogue

from .test_dequantize_op import linear_module, scheduled_module

FAST = settings(max_examples=6, deadline=None)


def marked_spec(mod):
    func = next(iter(scheduled_module(mod).prim_funcs.values()))
    return func.attrs.get(QUANTIZED_GEMV_ATTR)


def test_the_rule_and_the_emitter_agree_on_the_attribute_name():
    assert QUANTIZED_GEMV_ATTR == MICRO_KERNEL_ATTR


@pytest.mark.parametrize("fmt", ["q4_1", "q8_0", "q4_0"])
def test_one_token_product_is_marked_with_roles_and_shape(fmt):
    mod = scheduled_module(linear_module(fmt, 96, 40, tokens="1"))
    func = next(iter(mod.prim_funcs.values()))
    spec = func.attrs.get(QUANTIZED_GEMV_ATTR)
    assert {k: spec[k] for k in ("format", "rows", "cols")} == {"format": fmt, "rows": 96, "cols": 40}
    names = {role: func.buffer_params[i].name for role, i in spec["roles"].items()}
    expected = {"codes": "qd", "scale": "qs", "x": "x"} | ({"min": "qm"} if fmt == "q4_1" else {})
    assert {k: v for k, v in names.items() if k != "y"} == expected
    assert spec["roles"]["y"] == len(func.buffer_params) - 1   # the output comes last


def test_other_kernels_keep_their_loop_nest():
    """Several tokens: not this kernel (float16 scales are: test_f16_scales.py)."""
    assert marked_spec(linear_module("q4_1", 64, 40, tokens='"n"')) is None


@pytest.mark.parametrize("fmt", ["q4_1", "q8_0"])
def test_one_token_product_reshaped_to_a_vector_is_marked_and_writes_the_vector(fmt):
    """A decode step's logits: ``(1, vocab)`` reshaped to ``(vocab,)``, fused into the product;
    the same floats in the same order, so the generated kernel writes the vector directly
    (the LM head took 18 ms per step on the loop nest, 8 ms with the kernel)."""
    mod = linear_module(fmt, 64, 40, tokens="1", flatten=True)
    scheduled = next(iter(scheduled_module(mod).prim_funcs.values()))
    spec = scheduled.attrs.get(QUANTIZED_GEMV_ATTR)
    assert spec is not None and (spec["rows"], spec["cols"]) == (64, 40)
    assert [d.value for d in scheduled.buffer_params[spec["roles"]["y"]].shape] == [40]
    rng = np.random.default_rng(3)
    tensors = quantize_numpy(rng.standard_normal((64, 40)), fmt)
    x = rng.standard_normal((1, 64)).astype(np.float32)
    built = rx.build(mod, target="c")
    assert f"{fmt} gemv 64 x 40" in built.c_library.source
    got = rx.VirtualMachine(built)["main"](x, *tensors)
    expected = (x.astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)).reshape(40)
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-3)


def test_reshape_after_an_activation_is_one_more_epilogue_step():
    # the per-column chain takes the (1, N) -> (N,) copy like any elementwise stage
    spec = marked_spec(linear_module("q8_0", 64, 40, tokens="1", activation=True, flatten=True))
    assert spec is not None and len(spec["epilogue"]["blocks"]) == 2


def source_of(mod) -> str:
    return rx.build(mod, target="c").c_library.source


def test_marked_kernel_compiles_to_the_generated_gemv_for_the_detected_features():
    features = detect_features()
    source = source_of(linear_module("q4_1", 64, 40, tokens="1"))
    assert f"q4_1 gemv 64 x 40 for {features.name}:" in source
    assert f"vector_size({features.vector_bytes})" in source


def test_disabled_generated_kernels_compile_the_loop_nest(monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_GENERATED_KERNELS", "0")
    assert " gemv " not in source_of(linear_module("q4_1", 64, 40, tokens="1"))


@FAST
@given(fmt=st.sampled_from(["q4_1", "q8_0", "q4_0"]), blocks=st.sampled_from([1, 3, 18]),
       cols=st.integers(1, 300), seed=st.integers(0, 2**16))
def test_generated_gemv_equals_dequantize_then_matmul(fmt, blocks, cols, seed):
    """Ragged columns (not a multiple of the vector group), K = 32, 96 or 576 rows, in C and
    in the interpreter (which runs the loop nest the kernel replaces)."""
    rows = 32 * blocks
    mod = linear_module(fmt, rows, cols, tokens="1")
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    x = rng.standard_normal((1, rows)).astype(np.float32)
    expected = x.astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)
    built = rx.build(mod, target="c")
    assert f"{fmt} gemv {rows} x {cols}" in built.c_library.source
    got = rx.VirtualMachine(built)["main"](x, *tensors)
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4 * np.sqrt(rows))
    np.testing.assert_allclose(rx.interpret(mod, "main", x, *tensors), expected, rtol=2e-4,
                               atol=2e-4 * np.sqrt(rows))


def test_wide_layer_splits_columns_among_threads_and_tiles():
    """More columns than one tile takes (several tiles per thread, a ragged last one)."""
    features = detect_features()
    rows, cols = 64, 4 * columns_per_tile(100000, features.group, features.l1d_bytes) + 5
    mod = linear_module("q8_0", rows, cols, tokens="1")
    rng = np.random.default_rng(7)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), "q8_0")
    x = rng.standard_normal((1, rows)).astype(np.float32)
    got = rx.VirtualMachine(rx.build(mod, target="c"))["main"](x, *tensors)
    np.testing.assert_allclose(got, x.astype(np.float64) @ dequantize_numpy(*tensors, format="q8_0"),
                               rtol=2e-4, atol=2e-4 * np.sqrt(rows))


# ---------------------------------------------------------------- features and their source
def test_features_follow_the_compiler_macros():
    avx512 = "#define __AVX512F__ 1\n#define __AVX2__ 1\n#define __FMA__ 1\n"
    assert features_from_macros(avx512).vector_bytes == 64
    assert features_from_macros("#define __AVX2__ 1\n#define __FMA__ 1\n").name == "avx2"
    assert features_from_macros("#define __SSE2__ 1\n").name == "sse"


def gcc_macros(flags: list[str]) -> str:
    return subprocess.run([find_compiler(), *flags, "-dM", "-E", "-x", "c", "-"], input="",
                          capture_output=True, text=True, check=True).stdout


def test_detected_features_match_what_native_code_may_use():
    macros = gcc_macros(["-march=native"])
    features = detect_features()
    assert features == features_from_macros(macros, features.l1d_bytes)
    assert (features.name == "avx512") == ("__AVX512F__" in macros)


@pytest.mark.parametrize("kind, flags", [(AVX2, ["-mavx2", "-mfma"]), (AVX512, ["-mavx512f", "-mavx512bw"]),
                                         (SSE, ["-msse2"])])
@pytest.mark.parametrize("fmt", ["q4_1", "q8_0"])
def test_source_for_each_feature_set_compiles(tmp_path, kind, flags, fmt):
    """The source for each instruction set compiles under that set's flags (and each is
    shaped for it: the accumulators fit its register file)."""
    features = VectorFeatures(*kind, 32 << 10)
    assert features_from_macros(gcc_macros(["-march=x86-64", *flags])).name == kind[0]
    compile_gemv_source(tmp_path, fmt, features, flags)
    assert features.accumulators * 2 <= features.registers


def compile_gemv_source(tmp_path, fmt: str, features, flags: list[str], **options) -> str:
    """A 96 x 100 GEMV's source for ``features``, compiled (object only) under ``flags``; the source."""
    roles = {"codes": 0, "scale": 1, "x": 2, "y": 3} | ({"min": 4} if fmt == "q4_1" else {})
    prelude = "#include <stdint.h>\n#include <string.h>\nstatic inline int rs_threads(void) { return 1; }\n"
    source = prelude + gemv_source("rs_kernel_test", fmt, 96, 100, roles, features, **options)
    path = tmp_path / "gemv.c"
    path.write_text(source)
    result = subprocess.run([find_compiler(), "-O2", "-march=x86-64", *flags, "-fopenmp", "-c", str(path),
                             "-o", str(tmp_path / "gemv.o"), "-Werror=implicit-function-declaration"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return source


def test_columns_per_tile_are_whole_groups_within_a_quarter_of_l1():
    """The output run and an epilogue's product run (8 bytes a column) in a quarter of L1,
    whole groups, at most 2048 columns, no wider than the layer needs."""
    for l1d in (32 << 10, 48 << 10, 16 << 10):
        for group in (16, 32, 64, 128):
            for cols in (1, 100, 576, 1536, 49152):
                tile = columns_per_tile(cols, group, l1d)
                assert tile % group == 0 and tile * 8 <= max(l1d // 4, group * 8) and tile <= 2048
                assert tile < cols + group
    assert columns_per_tile(49152, 32, 32 << 10) == 1024 and columns_per_tile(192, 32, 32 << 10) == 192
    assert columns_per_tile(49152, 64, 64 << 10) == 2048


def test_unsupported_shapes_and_formats_are_errors():
    features = VectorFeatures(*AVX2, 32 << 10)
    with pytest.raises(ValueError, match="whole 32-row blocks"):
        gemv_source("f", "q8_0", 48, 8, {}, features)
    with pytest.raises(ValueError, match="unsupported format"):
        gemv_source("f", "q5_k", 64, 8, {}, features)


# ---------------------------------------------------------------- fused epilogues
# epilogue kind -> (extra parameters, Relax lines after ``y = R.matmul(x, w)``, NumPy of z and inputs)
EPILOGUES = {
    "bias": (["b: R.Tensor((N,), 'float32')"], ["y = R.add(y, b)"], lambda z, t: z + t["b"]),
    "silu": ([], ["y = R.nn.silu(y)"], lambda z, t: z / (1 + np.exp(-z))),
    "bias_silu": (["b: R.Tensor((N,), 'float32')"], ["y = R.add(y, b)", "y = R.nn.silu(y)"],
                  lambda z, t: (z + t["b"]) / (1 + np.exp(-(z + t["b"])))),
    "gate": (["g: R.Tensor((1, N), 'float32')"], ["s = R.nn.silu(g)", "y = R.multiply(s, y)"],
             lambda z, t: t["g"] / (1 + np.exp(-t["g"])) * z),
    "residual": (["h: R.Tensor((1, N), 'float32')"], ["y = R.add(h, y)"], lambda z, t: t["h"] + z),
    "scaled_residual": (["h: R.Tensor((1, N), 'float32')", "b: R.Tensor((N,), 'float32')"],
                        ["y = R.multiply(y, b)", "y = R.add(y, h)"], lambda z, t: z * t["b"] + t["h"]),
}


def epilogue_module(fmt: str, rows: int, cols: int, kind: str):
    params, lines, _ = EPILOGUES[kind]
    mins = ", qm" if fmt == "q4_1" else ""
    extra = f', qm: R.Tensor(({rows // 32}, {cols}), "float32")' if fmt == "q4_1" else ""
    packed = rows // 2 if fmt.startswith("q4") else rows
    dtype = "uint8" if fmt.startswith("q4") else "int8"
    others = "".join(", " + p.replace("N", str(cols)) for p in params)
    body = "\n        ".join([f'w = R.dequantize(qd, qs{mins}, format="{fmt}")', "y = R.matmul(x, w)", *lines])
    return rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(x: R.Tensor((1, {rows}), "float32"), qd: R.Tensor(({packed}, {cols}), "{dtype}"),
         qs: R.Tensor(({rows // 32}, {cols}), "float32"){extra}{others}):
    with R.dataflow():
        {body}
        R.output(y)
    return y
""")})


def epilogue_inputs(kind: str, cols: int, rng) -> dict:
    shapes = {"b": (cols,), "g": (1, cols), "h": (1, cols)}
    return {p.split(":")[0]: rng.standard_normal(shapes[p.split(":")[0]]).astype(np.float32)
            for p in EPILOGUES[kind][0]}


@pytest.mark.parametrize("kind", sorted(EPILOGUES))
def test_epilogue_kinds_are_marked_with_their_steps(kind):
    """Every epilogue kind is one fused function whose product is this kernel; each
    elementwise stage is one scalar step, and the output is the last parameter."""
    func = next(iter(scheduled_module(epilogue_module("q8_0", 64, 40, kind)).prim_funcs.values()))
    spec = func.attrs.get(QUANTIZED_GEMV_ATTR)
    assert spec is not None and spec["roles"]["y"] == len(func.buffer_params) - 1
    epilogue = function_epilogue(func, spec["epilogue"])
    assert len(spec["epilogue"]["blocks"]) == len(EPILOGUES[kind][1])
    assert 1 <= len(epilogue["steps"]) <= len(EPILOGUES[kind][1])   # scheduling may inline stages
    assert "T.func_attr" in func.script()   # the attribute stays printable
    inputs = {b.name for b in epilogue["inputs"].values()}
    assert inputs == set(epilogue_inputs(kind, 40, np.random.default_rng(0)))


@FAST
@given(fmt=st.sampled_from(["q4_1", "q8_0", "q4_0"]), kind=st.sampled_from(sorted(EPILOGUES)),
       blocks=st.sampled_from([1, 3]), cols=st.integers(1, 200), seed=st.integers(0, 2**16))
def test_generated_gemv_with_epilogue_equals_numpy(fmt, kind, blocks, cols, seed):
    """Ragged columns, every format and epilogue kind: C (generated kernel) and the
    interpreter (the loop nest) against NumPy."""
    rows = 32 * blocks
    mod = epilogue_module(fmt, rows, cols, kind)
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    x = rng.standard_normal((1, rows)).astype(np.float32)
    others = epilogue_inputs(kind, cols, rng)
    z = x.astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)
    expected = EPILOGUES[kind][2](z, {k: v.astype(np.float64) for k, v in others.items()})
    built = rx.build(mod, target="c")
    assert f"{fmt} gemv {rows} x {cols}" in built.c_library.source and "rs_prod" in built.c_library.source
    got = rx.VirtualMachine(built)["main"](x, *tensors, *others.values())
    tol = dict(rtol=2e-4, atol=4e-4 * np.sqrt(rows))
    np.testing.assert_allclose(got, expected, **tol)
    np.testing.assert_allclose(rx.interpret(mod, "main", x, *tensors, *others.values()), expected, **tol)


def test_epilogue_changing_the_layout_is_not_applied_per_column():
    """A stage that is not elementwise over the output row (a transpose into a column) is
    not an epilogue the kernel applies per column; the result is right either way."""
    rows, cols = 64, 16
    mod = rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(x: R.Tensor((1, {rows}), "float32"), qd: R.Tensor(({rows}, {cols}), "int8"),
         qs: R.Tensor(({rows // 32}, {cols}), "float32")):
    with R.dataflow():
        w = R.dequantize(qd, qs, format="q8_0")
        y = R.matmul(x, w)
        z = R.permute_dims(y)
        R.output(z)
    return z
""")})
    for func in scheduled_module(mod).prim_funcs.values():
        if "permute_dims" in str(func.attrs.get("fused_from", ())):
            assert func.attrs.get(QUANTIZED_GEMV_ATTR) is None
    rng = np.random.default_rng(3)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), "q8_0")
    x = rng.standard_normal((1, rows)).astype(np.float32)
    got = rx.VirtualMachine(rx.build(mod, target="c"))["main"](x, *tensors)
    np.testing.assert_allclose(got, (x.astype(np.float64) @ dequantize_numpy(*tensors, format="q8_0")).T,
                               rtol=2e-4, atol=2e-3)


def test_epilogue_the_scheduled_function_lost_compiles_the_loop_nest():
    """If the recorded epilogue blocks are not found again, the emitter compiles the loop
    nest (right, slower) instead of a kernel without them."""
    from backends.c.codegen import generate_c
    from tensorir.transform import lower
    func = next(iter(scheduled_module(epilogue_module("q8_0", 64, 40, "bias")).prim_funcs.values()))
    spec = func.attrs[QUANTIZED_GEMV_ATTR]
    assert " gemv " in generate_c({"k": lower(func)}, signatures={"k": func})[0]
    lost = func.with_attr(QUANTIZED_GEMV_ATTR, spec | {"epilogue": {**spec["epilogue"], "blocks": ["gone"]}})
    assert " gemv " not in generate_c({"k": lower(lost)}, signatures={"k": lost})[0]


# ---------------------------------------------------------------- an input regrouped in front
def regrouped_module(fmt: str, x_shape: tuple, regroup: list[str], cols: int):
    """``y = regroup(x) @ dequantize(w) + h`` where ``regroup`` turns ``x`` into one row: the
    decode step's attention output (heads, 1, head_dim) going into the output projection."""
    rows = int(np.prod(x_shape))
    mins, extra = (", qm", f', qm: R.Tensor(({rows // 32}, {cols}), "float32")') if fmt == "q4_1" else ("", "")
    packed, dtype = (rows // 2, "uint8") if fmt.startswith("q4") else (rows, "int8")
    body = "\n        ".join([*regroup, f'w = R.dequantize(qd, qs{mins}, format="{fmt}")',
                               "y = R.matmul(r, w)", "y = R.add(h, y)"])
    return rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(x: R.Tensor({x_shape}, "float32"), qd: R.Tensor(({packed}, {cols}), "{dtype}"),
         qs: R.Tensor(({rows // 32}, {cols}), "float32"){extra}, h: R.Tensor((1, {cols}), "float32")):
    with R.dataflow():
        {body}
        R.output(y)
    return y
""")})


# (x shape, Relax lines making ``r`` (1, rows), whether the memory order is kept)
REGROUPS = {
    "heads_to_row": ((3, 3, 64), ["r = R.reshape(x, (1, 576))"], True),
    "unit_axis_permute": ((1, 3, 1, 64), ["t = R.permute_dims(x, (0, 2, 1, 3))", "r = R.reshape(t, (1, 192))"],
                          True),
    "grouped_heads": ((3, 3, 1, 32), ["t = R.permute_dims(x, (2, 0, 1, 3))", "r = R.reshape(t, (1, 288))"],
                      True),
    "transpose": ((2, 48), ["t = R.permute_dims(x, (1, 0))", "r = R.reshape(t, (1, 96))"], False),
    "computed": ((1, 64), ["r = R.multiply(x, x)"], False),
}


@pytest.mark.parametrize("case", sorted(REGROUPS))
@pytest.mark.parametrize("fmt", ["q4_1", "q8_0"])
def test_input_regrouped_in_memory_order_is_read_in_place(case, fmt):
    """Reshapes and permutes that keep the memory order leave the input where it is: the
    generated kernel reads the parameter as the row (the fused kernel of the model's
    attention output projection). A transpose or a computed input keeps the loop nest.
    Both equal the NumPy reference, in C and in the interpreter."""
    x_shape, regroup, in_place = REGROUPS[case]
    rows, cols = int(np.prod(x_shape)), 72
    mod = regrouped_module(fmt, x_shape, regroup, cols)
    spec = marked_spec(mod)
    assert (spec is not None) == in_place
    if in_place:
        func = next(iter(scheduled_module(mod).prim_funcs.values()))
        assert func.buffer_params[spec["roles"]["x"]].name == "x"
    rng = np.random.default_rng(len(case))
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    x = rng.standard_normal(x_shape).astype(np.float32)
    h = rng.standard_normal((1, cols)).astype(np.float32)
    row = {"transpose": x.T, "computed": x * x}.get(case, x).reshape(1, rows).astype(np.float64)
    expected = h + row @ dequantize_numpy(*tensors, format=fmt)
    built = rx.build(mod, target="c")
    assert (f"{fmt} gemv {rows} x {cols}" in built.c_library.source) == in_place
    got = rx.VirtualMachine(built)["main"](x, *tensors, h)
    np.testing.assert_allclose(got, expected, rtol=2e-4, atol=2e-4 * np.sqrt(rows))
    np.testing.assert_allclose(rx.interpret(mod, "main", x, *tensors, h), expected, rtol=2e-4,
                               atol=2e-4 * np.sqrt(rows))


# ---------------------------------------------------------------- the split among threads
def compiled_gemv(tmp_dir, fmt: str, rows: int, cols: int):
    """The generated kernel for the detected features as a shared library whose team size a
    test sets (``rs_set_team``), called through ctypes."""
    import ctypes
    roles = {"codes": 0, "scale": 1, "x": 2, "y": 3} | ({"min": 4} if fmt == "q4_1" else {})
    prelude = ("#include <stdint.h>\n#include <string.h>\nstatic int rs_team_size = 1;\n"
               "void rs_set_team(int n) { rs_team_size = n; }\n"
               "static inline int rs_threads(void) { return rs_team_size; }\n")
    path = tmp_dir / f"gemv_{fmt}_{rows}_{cols}.c"
    path.write_text(prelude + gemv_source("rs_gemv", fmt, rows, cols, roles, detect_features()))
    subprocess.run([find_compiler(), "-O2", "-march=native", "-fopenmp", "-shared", "-fPIC", str(path),
                    "-o", str(path.with_suffix(".so"))], check=True, capture_output=True)
    return ctypes.CDLL(str(path.with_suffix(".so"))), roles


@settings(max_examples=8, deadline=None)
@given(fmt=st.sampled_from(["q4_1", "q8_0", "q4_0"]), cols=st.sampled_from([1, 33, 577, 2053, 4100]),
       team=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_any_team_size_covers_every_column_once(tmp_path_factory, fmt, cols, team, seed):
    """Each thread takes a run of whole column groups, split at run time by the team's size;
    the ragged columns go to the last thread. Teams larger than the groups, ragged widths and
    widths of several tiles per thread all give dequantize-then-matmul (y starts as NaN: a
    column no thread wrote would show)."""
    import ctypes
    rows = 64
    library, roles = compiled_gemv(tmp_path_factory.mktemp("gemv"), fmt, rows, cols)
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    x = rng.standard_normal(rows).astype(np.float32)
    y = np.full(cols, np.nan, np.float32)
    operands = {"codes": tensors[0], "scale": tensors[1], "x": x, "y": y} | \
        ({"min": tensors[2]} if fmt == "q4_1" else {})
    pointers = (ctypes.c_void_p * len(roles))()
    for role, position in roles.items():
        pointers[position] = operands[role].ctypes.data
    library.rs_set_team(team)
    assert library.rs_gemv(pointers, None) == 0
    np.testing.assert_allclose(y, x.astype(np.float64) @ dequantize_numpy(*tensors, format=fmt),
                               rtol=2e-4, atol=2e-4 * np.sqrt(rows))
