"""``rx.build(mod, target)``: the default pipeline, VM shape lowering and codegen.

``get_pipeline(target)`` returns the graph-level passes as a plain, editable
list of pass objects (paper Figure 13, with inlining first): InlineFunctions ->
ApplyShapeConstraints
-> MergeParallelMatmul -> library dispatch (targets with libraries) -> LegalizeOps -> AnnotateTIROpPattern
-> FuseOps -> FuseTIR -> default schedules (the target's: CPU for C, GPU for OpenCL/CUDA,
none for the interpreter) -> workspace lifting -> DCE ->
CallTIRRewrite -> StaticPlanBlockMemory. The passes are imported directly, so
renaming or removing one is an import error here, never a silently shorter
pipeline. VM shape lowering and codegen are the last stages of ``build``:
their product is VM code, not IR. One build serves every value of every
symbolic variable.
"""
from __future__ import annotations

import copy

from backends.target import Target, TargetError, get_backend

from ..expr import Function
from ..irmodule import IRModule
from tensorir.function import PrimFunc
from ..transform import (AnnotateTIROpPattern, CallTIRRewrite, DeadCodeElimination,
                         DefaultCPUSchedule, DefaultGPUSchedule, DispatchLibrary, FuseAttention, FuseOps,
                         FuseTIR, InlineFunctions, LegalizeOps, LiftWorkspace, StaticPlanBlockMemory)
from ..transform.apply_shape_constraints import ApplyShapeConstraints
from ..transform.dead_code_elimination import unreferenced_functions
from ..transform.inline_scalar_prim_calls import inline_scalar_prim_calls
from ..transform.merge_parallel_matmul import MergeParallelMatmul
from ..transform.pass_infra import Pass
from .codegen import compile_module
from .executable import Executable
from .instructions import VMBuildError



def get_pipeline(target="c", skip=()) -> list[Pass]:
    """The default passes for ``target`` (edit the list freely before ``build``).

    ``skip``: names of passes to leave out (``["FuseOps", "FuseTIR"]``), e.g. to measure what one
    optimization gains; a name that is not in this target's pipeline is a ``VMBuildError``."""
    if isinstance(skip, str):
        skip = (skip,)
    passes = _default_passes(target)
    known = [p.name for p in passes]
    unknown = [name for name in skip if name not in known]
    if unknown:
        raise VMBuildError(f"get_pipeline: no pass named {', '.join(map(repr, unknown))} in the "
                           f"{target!s} pipeline (its passes: {', '.join(known)})")
    return [p for p in passes if p.name not in skip]


def _default_passes(target) -> list[Pass]:
    backend = get_backend(_check_target(target))
    # Schedules only matter to generated code; the loop interpreter runs the unscheduled blocks.
    schedules = {"cpu": [DefaultCPUSchedule()], "gpu": _gpu_schedules(), None: []}[backend.schedule]
    # GPU targets have no BLAS: their matmuls stay generated kernels.
    dispatch = [DispatchLibrary()] if backend.library_dispatch else []
    # The fused attention kernel has a CPU schedule rule only; GPU targets keep the unfused ops.
    # Every query length: the C kernel (backends/c/attention.py) beat the BLAS matmuls around a
    # softmax at n = 1..512 (docs/ARCHITECTURE.md, "Generated attention kernel").
    attention = [FuseAttention()] if backend.schedule != "gpu" else []
    return [InlineFunctions(), ApplyShapeConstraints(), MergeParallelMatmul(), *attention, *dispatch, LegalizeOps(),
            AnnotateTIROpPattern(), FuseOps(), FuseTIR(), *schedules,
            # on C a row's scratch stays a local array of the row loop (localize_allocations)
            LiftWorkspace(keep_loop_local=backend.kind == "c"), DeadCodeElimination(),
            CallTIRRewrite(),
            StaticPlanBlockMemory()]


def _gpu_schedules() -> list[Pass]:
    return [DefaultGPUSchedule()]


def _check_pipeline(pipeline) -> list[Pass]:
    """``pipeline`` as a list, or a ``VMBuildError`` naming the first entry that is not a pass."""
    if isinstance(pipeline, (str, bytes)) or not hasattr(pipeline, "__iter__"):
        raise VMBuildError(f"build's pipeline must be a list of passes, got {type(pipeline).__name__}")
    passes = list(pipeline)
    for position, entry in enumerate(passes):
        if isinstance(entry, Pass):
            continue
        hint = ""
        if isinstance(entry, type) and issubclass(entry, Pass):
            hint = f" (a pass class; did you mean {entry.__name__}()?)"
        elif isinstance(entry, str):
            hint = " (passes are objects such as rx.transform.FuseOps(), not names)"
        raise VMBuildError(f"pipeline entry {position} is not a pass: {entry!r}{hint}")
    return passes


