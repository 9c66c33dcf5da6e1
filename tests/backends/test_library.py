"""The library registry behind R.call_dps_library."""
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from backends import (UnknownLibraryError, get_library, has_library, list_libraries, register_library,
                      unregister_library)
from tensorir.errors import ShapeMismatchError


@pytest.fixture
def scratch_name():
    name = "test.scratch_library"
    unregister_library(name)
    yield name
    unregister_library(name)


def test_numpy_ufunc_names_resolve_automatically():
    for name, fn in [("numpy.negative", np.negative), ("numpy.exp", np.exp),
                     ("numpy.add", np.add), ("numpy.matmul", np.matmul), ("numpy.maximum", np.maximum)]:
        entry = get_library(name)
        assert entry.numpy_impl is fn and not entry.dps
        assert has_library(name)


def test_non_ufunc_numpy_attribute_is_not_a_library():
    assert not has_library("numpy.reshape")
    with pytest.raises(UnknownLibraryError):
        get_library("numpy.reshape")


def test_unknown_name_suggests_close_matches():
    with pytest.raises(UnknownLibraryError, match="numpy.negative") as info:
        get_library("numpy.negativ")
    assert "did you mean" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_unknown_name_without_close_match_lists_registered():
    with pytest.raises(UnknownLibraryError) as info:
        get_library("zzz.qqq")
    assert "did you mean" not in str(info.value)
    assert "numpy.softmax" in str(info.value)


def test_register_returning_form_and_run_dps(scratch_name):
    register_library(scratch_name, lambda a, b: a * b + 1)
    a, b = np.arange(6, dtype="float32").reshape(2, 3), np.full((2, 3), 2, "float32")
    out = np.empty((2, 3), "float32")
    get_library(scratch_name).run_dps([a, b], [out])
    np.testing.assert_array_equal(out, a * b + 1)
    assert scratch_name in list_libraries()


def test_register_dps_form_with_decorator(scratch_name):
    @register_library(scratch_name, dps=True)
    def scale_into(x, out):
        np.multiply(x, 3, out=out)

    entry = get_library(scratch_name)
    assert entry.dps and entry.numpy_impl is scale_into
    x = np.arange(4, dtype="int32")
    out = np.zeros(4, "int32")
    entry.run_dps([x], [out])
    np.testing.assert_array_equal(out, x * 3)


def test_returning_form_with_several_outputs(scratch_name):
    register_library(scratch_name, lambda x: (x + 1, x.sum(keepdims=True)))
    x = np.arange(3, dtype="float64")
    outs = [np.empty(3), np.empty(1)]
    get_library(scratch_name).run_dps([x], outs)
    np.testing.assert_array_equal(outs[0], x + 1)
    np.testing.assert_array_equal(outs[1], [3.0])


def test_returning_form_checks_shape_dtype_and_count(scratch_name):
    register_library(scratch_name, lambda x: x.reshape(-1))
    entry = get_library(scratch_name)
    x = np.ones((2, 2), "float32")
    with pytest.raises(ShapeMismatchError, match=r"expected shape \(2, 2\), got \(4,\)"):
        entry.run_dps([x], [np.empty((2, 2), "float32")])
    with pytest.raises(ShapeMismatchError, match="expected dtype int32, got float32"):
        entry.run_dps([x], [np.empty(4, "int32")])
    with pytest.raises(ShapeMismatchError, match="returned 1 value"):
        entry.run_dps([x], [np.empty(4, "float32"), np.empty(4, "float32")])


def test_target_implementations_merge_into_one_entry(scratch_name):
    impl = lambda x: x  # noqa: E731
    register_library(scratch_name, impl)
    register_library(scratch_name, c="my_c_symbol")
    register_library(scratch_name, cuda="my_cuda_symbol")
    entry = get_library(scratch_name)
    assert entry.numpy_impl is impl
    assert entry.impl_for("c") == "my_c_symbol" and entry.impl_for("cuda") == "my_cuda_symbol"
    with pytest.raises(UnknownLibraryError, match="no implementation for target 'opencl'"):
        entry.impl_for("opencl")


def test_conflicting_registrations_are_rejected(scratch_name):
    register_library(scratch_name, np.negative, c="sym_a")
    with pytest.raises(ValueError, match="already has a NumPy implementation"):
        register_library(scratch_name, np.positive)
    with pytest.raises(ValueError, match="target 'c'"):
        register_library(scratch_name, c="sym_b")
    with pytest.raises(ValueError, match="non-empty string"):
        register_library("", np.negative)


def test_target_only_entry_has_no_numpy_implementation(scratch_name):
    register_library(scratch_name, c="only_c")
    with pytest.raises(UnknownLibraryError, match="no NumPy implementation"):
        get_library(scratch_name).run_dps([np.ones(1)], [np.empty(1)])


@settings(max_examples=25, deadline=None)
@given(hnp.arrays("float32", hnp.array_shapes(min_dims=1, max_dims=3, max_side=5),
                  elements=st.floats(-30, 30, width=32)))
def test_numpy_softmax_matches_definition(x):
    out = np.empty_like(x)
    get_library("numpy.softmax").run_dps([x], [out])
    e = np.exp(x.astype("float64") - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)
    assert out.dtype == np.float32


def test_numpy_transpose_and_sum():
    x = np.arange(6, dtype="int64").reshape(2, 3)
    out = np.empty((3, 2), "int64")
    get_library("numpy.transpose").run_dps([x], [out])
    np.testing.assert_array_equal(out, x.T)
    total = np.empty((), "int64")
    get_library("numpy.sum").run_dps([x], [total])
    assert total == 15


def test_backends_does_not_import_relaxscript():
    code = "import sys, backends; sys.exit(1 if 'relaxscript' in sys.modules else 0)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env={"PYTHONPATH": "src"}, cwd=_repo_root())
    assert result.returncode == 0, result.stderr


def _repo_root():
    from pathlib import Path
    return str(Path(__file__).resolve().parents[2])


_VM_SCRATCH_SOURCE = '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32")) -> R.Tensor(("n", 4), "float32"):
        n = R.sym_var()
        y = R.call_dps_library("test.scratch_library", [x], R.Tensor((n, 4), "float32"))
        return y
'''


@pytest.mark.parametrize("dps", [True, False])
def test_vm_calls_both_forms_and_names_the_function_in_errors(scratch_name, dps):
    import relaxscript as rx

    def triple_into(x, out):
        if x.shape[0] == 3:
            raise ShapeMismatchError("three rows are refused")
        np.multiply(x, 3, out=out)

    register_library(scratch_name, triple_into if dps else (lambda x: triple_into(x, np.empty_like(x)) or x * 3),
                     dps=dps)
    main = rx.VirtualMachine(rx.build(rx.from_source(_VM_SCRATCH_SOURCE), target="c"))["main"]
    x = np.arange(8, dtype="float32").reshape(2, 4)
    np.testing.assert_array_equal(main(x), x * 3)
    with pytest.raises(ShapeMismatchError, match="function 'main': three rows are refused"):
        main(np.zeros((3, 4), "float32"))
