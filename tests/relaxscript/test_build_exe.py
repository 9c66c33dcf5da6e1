"""rx.build: pipeline, C library cache, executable save/load without recompiling."""
import numpy as np
import pytest

import relaxscript as rx
from relaxscript.vm import Executable, VMBuildError
from backends.c.runtime import CLibraryImage
from tests.relaxscript import vm_modules as M
from tests.targets import VM_TARGETS


def test_default_pipeline_is_an_editable_list_of_passes():
    pipeline = rx.get_pipeline("c")
    names = [type(p).__name__ for p in pipeline]
    assert names == ["InlineFunctions", "ApplyShapeConstraints", "MergeParallelMatmul", "FuseAttention",
                     "DispatchLibrary", "LegalizeOps", "AnnotateTIROpPattern", "FuseOps", "FuseTIR", "DefaultCPUSchedule", "LiftWorkspace",
                     "DeadCodeElimination", "CallTIRRewrite", "StaticPlanBlockMemory"]
    assert all(isinstance(p, rx.transform.Pass) for p in pipeline)
    assert "DefaultCPUSchedule" not in [type(p).__name__ for p in rx.get_pipeline("interp")]
    pipeline.clear()   # editable: an empty pipeline still builds call_tir-only modules
    mod = M.parse(M.SUBGRAPH).without_function("main").without_function("flat")
    assert rx.build(mod, pipeline=pipeline).functions == {}


def test_pipeline_does_not_look_passes_up_by_name(monkeypatch):
    """A pass missing from ``relaxscript.transform``'s namespace is not silently left out."""
    monkeypatch.delattr(rx.transform, "DeadCodeElimination")
    assert "DeadCodeElimination" in [type(p).__name__ for p in rx.get_pipeline("c")]


@pytest.mark.parametrize("entry, message", [
    ("FuseOps", "entry 1 is not a pass: 'FuseOps' \\(passes are objects"),
    (rx.transform.FuseOps, "entry 1 is not a pass: .*did you mean FuseOps\\(\\)\\?"),
    (None, "entry 1 is not a pass: None"),
])
def test_pipeline_entry_that_is_not_a_pass_is_a_build_error(entry, message):
    mod = M.parse(M.SUBGRAPH).without_function("main").without_function("flat")
    with pytest.raises(VMBuildError, match=message):
        rx.build(mod, target="interp", pipeline=[rx.transform.LegalizeOps(), entry])


def test_pipeline_that_is_not_a_list_is_a_build_error():
    with pytest.raises(VMBuildError, match="must be a list of passes, got FuseOps"):
        rx.build(M.parse(M.SUBGRAPH), target="interp", pipeline=rx.transform.FuseOps())


def test_unknown_target_is_rejected():
    with pytest.raises(VMBuildError, match="unknown build target"):
        rx.build(M.parse(M.MLP), target="tpu")


def test_local_function_is_a_clear_build_error():
    from relaxscript.expr import BindingBlock, Function, SeqExpr, Var, VarBinding
    from relaxscript.struct_info import TensorStructInfo
    sinfo = TensorStructInfo((2,), "float32")
    y, x, f = Var("y", sinfo), Var("x", sinfo), Var("f")
    local = Function([y], SeqExpr([], y), sinfo)
    main = Function([x], SeqExpr([BindingBlock([VarBinding(f, local)])], x), sinfo)
    with pytest.raises(VMBuildError, match="local functions"):
        rx.build(rx.IRModule({"main": main}), target="interp", pipeline=[])


def test_fallback_failure_is_a_shape_error_not_a_crash():
    text = M.HEADER + '''
@R.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n",), "float32")):
        n = T.int64()
        z = R.reshape(x, R.shape([n * 3]))
        return z
'''
    exe = rx.build(rx.from_source(text), target="c", pipeline=[])
    with pytest.raises(rx.ShapeMismatchError, match="R.reshape failed"):
        rx.VirtualMachine(exe)["main"](np.zeros(2, "float32"))


def test_second_build_hits_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_CACHE_DIR", str(tmp_path))
    mod = M.parse(M.ELEMENTWISE)
    first = rx.build(mod, target="c")
    second = rx.build(mod, target="c")
    assert first.compiled and not second.compiled
    assert first.c_library.source == second.c_library.source


def test_one_library_per_module():
    exe = rx.build(M.parse(M.NORMS), target="c")
    assert len(exe.c_library.symbols) >= 2
    assert all(f"{symbol}(" in exe.c_library.source for symbol in exe.c_library.symbols.values())


@pytest.mark.parametrize("target", VM_TARGETS)
def test_save_and_load_without_recompiling(tmp_path, monkeypatch, target):
    mod = M.parse(M.SUBGRAPH)
    exe = rx.build(mod, target=target)
    path = tmp_path / "model.rxvm"
    exe.save(path)

    def no_gcc(*args, **kwargs):
        raise AssertionError("load must not call the C compiler")
    monkeypatch.setattr("backends.c.compiler.compile_shared", no_gcc)
    monkeypatch.setenv("RELAXSCRIPT_CACHE_DIR", str(tmp_path / "fresh-cache"))
    if exe.c_library is not None:
        exe.c_library.path = ""   # as if the build cache had been cleared
    loaded = Executable.load(path)
    assert loaded.target == target and not loaded.compiled
    x = np.random.default_rng(0).standard_normal((5, 4)).astype("float32")
    np.testing.assert_allclose(rx.VirtualMachine(loaded)["main"](x), rx.interpret(mod, "main", x),
                               rtol=1e-5, atol=1e-6)


def test_load_rejects_other_files(tmp_path):
    path = tmp_path / "bad.rxvm"
    import pickle
    path.write_bytes(pickle.dumps({"format": "other"}))
    with pytest.raises(ValueError, match="not a relaxscript executable"):
        Executable.load(path)


def test_library_image_is_materialized_from_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("RELAXSCRIPT_CACHE_DIR", str(tmp_path))
    # NORMS: generated kernels (the MLP is all library calls once its relu fuses into the GEMM)
    exe = rx.build(M.parse(M.NORMS), target="c")
    image = CLibraryImage(exe.c_library.source, exe.c_library.library,
                          exe.c_library.symbols, path="")
    lib = image.load()
    assert all(hasattr(lib, s) for s in image.symbols.values())


def test_executable_text_lists_instructions():
    text = rx.build(M.parse(M.SUBGRAPH), target="c").as_text()
    assert "function main(x)" in text and "CallKernel" in text and "MatchValues" in text
