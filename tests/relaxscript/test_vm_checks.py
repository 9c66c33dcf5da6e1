"""Run-time checks of the VM: wrong arguments and failed match_casts raise
ShapeMismatchError naming function, parameter, symbolic var, expected and actual."""
import numpy as np
import pytest

import relaxscript as rx
from tensorir.errors import ShapeMismatchError
from tests.relaxscript import vm_modules as M
from tests.targets import AVAILABLE_VM_TARGETS, VM_TARGETS

BOUNDED = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 4), "float32"), y: R.Tensor(("n * 2",), "float32")):
        n = T.int64(upper=8)
        with R.dataflow():
            a = R.exp(x)
            R.output(a)
        return (a, y)
'''

CAST = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(ndim=1, dtype="float32")):
        with R.dataflow():
            v = R.match_cast(x, R.Tensor((4,), "float32"))
            w = R.exp(v)
            R.output(w)
        return w
'''


@pytest.fixture(scope="module", params=VM_TARGETS)
def vms(request):
    build = lambda text: rx.VirtualMachine(rx.build(M.parse(text), target=request.param))  # noqa: E731
    return {"elementwise": build(M.ELEMENTWISE), "bounded": build(BOUNDED), "cast": build(CAST)}


def expect_error(call, *parts):
    with pytest.raises(ShapeMismatchError) as info:
        call()
    for part in parts:
        assert part in str(info.value), f"{part!r} not in {str(info.value)!r}"
    return str(info.value)


def test_wrong_rank(vms):
    expect_error(lambda: vms["elementwise"]["main"](np.zeros(3, "float32"), np.zeros(3, "float32")),
                 "function 'main'", "parameter 'x'", "expected rank 2", "rank 1")


def test_wrong_dtype(vms):
    expect_error(lambda: vms["elementwise"]["main"](np.zeros((2, 3), "float64"), np.zeros(3, "float32")),
                 "parameter 'x'", "expected dtype float32", "float64")


def test_dim_contradicting_another(vms):
    expect_error(lambda: vms["elementwise"]["main"](np.zeros((2, 3), "float32"), np.zeros(4, "float32")),
                 "parameter 'y'", "symbolic var m", "expected 3", "got 4", "x.shape[1]")


def test_upper_bound_violation(vms):
    expect_error(lambda: vms["bounded"]["main"](np.zeros((9, 4), "float32"), np.zeros(18, "float32")),
                 "parameter 'x'", "symbolic var n", "upper bound", "8", "got 9")


def test_expression_dim_mismatch(vms):
    expect_error(lambda: vms["bounded"]["main"](np.zeros((3, 4), "float32"), np.zeros(5, "float32")),
                 "parameter 'y'", "n * 2", "expected 6", "got 5", "n = 3")


def test_non_contiguous_array(vms):
    x = np.zeros((3, 6), "float32")[:, ::2]
    expect_error(lambda: vms["elementwise"]["main"](x, np.zeros(3, "float32")),
                 "parameter 'x'", "C-contiguous")


def test_not_a_tensor_and_wrong_count(vms):
    expect_error(lambda: vms["elementwise"]["main"]("text", np.zeros(3, "float32")),
                 "parameter 'x'", "expected a tensor")
    expect_error(lambda: vms["elementwise"]["main"](np.zeros((2, 3), "float32")),
                 "takes 2 argument(s)", "got 1")


def test_match_cast_failure(vms):
    expect_error(lambda: vms["cast"]["main"](np.zeros(5, "float32")),
                 "match_cast of 'v'", "expected 4", "got 5")
    np.testing.assert_allclose(vms["cast"]["main"](np.zeros(4, "float32")), np.ones(4, "float32"))


def test_checks_run_before_any_kernel(vms):
    seen = []
    vm = vms["bounded"]
    vm.set_instrument(lambda *a: seen.append(a))
    try:
        with pytest.raises(ShapeMismatchError):
            vm["main"](np.zeros((3, 4), "float32"), np.zeros(7, "float32"))
    finally:
        vm.set_instrument(None)
    assert seen == []


def test_errors_match_the_interpreter_kind(vms):
    mod = M.parse(BOUNDED)
    bad = (np.zeros((9, 4), "float32"), np.zeros(18, "float32"))
    with pytest.raises(ShapeMismatchError) as ref:
        rx.interpret(mod, "main", *bad)
    message = expect_error(lambda: vms["bounded"]["main"](*bad))
    assert message == str(ref.value)


@pytest.mark.parametrize("target", VM_TARGETS)
def test_list_arguments_are_converted_like_the_interpreter(target):
    mod = M.parse(M.UNIQUE)
    vm = rx.VirtualMachine(rx.build(mod, target=target))
    out, shape = vm["main"]([3, 1, 3])
    np.testing.assert_array_equal(out, [2, 6])
    assert shape == (2,)


def test_non_native_byte_order_is_named(vms):
    swapped = np.zeros((2, 3), np.dtype("float32").newbyteorder())
    expect_error(lambda: vms["elementwise"]["main"](swapped, np.zeros(3, "float32")),
                 "parameter 'x'", "expected dtype float32", "non-native byte order", ".astype")
    # s13: the reference interpreter let it through to the first op, whose NumPy ufunc raised a
    # bare TypeError ("The `dtype` and `signature` arguments to ufuncs only select the general
    # DType"); it now refuses the parameter with the VM's words
    with pytest.raises(ShapeMismatchError) as ref:
        rx.interpret(M.parse(M.ELEMENTWISE), "main", swapped, np.zeros(3, "float32"))
    assert str(ref.value) == expect_error(lambda: vms["elementwise"]["main"](swapped, np.zeros(3, "float32")))


def test_ragged_list_argument_is_a_shape_error(vms):
    expect_error(lambda: vms["elementwise"]["main"]([[1.0], [2.0, 3.0]], np.zeros(3, "float32")),
                 "function 'main'", "parameter 'x'", "not rectangular")


def test_match_cast_contradicting_a_bound_var_names_it():
    text = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32"), y: R.Tensor(ndim=1, dtype="float32")):
        n = T.int64()
        with R.dataflow():
            v = R.match_cast(y, R.Tensor((n,), "float32"))
            w = R.add(x, v)
            R.output(w)
        return w
'''
    mod = M.parse(text)
    for target in AVAILABLE_VM_TARGETS:
        vm = rx.VirtualMachine(rx.build(mod, target=target))
        expect_error(lambda vm=vm: vm["main"](np.ones(3, "float32"), np.zeros(4, "float32")),
                     "function 'main'", "match_cast of 'v'", "symbolic var n", "expected 3",
                     "x.shape[0]", "got 4")
        np.testing.assert_allclose(vm["main"](np.ones(3, "float32"), np.ones(3, "float32")), 2.0)
