"""Shared small GGUF files (written once per session into pytest's temporary folder)."""
import pytest

from tests.llm.gguf_files import write_random_llama_gguf


@pytest.fixture(scope="session")
def tiny_gguf_f32(tmp_path_factory):
    return write_random_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny_f32.gguf", qtypes="F32", seed=1)


@pytest.fixture(scope="session")
def tiny_gguf_q4(tmp_path_factory):
    return write_random_llama_gguf(tmp_path_factory.mktemp("gguf") / "tiny_q4.gguf", seed=2)
