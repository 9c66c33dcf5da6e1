"""Issue 15 item 3: packed and extern calls as TVMScript writes them (``R.call_dps_packed``,
``R.call_pure_packed``, ``R.call_packed``) into functions registered with
``rx.register_func`` (Python) or ``rx.register_c_func`` (C, in a shared library)."""
from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

import relaxscript as rx
from backends.library import UnknownLibraryError
from tensorir.errors import ParseError

from .tvm_compat import TARGETS, assert_round_trip, assert_runs_alike, module_of

PACKED = '''
@R.function
def main(x: R.Tensor(("n", 3), dtype="float32")) -> R.Tensor(("n", 3), dtype="float32"):
    n = T.int64()
    with R.dataflow():
        lv = R.call_dps_packed("test_tvm.scale_rows", (x,), out_sinfo=R.Tensor((n, 3), dtype="float32"))
        lv1: R.Tensor((n, 3), dtype="float32") = R.call_pure_packed("test_tvm.square", lv, sinfo_args=R.Tensor((n, 3), dtype="float32"))
        gv: R.Tensor((n, 3), dtype="float32") = R.add(lv1, x)
        R.output(gv)
    seen: R.Tuple = R.call_packed("test_tvm.record", gv, sinfo_args=R.Tuple())
    return gv
'''

SEEN: list = []


@pytest.fixture
def python_functions():
    def scale_rows(x, out):
        out[...] = x * np.arange(1, x.shape[0] + 1, dtype=x.dtype)[:, None]
    rx.register_func("test_tvm.scale_rows", scale_rows, dps=True)
    rx.register_func("test_tvm.square")(lambda x: x * x)

    @rx.register_func("test_tvm.record")
    def record(x):
        SEEN.append(x.shape)
    yield
    for name in ("test_tvm.scale_rows", "test_tvm.square", "test_tvm.record"):
        rx.unregister_func(name)


def _expected(x):
    scaled = x * np.arange(1, x.shape[0] + 1, dtype="float32")[:, None]
    return scaled * scaled + x


def test_packed_forms_round_trip(python_functions):
    text = assert_round_trip(module_of(PACKED))
    assert 'R.call_dps_packed("test_tvm.scale_rows", (x,), out_sinfo=' in text
    assert 'R.call_pure_packed("test_tvm.square", lv, sinfo_args=' in text
    assert 'R.call_packed("test_tvm.record", gv, sinfo_args=[R.Tuple()])' in text


@pytest.mark.parametrize("n", [0, 1, 4])
def test_python_functions_run_on_every_target(python_functions, n):
    SEEN.clear()
    x = np.random.default_rng(n).standard_normal((n, 3)).astype("float32")
    assert_runs_alike(module_of(PACKED), x, expected=_expected(x))
    assert SEEN == [(n, 3)] * (1 + len(TARGETS))   # the interpreter, then each target's VM


def test_unregistered_name_is_a_clear_error():
    mod = module_of(PACKED)
    with pytest.raises(UnknownLibraryError, match="test_tvm.scale_rows"):
        rx.interpret(mod, "main", np.zeros((2, 3), "float32"))


def test_call_tir_with_a_string_callee_is_a_parse_error():
    with pytest.raises(ParseError, match="R.call_tir: the callee must be a prim_func") as info:
        rx.from_source('''
@R.function
def main(x: R.Tensor((4,), "float32")):
    y = R.call_tir("my_kernel", (x,), R.Tensor((4,), "float32"))
    return y
''')
    assert info.value.lineno == 4


def test_call_pure_packed_needs_its_result_annotation():
    with pytest.raises(ParseError, match="sinfo_args"):
        rx.from_source('''
@R.function
def main(x: R.Tensor((4,), "float32")):
    y = R.call_pure_packed("f", x)
    return y
''')


C_SOURCE = r'''
#include <stdint.h>
/* out[i, j] = 2 * a[i, j] + b[j]; params: a's dims, b's dims, out's dims */
int32_t axpy_rows(void* const* operands, const int64_t* params) {
    const float* a = (const float*)operands[0];
    const float* b = (const float*)operands[1];
    float* out = (float*)operands[2];
    int64_t n = params[0], m = params[1];
    if (params[2] != m) return 3;
    for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j < m; ++j)
            out[i * m + j] = 2.0f * a[i * m + j] + b[j];
    return 0;
}
'''

C_CALL = '''
@R.function
def main(a: R.Tensor(("n", "m"), dtype="float32"), b: R.Tensor(("k",), dtype="float32")):
    n = T.int64()
    m = T.int64()
    k = T.int64()
    with R.dataflow():
        gv = R.call_dps_packed("test_tvm.axpy_rows", (a, b), out_sinfo=R.Tensor((n, m), dtype="float32"))
        R.output(gv)
    return gv
'''


@pytest.fixture
def c_function(tmp_path):
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler on this machine")
    source = tmp_path / "axpy.c"
    source.write_text(C_SOURCE)
    library = tmp_path / "libaxpy.so"
    subprocess.run([compiler, "-shared", "-fPIC", "-O2", str(source), "-o", str(library)], check=True)
    rx.register_c_func("test_tvm.axpy_rows", library, "axpy_rows")
    yield
    rx.unregister_func("test_tvm.axpy_rows")


