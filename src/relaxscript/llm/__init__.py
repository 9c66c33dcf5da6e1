"""Large language models end to end: the NumPy reference model, tokenizer, sampling, generation, chat."""

from tensorir.lazy_exports import lazy_exports

# loaded on first use: the engine pulls in the compiler, the reference model only NumPy
__getattr__, __dir__ = lazy_exports("relaxscript.llm", {"Engine": "relaxscript.llm.engine"}, globals())
