"""The optional third-party peers of bench_models.py: PyTorch eager, torch.compile and onnxruntime.

``availability(peer)`` says why a peer cannot run here (None when it can), so
a benchmark leaves that column out and says why instead of failing;
``make_runner(peer, workload)`` builds it once for every ``n``. All of them run on 2 threads (the relaxscript runtime's
team on this machine) and take the workload's own input arrays.

- ``torch``: the workload's ``torch_fn`` in eager mode under ``no_grad``;
- ``torch.compile``: the same function through ``torch.compile`` (Inductor,
  default options: it specializes on the first ``n`` and recompiles once with a
  dynamic ``n`` when a second one comes); needs a C++ compiler at run time;
- ``onnxruntime``: the PyTorch version exported to ONNX once per workload
  (TorchScript exporter, ``n`` a dynamic axis, the weights as initializers,
  which is how a user ships a model to onnxruntime), run by an
  ``InferenceSession`` on the CPU provider with 2 intra-op threads.
"""
from __future__ import annotations

import io
import os
import warnings

THREADS = 2
TORCH_PEERS = ("torch", "torch.compile", "onnxruntime")


def disabled() -> bool:
    """RELAXSCRIPT_BENCH_TORCH=0 leaves out every torch-based peer (onnxruntime's model comes from torch)."""
    return os.environ.get("RELAXSCRIPT_BENCH_TORCH", "1") == "0"


def import_torch():
    """(torch, None) or (None, why not)."""
    if disabled():
        return None, "disabled by RELAXSCRIPT_BENCH_TORCH=0"
    try:
        import torch
    except ImportError as err:
        return None, f"torch not installed ({err})"
    torch.set_num_threads(THREADS)
    return torch, None


def availability(peer: str) -> str | None:
    """None when ``peer`` can run in this interpreter, else the reason it cannot (checked in the parent)."""
    torch, why = import_torch()
    if torch is None:
        return why
    if peer == "onnxruntime":
        try:
            import onnx  # noqa: F401  (torch's exporter writes through it)
            import onnxruntime  # noqa: F401
        except ImportError as err:
            return f"onnxruntime/onnx not installed ({err})"
    return None


def versions() -> dict[str, str]:
    out = {}
    for module in ("torch", "onnxruntime"):
        try:
            out[module] = __import__(module).__version__
        except ImportError:
            pass
    return out


def make_runner(peer: str, workload):
    """A function ``runner(args) -> numpy array`` for one peer over one workload (built once, every n)."""
    torch, why = import_torch()
    if torch is None:
        raise RuntimeError(why)
    if peer == "torch":
        return _eager(torch, workload.torch_fn)
    if peer == "torch.compile":
        return _eager(torch, torch.compile(workload.torch_fn))
    if peer == "onnxruntime":
        return _onnxruntime(torch, workload)
    raise ValueError(f"unknown peer {peer!r}")


def _eager(torch, fn):
    def run(args):
        with torch.no_grad():
            return fn(*[torch.from_numpy(a) for a in args]).numpy()
    return run


def onnxruntime_session(torch, workload, threads: int | None = None, profile_prefix: str | None = None):
    """(InferenceSession, input names) for ``workload`` exported from its PyTorch version, on
    ``threads`` intra-op threads (default ``THREADS``); with ``profile_prefix`` onnxruntime records
    per-node times (``session.end_profiling()`` writes them)."""
    import onnxruntime
    example_args = workload.inputs(3)
    activations = len(example_args) - len(workload._weights)
    weights = example_args[activations:]

    class WithWeights(torch.nn.Module):
        """The workload with its weights as constants, so the exporter writes them as initializers."""

        def __init__(self):
            super().__init__()
            self.weights = [torch.from_numpy(w) for w in weights]

        def forward(self, *inputs):
            return workload.torch_fn(*inputs, *self.weights)

    names = [f"input{i}" for i in range(activations)]
    example = [torch.from_numpy(a) for a in example_args[:activations]]
    buffer = io.BytesIO()
    with warnings.catch_warnings():   # the TorchScript exporter is deprecated, still the one without onnxscript
        warnings.simplefilter("ignore")
        torch.onnx.export(WithWeights(), tuple(example), buffer, dynamo=False, input_names=names,
                          output_names=["out"], opset_version=17,
                          dynamic_axes={**{name: {0: "n"} for name in names}, "out": {0: "n"}})
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = THREADS if threads is None else threads
    options.inter_op_num_threads = 1
    if profile_prefix is not None:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return onnxruntime.InferenceSession(buffer.getvalue(), options, providers=["CPUExecutionProvider"]), names


def _onnxruntime(torch, workload):
    session, names = onnxruntime_session(torch, workload)
    activations = len(names)

    def run(args):
        return session.run(None, dict(zip(names, args[:activations])))[0]
    return run
