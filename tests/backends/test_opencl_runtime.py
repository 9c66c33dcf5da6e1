"""The OpenCL runtime on the PoCL CPU device, independent of the GPU lowering: a hand-written
kernel and launch plan (the contract ``backends.gpu`` fills), device arrays, workspaces, empty grids,
and the plan's save/load through the manifest."""
from __future__ import annotations

import numpy as np
import pytest

import tensorir as tir
from tensorir import expr as E
from backends.device_launch import Launch, LaunchPlan

cl = pytest.importorskip("pyopencl", reason="the OpenCL runtime needs pyopencl (the opencl extra)")

from backends.opencl.memory import OpenCLArray  # noqa: E402
from backends.opencl.runtime import OpenCLImage, OpenCLKernelModule  # noqa: E402

SIGNATURE = '''
@T.prim_func
def shift(a: T.Buffer(("n",), "float32"), b: T.Buffer(("n",), "float32")):
    n = T.int64()
    for i in range(n):
        b[i] = a[i] + T.float32(1)
'''

# two launches: a[i] + 1 into a workspace, then the workspace into b (grid = ceil(n / 4), block 4)
SOURCE = '''
__kernel void shift_0(__global float* a, __global float* b, __global float* ws, long n, __global int* status) {
  long i = (long)get_group_id(0) * 4 + get_local_id(0);
  if (i < n) ws[i] = a[i] + 1.0f;
}
__kernel void shift_1(__global float* a, __global float* b, __global float* ws, long n, __global int* status) {
  long i = (long)get_group_id(0) * 4 + get_local_id(0);
  if (i < n) b[i] = ws[i];
}
'''


def _module():
    func = tir.from_source(SIGNATURE)
    (n,) = [v for v in func.buffer_params[0].shape]
    grid = (E.FloorDiv(n + 3, 4), 1, 1)
    plan = LaunchPlan("shift", 2, [n], [("ws", "float32", n)],
                      [Launch("shift_0", grid, (4, 1, 1)), Launch("shift_1", grid, (4, 1, 1))])
    image = OpenCLImage(SOURCE, {"shift": plan}, {"shift": func})
    return func, OpenCLKernelModule(image)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 9])
def test_launches_cover_every_n_and_write_back_numpy_outputs(n):
    func, module = _module()
    a = np.arange(n, dtype="float32")
    b = np.zeros(n, "float32")
    module["shift"](a, b)
    want = np.zeros(n, "float32")
    tir.interpret(func, a, want)
    np.testing.assert_array_equal(b, want)


def test_device_arrays_stay_on_the_device_between_calls():
    _, module = _module()
    memory = module.memory
    a = memory.to_device(np.arange(6, dtype="float32"))
    b = memory.empty((6,), "float32")
    module["shift"](a, b)
    module["shift"](b, a)       # chained without a host copy
    assert isinstance(a, OpenCLArray) and a.shape == (6,) and a.dtype == np.float32
    np.testing.assert_array_equal(a.numpy(), np.arange(6, dtype="float32") + 2)


def test_a_wrong_shape_is_refused_before_any_launch():
    from tensorir.errors import ShapeMismatchError
    _, module = _module()
    with pytest.raises(ShapeMismatchError, match="parameter 'b', axis 0: expected n = 3, got 4"):
        module["shift"](np.zeros(3, "float32"), np.zeros(4, "float32"))


def test_views_of_a_storage_are_copied_when_they_escape():
    _, module = _module()
    memory = module.memory
    storage = memory.storage(64)
    view = memory.view(storage, 0, (4,), "float32")
    memory.write(view, np.arange(4, dtype="float32"))
    copy = memory.copy_views((view,))[0]
    memory.write(view, np.zeros(4, "float32"))
    assert not copy.is_view and copy.buffer is not storage.buffer
    np.testing.assert_array_equal(copy.numpy(), np.arange(4, dtype="float32"))


def test_launch_plans_round_trip_through_the_manifest():
    from relaxscript.vm.manifest import Decoder, Encoder
    _, module = _module()
    plan = module.image.plans["shift"]
    encoder = Encoder()
    entry = plan.encode(encoder)
    decoder = Decoder(memoryview(b"".join(encoder.chunks)))
    decoder.node_table(encoder.nodes)
    again = LaunchPlan.decode(entry, decoder)
    assert [k.symbol for k in again.launches] == ["shift_0", "shift_1"]
    assert again.sizes((9,)) == plan.sizes((9,)) == ([(3, 1, 1), (3, 1, 1)], [9])
    entry["launches"][0][2] = [4096, 1, 1]
    with pytest.raises(ValueError, match="malformed launch"):
        LaunchPlan.decode(entry, decoder)
