"""Before/Expected tests in TVM's style (a ``Before`` module, a pass, an ``Expected`` module,
``assert_structural_equal``) for the graph-level forms of issue 15 items 3, 4 and 7, with the
Expected modules written as TVM prints them (``R.vm.alloc_storage``, ``R.dtype``,
``R.prim_value`` arguments)."""
from __future__ import annotations

import numpy as np

import relaxscript as rx
from relaxscript import R
from tensorir import T


def test_legalize_ops_reads_a_known_prim_operand_in_the_kernel():
    @R.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
            n = T.int64()
            s: R.Prim("float32", value=T.Cast("float32", n)) = R.prim_value(T.Cast("float32", n))
            out: R.Tensor((n,), dtype="float32") = R.multiply(x, s)
            return out

    @R.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
            n = T.int64()
            s: R.Prim("float32", value=T.Cast("float32", n)) = R.prim_value(T.Cast("float32", n))  # noqa: F841
            out = R.call_tir(Expected.multiply, (x,), out_sinfo=R.Tensor((n,), dtype="float32"))
            return out

        @T.prim_func
        def multiply(a: T.Buffer(("n",), "float32"), T_multiply: T.Buffer(("n",), "float32")):
            n = T.int64()
            for i in range(n):
                with T.block("T_multiply"):
                    v_i = T.axis.remap("S", [i])
                    T.reads(a[v_i])
                    T.writes(T_multiply[v_i])
                    T_multiply[v_i] = a[v_i] * T.Cast("float32", n)

    rx.assert_structural_equal(rx.transform.LegalizeOps()(Before), Expected)


def test_legalize_ops_keeps_a_prim_only_known_at_run_time():
    @R.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor((4,), dtype="float32"), y: R.Prim("float32")) -> R.Tensor((4,), dtype="float32"):
            out: R.Tensor((4,), dtype="float32") = R.add(x, y)
            return out

    rx.assert_structural_equal(rx.transform.LegalizeOps()(Before), Before)


def test_call_tir_rewrite_lowers_call_dps_packed():
    @R.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
            n = T.int64()
            y = R.call_dps_packed("my_func", (x,), out_sinfo=R.Tensor((n,), dtype="float32"))
            return y

    @R.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
            n = T.int64()
            y: R.Tensor((n,), dtype="float32") = R.builtin.alloc_tensor(
                R.shape([n]), R.dtype("float32"), R.prim_value(0), R.str("global"))
            _: R.Tuple() = R.call_dps_library_dps(R.ExternFunc("my_func"), (x,), (y,))
            return y

    rx.assert_structural_equal(rx.transform.CallTIRRewrite()(Before), Expected)


def test_static_plan_block_memory_plans_for_tir_var_upper_bound():
    @R.ir_module
    class Before:
        @R.function
        def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
            n = T.int64()
            R.func_attr({"tir_var_upper_bound": {"n": 32}})
            y: R.Tensor((n,), dtype="float32") = R.builtin.alloc_tensor(R.shape([n]), R.dtype("float32"), R.prim_value(0))
            _: R.Tuple() = R.call_dps_library_dps(R.ExternFunc("numpy.exp"), (x,), (y,))
            z: R.Tensor((n,), dtype="float32") = R.builtin.alloc_tensor(R.shape([n]), R.dtype("float32"), R.prim_value(0))
            _1: R.Tuple() = R.call_dps_library_dps(R.ExternFunc("numpy.negative"), (y,), (z,))
            return z

    @R.ir_module
    class Expected:
        @R.function
        def main(x: R.Tensor(("n",), dtype="float32")) -> R.Tensor(("n",), dtype="float32"):
            n = T.int64()
            R.func_attr({"tir_var_upper_bound": {"n": 32}})
            storage: R.Object = R.vm.alloc_storage(R.shape([128]), R.prim_value(0), R.dtype("uint8"), R.str("global"))
            y: R.Tensor((n,), dtype="float32") = R.vm.alloc_tensor(storage, R.prim_value(0), R.shape([n]), R.dtype("float32"))
            _: R.Tuple() = R.call_dps_library_dps(R.ExternFunc("numpy.exp"), (x,), (y,))
            z: R.Tensor((n,), dtype="float32") = R.builtin.alloc_tensor(R.shape([n]), R.dtype("float32"), R.prim_value(0))
            _1: R.Tuple() = R.call_dps_library_dps(R.ExternFunc("numpy.negative"), (y,), (z,))
            _2: R.Tuple() = R.memory.kill_storage(storage)
            return z

    after = rx.transform.StaticPlanBlockMemory()(Before)
    rx.assert_structural_equal(after, Expected)
    x = np.linspace(-1, 1, 7, dtype="float32")
    np.testing.assert_allclose(rx.interpret(after, "main", x), -np.exp(x), rtol=1e-6)
    np.testing.assert_allclose(rx.VirtualMachine(rx.build(after, target="c", pipeline=[]))["main"](x),
                               -np.exp(x), rtol=1e-6)
