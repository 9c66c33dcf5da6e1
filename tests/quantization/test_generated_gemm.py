"""The generated several-token quantized GEMM (backends/c/quantized_gemm.py): when the schedule
rule marks a kernel, what the C emitter puts in its place, and that it equals
dequantize-then-matmul (NumPy) for every format, token counts no register tile divides
(including 1, which runs the one-token GEMV), ragged columns and depths, and epilogues."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import relaxscript as rx
from backends.c.compiler import find_compiler
from backends.c.gemm import machine as gemm_machine
from backends.c.gemm.machine import MachineParams, machine_params
from backends.c.gemm.params import derive_params
from backends.c.quantized_gemm import MICRO_KERNEL_ATTR, gemm_source, gemm_tile
from backends.c.quantized_gemv import AVX2, AVX512, SSE, VectorFeatures
from backends.c.status import C_DEFINES
from relaxscript.quantization import dequantize_numpy, quantize_numpy
from tensorir.schedule_rules.quantized_gemm import QUANTIZED_GEMM_ATTR, function_element_epilogue

from .native_operands import run_kernel, team_library
from .test_dequantize_op import linear_module, scheduled_module

FAST = settings(max_examples=8, deadline=None)

# epilogue kind -> (extra parameters, Relax lines after ``y = R.matmul(x, w)``, NumPy of z and inputs)
EPILOGUES = {
    "none": ([], [], lambda z, t: z),
    "bias_silu": (["b: R.Tensor((N,), 'float32')"], ["y = R.add(y, b)", "y = R.nn.silu(y)"],
                  lambda z, t: (z + t["b"]) / (1 + np.exp(-(z + t["b"])))),
    "gate": (["g: R.Tensor((T, N), 'float32')"], ["s = R.nn.silu(g)", "y = R.multiply(s, y)"],
             lambda z, t: t["g"] / (1 + np.exp(-t["g"])) * z),
    "residual": (["h: R.Tensor((T, N), 'float32')"], ["y = R.add(h, y)"], lambda z, t: t["h"] + z),
    "scaled_residual": (["h: R.Tensor((T, N), 'float32')", "b: R.Tensor((N,), 'float32')"],
                        ["y = R.multiply(y, b)", "y = R.add(y, h)"], lambda z, t: z * t["b"] + t["h"]),
}


def gemm_module(fmt: str, rows: int, cols: int, kind: str = "none", batch: bool = False):
    """``y = epilogue(x @ dequantize(w))`` with ``x: (n, rows)`` or ``(1, n, rows)``."""
    params, lines, _ = EPILOGUES[kind]
    tokens = '1, "n"' if batch else '"n"'
    mins = ", qm" if fmt == "q4_1" else ""
    extra = f', qm: R.Tensor(({rows // 32}, {cols}), "float32")' if fmt == "q4_1" else ""
    packed = rows // 2 if fmt.startswith("q4") else rows
    dtype = "uint8" if fmt.startswith("q4") else "int8"
    others = "".join(", " + p.replace("T, N", f"{tokens}, {cols}").replace("N", str(cols)) for p in params)
    body = "\n        ".join([f'w = R.dequantize(qd, qs{mins}, format="{fmt}")', "y = R.matmul(x, w)", *lines])
    return rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(x: R.Tensor(({tokens}, {rows}), "float32"), qd: R.Tensor(({packed}, {cols}), "{dtype}"),
         qs: R.Tensor(({rows // 32}, {cols}), "float32"){extra}{others}):
    with R.dataflow():
        {body}
        R.output(y)
    return y
""")})


def inputs_for(kind: str, tokens: int, cols: int, batch: bool, rng) -> dict:
    lead = (1, tokens) if batch else (tokens,)
    shapes = {"b": (cols,), "g": (*lead, cols), "h": (*lead, cols)}
    return {p.split(":")[0]: rng.standard_normal(shapes[p.split(":")[0]]).astype(np.float32)
            for p in EPILOGUES[kind][0]}


def marked(mod):
    return [f for f in scheduled_module(mod).prim_funcs.values() if f.attrs.get(QUANTIZED_GEMM_ATTR)]


def test_the_rule_and_the_emitter_agree_on_the_attribute_name():
    assert QUANTIZED_GEMM_ATTR == MICRO_KERNEL_ATTR