def _check_target(target) -> Target:
    try:
        return Target.parse(target)
    except TargetError as err:
        raise VMBuildError(str(err)) from None


def mark_entry_functions(mod: IRModule) -> IRModule:
    """``mod`` with its entry functions marked public (``global_symbol``) when none is.

    A TVMScript module's functions are public unless written ``private=True``, and TVM's build keeps
    every public one callable. A parsed module carries no ``global_symbol``, and DeadCodeElimination
    then keeps only what ``main`` reaches, so a second entry (``vm["decode"]`` beside ``main``, an
    ``nn.Module`` export's ``_initialize_effect``) was dropped. The entries are the graph functions no
    other graph function refers to, ``main`` among them, taken before the pipeline runs: after
    InlineFunctions an inlined helper is referred to by nothing either, and must not become one."""
    graph = mod.relax_functions
    if not graph or any("global_symbol" in f.attrs for f in graph.values()):
        return mod
    roots = unreferenced_functions(mod)
    # a private function (@R.function(private=True)) is never an entry: TVM's build drops it
    # when nothing calls it; others may still call it
    private = {n for n, f in graph.items() if getattr(f, "is_private", False)}
    entries = [n for n in graph if (n in roots or n == "main") and n not in private]
    if not entries:
        return mod   # every candidate is private: the default (below) rather than nothing
    if entries == ["main"] or ("main" not in graph and entries == roots):
        return mod   # DeadCodeElimination's own default picks the same functions
    functions = dict(mod.functions)
    for name in entries:
        marked = copy.copy(functions[name])
        marked.attrs = {**marked.attrs, "global_symbol": name}
        functions[name] = marked
    return IRModule(functions, mod.attrs)


def inline_prim_subroutines(mod: IRModule) -> IRModule:
    """Calls between prim_funcs (``cls.sub(...)`` in a prim_func) inlined before any pass: the
    callees graph functions do not call themselves are left out (no kernel calls another, and
    a callee taking pointers or returning a value is no kernel); a prim_func a graph function
    calls must be a kernel (an ``IRError`` naming it otherwise)."""
    from tensorir.transform.inline_subroutines import check_kernel, inline_subroutines, subroutine_names
    from ..transform.dead_code_elimination import referenced_globals
    called = subroutine_names(mod.functions)
    from_graph = set()
    for func in mod.relax_functions.values():
        from_graph |= referenced_globals(func)
    if called:
        functions = inline_subroutines(dict(mod.functions))
        mod = IRModule({n: f for n, f in functions.items() if n not in called or n in from_graph}, mod.attrs)
    kernels = {name: check_kernel(mod[name], name) for name in sorted(from_graph)
               if name in mod and isinstance(mod[name], PrimFunc)}
    if any(k is not mod[n] for n, k in kernels.items()):
        mod = IRModule({**mod.functions, **kernels}, mod.attrs)
    return mod


def build(mod: IRModule, target="c", pipeline=None) -> Executable:
    """Run ``pipeline`` (default ``get_pipeline(target)``), then lower shapes and
    generate VM code; the target's backend builds the kernels (one C library,
    OpenCL C, PTX, or the loop-level interpreter for "interp").

    ``target``: "c", "interp", "opencl", "cuda", "cuda -arch=sm_90" or a ``Target``."""
    target = _check_target(target)
    if isinstance(mod, Function):  # a free-standing @function: a module holding just it
        mod = IRModule({mod.attrs.get("global_symbol", "main"): mod})
    if not isinstance(mod, IRModule):
        raise TypeError(f"build needs an IRModule or a Function, got {type(mod).__name__}")
    passes = get_pipeline(target) if pipeline is None else _check_pipeline(pipeline)
    mod = inline_scalar_prim_calls(mod)
    mod = mark_entry_functions(mod)
    mod = inline_prim_subroutines(mod)
    for p in passes:
        mod = p(mod)
    functions, kernels = compile_module(mod)
    image = get_backend(target).build(target, {n: k.func for n, k in kernels.items()}) if kernels else None
    return Executable(target, functions, image, compiled=image is not None and image.compiled)
