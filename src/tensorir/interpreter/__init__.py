"""Reference interpreter of the loop level: ``interpret(func, *arrays, **scalars)``.

Runs a PrimFunc in destination-passing style on NumPy arrays: outputs are
written in place and nothing is returned. Arguments are checked against the
parameters first (see ``binding``); loop nests run vectorised with NumPy
where that provably gives the serial result (see ``nest``), serially
otherwise. ``vectorize=False`` forces the scalar path everywhere (slow; a
cross-check of the vectorised one).

Semantics worth knowing: every loop kind runs serially; a reduction's init
runs before its reduction loops where lowering puts it, so an empty
reduction gives the init value (the identity: 0 for a sum, -inf for a max); ``alloc_buffer`` and
``Allocate`` storage is zero-initialised; integer ``Div`` truncates (C),
``FloorDiv``/``FloorMod`` floor; a store casts its value to the buffer dtype;
an access outside a buffer's shape raises ``OutOfBoundsError`` (never wraps);
a view buffer (``Buffer.data`` set, e.g. the flat views made by lowering)
reads and writes the storage of the buffer it names.
"""
from __future__ import annotations

import numpy as np

from ..function import PrimFunc
from .binding import bind_arguments
from .errors import InterpretError, OutOfBoundsError
from .executor import Executor

__all__ = ["interpret", "InterpretError", "OutOfBoundsError"]


def interpret(func: PrimFunc, *args, vectorize: bool = True, **scalars) -> None:
    """Run ``func`` on ``args`` (arrays for buffer params, ints for scalar params, in
    parameter order; scalar params may also be passed by name)."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"interpret expects a PrimFunc, got {type(func).__name__}")
    from ..transform.inline_subroutines import check_kernel
    func = check_kernel(func)  # a subroutine (pointers, a result, calls) runs inlined into its caller
    vars, views = bind_arguments(func, args, scalars)
    executor = Executor(func, vars, views, vectorize=vectorize)
    with np.errstate(all="ignore"):  # IEEE results (inf/nan) are the semantics, not errors
        executor.run(func.body)
