"""Graph-level passes: ``rx.transform.<Pass>()(mod)`` returns a new module."""
from .pass_infra import (Pass, PassCheckError, PassContext, Sequential, function_pass,  # noqa: F401
                         module_pass)
from .annotate_op_pattern import AnnotateTIROpPattern, OpPattern  # noqa: F401
from .fuse_ops import FuseOps  # noqa: F401
from .call_tir_rewrite import CallTIRRewrite  # noqa: F401
from .legalize import LegalizeOps  # noqa: F401
from .fuse_tir import FuseTIR  # noqa: F401
from .kill_after_last_use import KillAfterLastUse  # noqa: F401
from .static_plan_block_memory import StaticPlanBlockMemory  # noqa: F401
from .lift_workspace import LiftWorkspace  # noqa: F401
from .default_schedule import DefaultCPUSchedule  # noqa: F401
from .default_gpu_schedule import DefaultGPUSchedule, gpu_schedule_report  # noqa: F401
from .dispatch_library import (DispatchLibrary, LibraryPattern, LibraryRegistry,  # noqa: F401
                               register_library_pattern)
from .dead_code_elimination import DeadCodeElimination  # noqa: F401
from .canonicalize_bindings import CanonicalizeBindings  # noqa: F401
from .fold_constant import FoldConstant  # noqa: F401
from .lambda_lift import LambdaLift  # noqa: F401
from .inline_functions import InlineFunctions  # noqa: F401
from .merge_parallel_matmul import MergeParallelMatmul  # noqa: F401
from .bind_params import BindParams  # noqa: F401
from .fuse_attention import FuseAttention  # noqa: F401
from .apply_shape_constraints import ApplyShapeConstraints, ShapeConstraintStats  # noqa: F401