@pytest.mark.parametrize("fmt", ["q4_1", "q8_0", "q4_0"])
def test_several_token_product_is_marked_with_roles_and_shape(fmt):
    [func] = marked(gemm_module(fmt, 96, 40))
    spec = func.attrs[QUANTIZED_GEMM_ATTR]
    assert {k: spec[k] for k in ("format", "rows", "cols")} == {"format": fmt, "rows": 96, "cols": 40}
    names = {role: func.buffer_params[i].name for role, i in spec["roles"].items()}
    expected = {"codes": "qd", "scale": "qs", "x": "x"} | ({"min": "qm"} if fmt == "q4_1" else {})
    assert {k: v for k, v in names.items() if k != "y"} == expected
    assert "epilogue" not in spec and "T.func_attr" in func.script()


@pytest.mark.parametrize("kind", sorted(set(EPILOGUES) - {"none"}))
def test_epilogues_are_recorded_and_found_again_per_element(kind):
    [func] = marked(gemm_module("q8_0", 64, 40, kind))
    spec = func.attrs[QUANTIZED_GEMM_ATTR]
    assert len(spec["epilogue"]["blocks"]) == len(EPILOGUES[kind][1])
    chain = function_element_epilogue(func, spec["epilogue"])
    assert 1 <= len(chain["steps"]) <= len(EPILOGUES[kind][1])
    assert {b.name for b in chain["inputs"].values()} == {p.split(":")[0] for p in EPILOGUES[kind][0]}


def test_one_token_and_transposed_outputs_are_not_this_kernel():
    assert not marked(linear_module("q4_1", 64, 40, tokens="1"))                     # the GEMV's
    # float16 scales are (test_f16_scales.py)
    assert marked(linear_module("q4_1", 64, 40, scale_dtype="float16"))
    mod = rx.IRModule({"main": rx.from_source("""
from relaxscript import R
@R.function
def main(x: R.Tensor(("n", 64), "float32"), qd: R.Tensor((64, 16), "int8"),
         qs: R.Tensor((2, 16), "float32")):
    with R.dataflow():
        y = R.matmul(x, R.dequantize(qd, qs, format="q8_0"))
        z = R.permute_dims(y)
        R.output(z)
    return z
""")})
    for func in marked(mod):   # a transpose after the product is not an elementwise epilogue
        assert "permute_dims" not in str(func.attrs.get("fused_from", ()))


def check(mod, fmt, rows, cols, kind, batch, tokens, seed, interpreter=True):
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    built = rx.build(mod, target="c")
    assert f"{fmt} gemm n x {rows} x {cols}" in built.c_library.source
    run = rx.VirtualMachine(built)["main"]
    tol = dict(rtol=2e-4, atol=4e-4 * np.sqrt(rows))
    for count in tokens:
        x = rng.standard_normal(((1,) if batch else ()) + (count, rows)).astype(np.float32)
        others = inputs_for(kind, count, cols, batch, rng)
        z = x.astype(np.float64) @ dequantize_numpy(*tensors, format=fmt)
        expected = EPILOGUES[kind][2](z, {k: v.astype(np.float64) for k, v in others.items()})
        np.testing.assert_allclose(run(x, *tensors, *others.values()), expected, **tol)
        if interpreter:
            np.testing.assert_allclose(rx.interpret(mod, "main", x, *tensors, *others.values()), expected, **tol)


@FAST
@given(fmt=st.sampled_from(["q4_1", "q8_0", "q4_0"]), kind=st.sampled_from(sorted(EPILOGUES)),
       blocks=st.sampled_from([1, 3]), cols=st.integers(1, 70), batch=st.booleans(),
       tokens=st.lists(st.sampled_from([1, 2, 7, 13, 20]), min_size=1, max_size=2, unique=True),
       seed=st.integers(0, 2**16))
def test_generated_gemm_equals_dequantize_then_matmul(fmt, kind, blocks, cols, batch, tokens, seed):
    """Every format and epilogue, columns no register tile divides, token counts including 1
    (the one-token GEMV inside the kernel) and others no ``mr`` divides, ``x`` of rank 2 or
    3: C (generated kernel) and the interpreter (the loop nest it replaces) against NumPy."""
    rows = 32 * blocks
    check(gemm_module(fmt, rows, cols, kind, batch), fmt, rows, cols, kind, batch, tokens, seed)