@pytest.mark.parametrize("n,m", [(0, 2), (3, 5)])
def test_c_function_runs_in_the_interpreter_and_both_vms(c_function, n, m):
    rng = np.random.default_rng(n)
    a = rng.standard_normal((n, m)).astype("float32")
    b = rng.standard_normal(m).astype("float32")
    mod = module_of(C_CALL)
    assert_round_trip(mod)
    assert_runs_alike(mod, a, b, expected=2 * a + b)


def test_c_function_failure_status_is_an_exception(c_function):
    mod = module_of(C_CALL)
    a, b = np.ones((2, 3), "float32"), np.ones(4, "float32")
    with pytest.raises(RuntimeError, match="status 3"):
        rx.interpret(mod, "main", a, b)
    vm = rx.VirtualMachine(rx.build(mod, target="c"))
    with pytest.raises(RuntimeError, match="status 3"):
        vm["main"](a, b)


def test_register_c_func_validates_the_library(tmp_path):
    with pytest.raises(FileNotFoundError):
        rx.register_c_func("test_tvm.missing", tmp_path / "nothing.so")
    (tmp_path / "bad.so").write_text("not a library")
    with pytest.raises(ValueError, match="cannot load"):
        rx.register_c_func("test_tvm.bad", tmp_path / "bad.so")


def test_returning_call_of_a_dps_function_is_a_clear_error(python_functions):
    mod = module_of('''
@R.function
def main(x: R.Tensor((3,), "float32")):
    y = R.call_pure_packed("test_tvm.scale_rows", x, sinfo_args=R.Tensor((3,), "float32"))
    return y
''')
    with pytest.raises(UnknownLibraryError, match="destination-passing form"):
        rx.interpret(mod, "main", np.ones(3, "float32"))


# s13: a registered Python function that writes an array it was given to read. Before, the
# reference interpreter handed it a NumPy view of the parameter (permute_dims), so the
# caller's x changed and the result was 2 where every build (a kernel's fresh buffer, a host
# copy on OpenCL) gave 1 and left x alone. Now its inputs are read-only on every level.
WRITES_ITS_INPUT = '''
@R.function
def main(x: R.Tensor((2, 3), dtype="float32")):
    with R.dataflow():
        p = R.permute_dims(x)
        y = CALL
        z = R.add(R.permute_dims(y), x)
        R.output(z)
    return z
'''
WRITING_CALLS = {
    "pure": 'R.call_pure_packed("test_tvm.inc", p, sinfo_args=R.Tensor((3, 2), dtype="float32"))',
    "dps returning": 'R.call_dps_packed("test_tvm.inc", (p,), out_sinfo=R.Tensor((3, 2), dtype="float32"))',
    "dps": 'R.call_dps_packed("test_tvm.inc_dps", (p,), out_sinfo=R.Tensor((3, 2), dtype="float32"))',
}


@pytest.fixture
def writing_functions():
    def inc(a):
        a += 1
        return a.copy()

    def inc_dps(a, out):
        a += 1
        out[...] = a
    rx.register_func("test_tvm.inc", inc)
    rx.register_func("test_tvm.inc_dps", inc_dps, dps=True)
    yield
    for name in ("test_tvm.inc", "test_tvm.inc_dps"):
        rx.unregister_func(name)


def _levels(mod):
    yield "interpret", lambda *args: rx.interpret(mod, "main", *args)
    for target in TARGETS:
        yield target, rx.VirtualMachine(rx.build(mod, target=target))["main"]


@pytest.mark.parametrize("form", sorted(WRITING_CALLS))
def test_a_registered_function_writing_its_input_is_an_error_on_every_level(writing_functions, form):
    mod = module_of(WRITES_ITS_INPUT.replace("CALL", WRITING_CALLS[form]))
    for level, run in _levels(mod):
        x = np.zeros((2, 3), "float32")
        with pytest.raises(rx.PackedArgumentWriteError, match="function 'main': registered function "
                                                              "'test_tvm.inc(_dps)?' wrote into an argument"):
            run(x)
        assert not x.any(), level


IMPURE_WRITES = '''
@R.function(pure=False)
def main(x: R.Tensor((3,), dtype="float32")):
    out = R.builtin.alloc_tensor(R.shape([3]), R.dtype("float32"), R.prim_value(0))
    _ = R.call_packed("test_tvm.fill", WRITTEN, sinfo_args=R.Tuple())
    y = R.add(out, x)
    return y
'''


@pytest.fixture
def fill_function():
    def fill(a, out):
        out[...] = a * 2
    rx.register_func("test_tvm.fill", fill)
    yield
    rx.unregister_func("test_tvm.fill")


def test_call_packed_writes_the_allocation_it_is_given_on_every_level(fill_function):
    """TVM's lowered DPS form, ``R.call_packed("f", x, out)`` into an ``R.builtin.alloc_tensor``:
    the allocation is writeable (and written back from the host copy on OpenCL)."""
    mod = module_of(IMPURE_WRITES.replace("WRITTEN", "x, out"))
    x = np.array([1, 2, 3], "float32")
    for level, run in _levels(mod):
        np.testing.assert_array_equal(run(x), x * 3, err_msg=level)


def test_call_packed_writing_a_parameter_is_an_error_on_every_level(fill_function):
    mod = module_of(IMPURE_WRITES.replace("WRITTEN", "out, x"))
    for level, run in _levels(mod):
        x = np.array([1, 2, 3], "float32")
        with pytest.raises(rx.PackedArgumentWriteError, match="'test_tvm.fill' wrote into"):
            run(x)
        np.testing.assert_array_equal(x, [1, 2, 3], err_msg=level)
