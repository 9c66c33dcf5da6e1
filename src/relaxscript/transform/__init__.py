"""Graph-level passes: ``rx.transform.<Pass>()(mod)`` returns a new module."""
from .pass_infra import (Pass, PassCheckError, PassContext, Sequential, function_pass,  # noqa: F401
                         module_pass)
from .annotate_op_pattern import AnnotateTIROpPattern  # noqa: F401
