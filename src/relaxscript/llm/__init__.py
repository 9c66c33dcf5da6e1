"""Large language models end to end: the NumPy reference model, tokenizer, sampling, generation, chat."""
