"""``rx.build(mod, target)``: the default pipeline, VM shape lowering and codegen.

``get_pipeline(target)`` returns the graph-level passes as an editable list
(paper Figure 13, with inlining first): InlineFunctions -> library dispatch -> LegalizeOps -> AnnotateTIROpPattern
-> FuseOps -> FuseTIR -> default schedules -> workspace lifting -> DCE ->
CallTIRRewrite -> StaticPlanBlockMemory. Each step is looked up by name in
``relaxscript.transform``; a step whose pass does not exist is left out and
recorded in the list's ``notes`` (and in ``Executable.notes``). VM shape
lowering and codegen are the last stages of ``build``: their product is VM
code, not IR. One build serves every value of every symbolic variable.
"""
from __future__ import annotations

from ..expr import Function
from ..irmodule import IRModule
from .codegen import compile_module
from .executable import Executable
from .instructions import VMBuildError

TARGETS = ("c", "interp")

# (step, candidate pass names in relaxscript.transform, targets it applies to)
_STEPS = (
    ("inlining", ("InlineFunctions",), TARGETS),
    ("library dispatch", ("DispatchLibrary", "LibraryDispatch", "DispatchLibraries"), TARGETS),
    ("legalize", ("LegalizeOps",), TARGETS),
    ("pattern annotation", ("AnnotateTIROpPattern",), TARGETS),
    ("fusion", ("FuseOps",), TARGETS),
    ("fused prim_funcs", ("FuseTIR",), TARGETS),
    ("default schedules", ("DefaultSchedule", "ApplyDefaultSchedules", "DefaultCPUSchedule",
                           "DefaultSchedules"), ("c",)),
    ("workspace lifting", ("LiftTIRGlobalBufferAlloc", "WorkspaceLifting", "LiftWorkspace"), TARGETS),
    ("dead code elimination", ("DeadCodeElimination", "DCE"), TARGETS),
    ("explicit allocation", ("CallTIRRewrite",), TARGETS),
    ("memory planning", ("StaticPlanBlockMemory",), TARGETS),
)


class Pipeline(list):
    """A list of passes; ``notes`` says which steps were left out and why."""

    def __init__(self, passes=(), notes=()):
        super().__init__(passes)
        self.notes = list(notes)


def get_pipeline(target: str = "c") -> Pipeline:
    """The default passes for ``target`` (edit the list freely before ``build``)."""
    _check_target(target)
    from .. import transform
    passes, notes = [], []
    for step, names, targets in _STEPS:
        if target not in targets:
            continue
        found = next((getattr(transform, n) for n in names if hasattr(transform, n)), None)
        if found is None:
            notes.append(f"{step}: skipped (no pass named {' / '.join(names)} in relaxscript.transform)")
        else:
            passes.append(found())
    return Pipeline(passes, notes)


def _check_target(target: str) -> None:
    if target not in TARGETS:
        raise VMBuildError(f"unknown build target {target!r}; the VM builds for {', '.join(TARGETS)}")


def build(mod: IRModule, target: str = "c", pipeline=None) -> Executable:
    """Run ``pipeline`` (default ``get_pipeline(target)``), then lower shapes and
    generate VM code; kernels go into one C library ("c") or run in the
    loop-level interpreter ("interp")."""
    _check_target(target)
    if isinstance(mod, Function):  # a free-standing @function: a module holding just it
        mod = IRModule({mod.attrs.get("global_symbol", "main"): mod})
    if not isinstance(mod, IRModule):
        raise TypeError(f"build needs an IRModule or a Function, got {type(mod).__name__}")
    if pipeline is None:
        pipeline = get_pipeline(target)
    notes = list(getattr(pipeline, "notes", ()))
    for p in pipeline:
        mod = p(mod)
    functions, kernels = compile_module(mod)
    if target == "c":
        from .kernels import build_c_library
        image, compiled = build_c_library(kernels) if kernels else (None, False)
        return Executable("c", functions, c_library=image, notes=notes, compiled=compiled)
    return Executable("interp", functions, prim_funcs={n: k.func for n, k in kernels.items()},
                      notes=notes)