@pytest.mark.parametrize("fmt, kind", [("q4_1", "residual"), ("q8_0", "gate"), ("q4_0", "none")])
def test_deep_weights_span_several_decoded_panels_and_row_chunks(fmt, kind):
    """Depths past one ``kc`` panel (a ragged last one) and token counts past one ``mc`` chunk
    of rows (a ragged last one), on the C build: 1536 = SmolLM2's ffn_down depth."""
    machine = machine_params()
    for rows in (32 * 10, 1536):
        tile = gemm_tile(derive_params(machine), rows, machine.l2_bytes)
        assert rows > tile.kc
        tokens = [64, tile.mc + 5] if rows == 1536 else [tile.mr * 3 + 1]
        check(gemm_module(fmt, rows, 37, kind), fmt, rows, 37, kind, False, tokens, seed=rows,
              interpreter=False)


def test_tiles_follow_registers_and_caches():
    """The generated GEMM's register tile (``backends/c/gemm``), panels of whole 32-row blocks
    within half of L1, a chunk of ``x`` (``mc x depth`` floats) within half of L2."""
    for isa in (gemm_machine.AVX2, gemm_machine.AVX512, gemm_machine.SSE):
        params = derive_params(MachineParams(isa, 32 << 10, 512 << 10, 8 << 20, 2))
        for depth in (32, 576, 1536, 8192):
            tile = gemm_tile(params, depth, 512 << 10)
            assert (tile.mr, tile.nr) == (params.mr, params.nr)
            assert tile.kc % 32 == 0 and tile.kc * tile.nr * 4 <= 16 << 10
            assert tile.mc % tile.mr == 0 and (tile.mc * depth * 4 <= 256 << 10 or tile.mc == tile.mr)
    avx2 = derive_params(MachineParams(gemm_machine.AVX2, 32 << 10, 512 << 10, 8 << 20, 2))
    assert (gemm_tile(avx2, 576, 512 << 10).mc, gemm_tile(avx2, 1536, 512 << 10).mc) == (108, 42)


def source_of(mod) -> str:
    return rx.build(mod, target="c").c_library.source


