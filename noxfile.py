"""Sessions: tests (default CI job), demo, lint, bench, slow (property/fuzz tests)."""
import nox

nox.options.sessions = ["tests"]
nox.options.reuse_existing_virtualenvs = True

PYTHON = None  # the interpreter nox runs under


@nox.session(python=PYTHON)
def tests(session):
    """The default test run (fast property tests included, slow ones excluded)."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "not slow and not fuzz", "-n", "auto", *session.posargs)


@nox.session(python=PYTHON)
def slow(session):
    """Long-running property and fuzz tests."""
    session.install("-e", ".[test]")
    session.run("pytest", "-m", "slow or fuzz", "-n", "auto", *session.posargs)


@nox.session(python=PYTHON)
def demo(session):
    """The main job: the example programs, end to end."""
    session.install("-e", ".")
    session.run("python", "examples/demo.py", *session.posargs)


@nox.session(python=PYTHON)
def lint(session):
    session.install("ruff>=0.5")
    session.run("ruff", "check", "src", "tests", "examples", "benchmarks")


@nox.session(python=PYTHON)
def bench(session):
    """Benchmarks (performance targets are checked here, never in tests)."""
    session.install("-e", ".[test]")
    session.run("python", "benchmarks/run_all.py", *session.posargs)
