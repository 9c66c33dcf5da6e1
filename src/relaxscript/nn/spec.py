"""What ``export`` compiles: the methods, their inputs, and the symbolic dims with bounds.

::

    spec = nn.ExportSpec(
        methods={"forward": {"x": nn.Tensor(("n", 64), "float32")}},
        dims={"n": 128},           # every symbolic dim with its upper bound
        lower={"n": 1},            # optional lower bounds (default 0)
        activations="q8")          # optional: round inputs of quantized-weight matmuls (default "f32")

Each method becomes a function of the IRModule taking the inputs (in the
order given) and then every Parameter of the module. A dim name is one
symbolic variable across a function's inputs and weights; its bound is
checked when the function is called and lets memory planning size
buffers statically (``relax.memory_upper_bound``).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from tensorir import dtype as dt

# ExportSpec.activations -> the R.fake_quantize format the matmuls' inputs get (None: exact)
ACTIVATIONS = {"f32": None, "q8": "q8_0"}


@dataclass(frozen=True)
class Tensor:
    """A tensor input: dims are ints or symbolic names."""
    shape: tuple
    dtype: str = "float32"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(self.shape))
        object.__setattr__(self, "dtype", dt.normalize(self.dtype))


@dataclass(frozen=True)
class Shape:
    """A shape input carrying symbolic values only (``R.Shape(["t"])``), e.g. a cache length."""
    dims: tuple

    def __post_init__(self):
        object.__setattr__(self, "dims", tuple(self.dims))
        for d in self.dims:
            if not isinstance(d, str):
                raise TypeError(f"nn.Shape: dims are symbolic names, got {d!r}")


@dataclass(frozen=True)
class ExportSpec:
    methods: dict
    dims: dict = field(default_factory=dict)
    # lower bounds of some dims (default 0): a token count of at least 1 lets the simplifier
    # prove the last token's slice ``x[n - 1 : n]`` has one row (checked at each call)
    lower: dict = field(default_factory=dict)
    # "q8": every matmul whose weight is an R.dequantize gets its input rounded to 8-bit block
    # codes (transform.QuantizeActivations), as llama.cpp computes; "f32" keeps it exact
    activations: str = "f32"

    def __post_init__(self):
        if self.activations not in ACTIVATIONS:
            raise ValueError(f"ExportSpec: activations must be one of {', '.join(ACTIVATIONS)}, "
                             f"got {self.activations!r}")
        for name, bound in self.dims.items():
            if not isinstance(bound, int) or isinstance(bound, bool) or bound < 0:
                raise ValueError(f"ExportSpec: the upper bound of dim {name!r} must be a "
                                 f"non-negative int, got {bound!r}")
        for name, bound in self.lower.items():
            if name not in self.dims:
                raise ValueError(f"ExportSpec: lower bound for {name!r}, which dims does not declare")
            if not isinstance(bound, int) or isinstance(bound, bool) or not 0 <= bound <= self.dims[name]:
                raise ValueError(f"ExportSpec: the lower bound of dim {name!r} must be an int in "
                                 f"0 .. {self.dims[name]} (its upper bound), got {bound!r}")
        for method, inputs in self.methods.items():
            if not isinstance(inputs, dict):
                raise TypeError(f"ExportSpec: inputs of method {method!r} must be a dict "
                                f"{{name: nn.Tensor | nn.Shape}}, got {inputs!r}")
            for arg, value in inputs.items():
                if not isinstance(value, (Tensor, Shape)):
                    raise TypeError(f"ExportSpec: input {method}.{arg} must be nn.Tensor or "
                                    f"nn.Shape, got {value!r}")