def test_disabled_generated_kernels_compile_the_loop_nest(monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_GENERATED_KERNELS", "0")
    assert " gemm n x " not in source_of(gemm_module("q4_1", 64, 40, "residual"))


def test_epilogue_the_scheduled_function_lost_compiles_the_loop_nest():
    from backends.c.codegen import generate_c
    from tensorir.transform import lower
    [func] = marked(gemm_module("q8_0", 64, 40, "bias_silu"))
    spec = func.attrs[QUANTIZED_GEMM_ATTR]
    assert " gemm n x " in generate_c({"k": lower(func)}, signatures={"k": func})[0]
    lost = func.with_attr(QUANTIZED_GEMM_ATTR, spec | {"epilogue": {**spec["epilogue"], "blocks": ["gone"]}})
    assert " gemm n x " not in generate_c({"k": lower(lost)}, signatures={"k": lost})[0]


@pytest.mark.parametrize("kind, flags", [(AVX2, ["-mavx2", "-mfma"]), (AVX512, ["-mavx512f", "-mavx512bw"]),
                                         (SSE, ["-msse2"])])
@pytest.mark.parametrize("fmt", ["q4_1", "q8_0", "q4_0"])
def test_source_for_each_feature_set_compiles(tmp_path, kind, flags, fmt):
    features = VectorFeatures(*kind, 32 << 10)
    roles = {"codes": 0, "scale": 1, "x": 2, "y": 3} | ({"min": 4} if fmt == "q4_1" else {})
    prelude = (C_DEFINES + "\n#include <stdint.h>\n#include <string.h>\n#include <stddef.h>\n"
               "static inline int rs_threads(void) { return 1; }\n")
    isa = {"avx2": gemm_machine.AVX2, "avx512": gemm_machine.AVX512,
           "sse": gemm_machine.SSE}[kind[0]]
    machine = MachineParams(isa, 32 << 10, 512 << 10, 8 << 20, 2)
    source = prelude + gemm_source("rs_kernel_test", fmt, 320, 100, roles, features, "rs_syms[0]",
                                   machine=machine)
    path = tmp_path / "gemm.c"
    path.write_text(source)
    result = subprocess.run([find_compiler(), "-O2", "-march=x86-64", *flags, "-fopenmp", "-c", str(path),
                             "-o", str(tmp_path / "gemm.o"), "-Werror=implicit-function-declaration"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_unsupported_shapes_and_formats_are_errors():
    features = VectorFeatures(*AVX2, 32 << 10)
    with pytest.raises(ValueError, match="whole 32-row blocks"):
        gemm_source("f", "q8_0", 48, 8, {}, features, "1")
    with pytest.raises(ValueError, match="unsupported format"):
        gemm_source("f", "q5_k", 64, 8, {}, features, "1")


def heads_module(fmt: str, heads: int, head_dim: int, cols: int, tokens: str = '"n"'):
    """The attention output projection: ``(heads, n, d)`` transposed and reshaped to
    ``(n, heads * d)`` in front of the product, a residual after it."""
    rows = heads * head_dim
    mins = ", qm" if fmt == "q4_1" else ""
    extra = f', qm: R.Tensor(({rows // 32}, {cols}), "float32")' if fmt == "q4_1" else ""
    packed, dtype = (rows // 2, "uint8") if fmt.startswith("q4") else (rows, "int8")
    return rx.IRModule({"main": rx.from_source(f"""
from relaxscript import R
@R.function
def main(a: R.Tensor(({heads}, {tokens}, {head_dim}), "float32"), qd: R.Tensor(({packed}, {cols}), "{dtype}"),
         qs: R.Tensor(({rows // 32}, {cols}), "float32"){extra}, h: R.Tensor(({tokens}, {cols}), "float32")):
    with R.dataflow():
        p = R.permute_dims(a, [1, 0, 2])
        x = R.reshape(p, ({tokens.strip('"')}, {rows}))
        y = R.matmul(x, R.dequantize(qd, qs{mins}, format="{fmt}"))
        z = R.add(h, y)
        R.output(z)
    return z
""")})


@FAST
@given(fmt=st.sampled_from(["q4_1", "q8_0", "q4_0"]), heads=st.sampled_from([2, 3]),
       cols=st.integers(1, 40), tokens=st.lists(st.sampled_from([1, 3, 8]), min_size=1, max_size=2),
       seed=st.integers(0, 2**16))
def test_rows_gathered_through_a_transpose_equal_numpy(fmt, heads, cols, tokens, seed):
    """``x`` is not a parameter but a transpose + reshape of one: the kernel gathers its rows
    (one token included) with the layout blocks composed; C and the interpreter vs NumPy."""
    head_dim, rows = 32, 32 * heads
    mod = heads_module(fmt, heads, head_dim, cols)
    [func] = marked(mod)
    assert "x" not in func.attrs[QUANTIZED_GEMM_ATTR]["roles"]
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt)
    built = rx.build(mod, target="c")
    assert f"{fmt} gemm n x {rows} x {cols}" in built.c_library.source and "rs_xrows" in built.c_library.source
    for count in tokens:
        a = rng.standard_normal((heads, count, head_dim)).astype(np.float32)
        h = rng.standard_normal((count, cols)).astype(np.float32)
        x = a.transpose(1, 0, 2).reshape(count, rows).astype(np.float64)
        expected = h + x @ dequantize_numpy(*tensors, format=fmt)
        tol = dict(rtol=2e-4, atol=4e-4 * np.sqrt(rows))
        np.testing.assert_allclose(rx.VirtualMachine(built)["main"](a, *tensors, h), expected, **tol)
        np.testing.assert_allclose(rx.interpret(mod, "main", a, *tensors, h), expected, **tol)



# standalone builds: (features, the GEMM tiles' ISA, gcc flags); the AVX2 and SSE ones are the
# fallbacks an AVX2-only or older machine compiles, forced here with -march=x86-64
STANDALONE_BUILDS = {
    "native": (None, None, ["-march=native"]),
    "avx2": (AVX2, gemm_machine.AVX2, ["-march=x86-64", "-mavx2", "-mfma", "-mf16c"]),
    "sse": (SSE, gemm_machine.SSE, ["-march=x86-64"]),
}
# epilogue kind -> (C epilogue for row rs_row, the same at row 0 for the one-token GEMV, NumPy of z and t)
STANDALONE_EPILOGUES = {
    "none": None,
    "residual": ("const float rs_h = h[rs_row * {cols} + rs_col];", "rs_prod + rs_h", lambda z, t: z + t),
    "gate": ("const float rs_g = h[rs_row * {cols} + rs_col];", "rs_prod * (rs_g / (1.0f + expf(-rs_g)))",
             lambda z, t: z * t / (1 + np.exp(-t))),
}


def _standalone_epilogue(kind: str, cols: int, one_row: bool):
    from backends.c.quantized_gemv import ColumnEpilogue
    if STANDALONE_EPILOGUES[kind] is None:
        return None
    statement, result, _ = STANDALONE_EPILOGUES[kind]
    statement = statement.format(cols=cols)
    if one_row:
        statement = statement.replace("rs_row * ", "0 * ")
    return ColumnEpilogue(("const float* restrict h = (const float*)rs_buffers[5];",), (statement,), result)


def standalone_gemm(tmp_dir, build: str, fmt: str, rows: int, cols: int, kind: str, scale_dtype: str,
                    l1d: int, l2: int):
    """The generated GEMM alone in a shared library whose team size the caller sets; small caches
    make several ``kc`` panels (a ragged last one) and several row chunks at a few tokens."""
    from backends.c.quantized_gemv import detect_features
    kind_features, isa, flags = STANDALONE_BUILDS[build]
    features = detect_features() if kind_features is None else VectorFeatures(*kind_features, 32 << 10)
    machine = MachineParams(isa or machine_params().isa, l1d, l2, 8 << 20, 2)
    roles = {"codes": 0, "scale": 1, "x": 2, "y": 3} | ({"min": 4} if fmt == "q4_1" else {})
    source = gemm_source("rs_gemm", fmt, rows, cols, roles, features, "rs_syms[0]",
                         epilogue=_standalone_epilogue(kind, cols, False),
                         one_row_epilogue=_standalone_epilogue(kind, cols, True), machine=machine,
                         scale_dtype=scale_dtype)
    library = team_library(tmp_dir, source, flags)
    return library, roles, gemm_tile(derive_params(machine), rows, l2)


def _has_avx512() -> bool:
    from backends.c.quantized_gemv import detect_features
    return detect_features().name == "avx512"


@settings(max_examples=12, deadline=None)
@given(build=st.sampled_from(sorted(STANDALONE_BUILDS)), fmt=st.sampled_from(["q4_1", "q8_0", "q4_0"]),
       kind=st.sampled_from(sorted(STANDALONE_EPILOGUES)), blocks=st.sampled_from([1, 3, 7]),
       cols=st.integers(1, 100), scale_dtype=st.sampled_from(["float32", "float16"]),
       tokens=st.lists(st.integers(1, 70), min_size=2, max_size=4), teams=st.lists(st.integers(1, 5), min_size=2,
                                                                                    max_size=2),
       caches=st.sampled_from([(8 << 10, 32 << 10), (48 << 10, 2 << 20)]), seed=st.integers(0, 2**16))
def test_standalone_gemm_any_rows_team_and_instruction_set(tmp_path_factory, build, fmt, kind, blocks, cols,
                                                          scale_dtype, tokens, teams, caches, seed):
    """Row counts 1..70 (ragged register tiles: each has its own micro-kernel; chunks evened out in
    whole tiles), teams of 1..5 threads (more than the column panels included: threads split
    whole panels), several ``kc`` panels and row chunks (small caches), ragged columns, every
    format, float16 scales and epilogues, on the native build and the forced AVX2 and SSE
    fallbacks; y starts as NaN, so an element no thread wrote shows."""
    if build == "native" and not _has_avx512():
        build = "avx2"
    rows = 32 * blocks
    library, roles, tile = standalone_gemm(tmp_path_factory.mktemp("qgemm"), build, fmt, rows, cols, kind,
                                           scale_dtype, *caches)
    rng = np.random.default_rng(seed)
    tensors = quantize_numpy(rng.standard_normal((rows, cols)), fmt, scale_dtype)
    weight = dequantize_numpy(*tensors, format=fmt)
    if tile.mc < 70:
        tokens = tokens + [tile.mc + 1]          # a second chunk
    for count, team in zip(tokens, teams * len(tokens)):
        x = rng.standard_normal((count, rows)).astype(np.float32)
        h = rng.standard_normal((count, cols)).astype(np.float32)
        y = np.full((count, cols), np.nan, np.float32)
        run_kernel(library, tensors, roles, x, y, h, team, tokens=count)
        z = x.astype(np.float64) @ weight
        expected = z if STANDALONE_EPILOGUES[kind] is None else STANDALONE_EPILOGUES[kind][2](z, h.astype(np.float64))
        np.testing.assert_allclose(y, expected, rtol=2e-4, atol=4e-4 * np.sqrt(rows),
                                   err_msg=f"{build} {fmt} {kind} n={count} team={team} tile={tile}")
