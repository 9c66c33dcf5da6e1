"""Graph-level passes: ``rx.transform.<Pass>()(mod)`` returns a new module."""
from .pass_infra import (Pass, PassCheckError, PassContext, Sequential, function_pass,  # noqa: F401
                         module_pass)
from .annotate_op_pattern import AnnotateTIROpPattern  # noqa: F401
from .fuse_ops import FuseOps  # noqa: F401
from .call_tir_rewrite import CallTIRRewrite  # noqa: F401
from .legalize import LegalizeOps  # noqa: F401
from .fuse_tir import FuseTIR  # noqa: F401
from .kill_after_last_use import KillAfterLastUse  # noqa: F401
from .static_plan_block_memory import StaticPlanBlockMemory  # noqa: F401
