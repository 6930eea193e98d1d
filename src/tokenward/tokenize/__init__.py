"""Token counting per model: exact tokenizers (tiktoken, a model's tokenizer.json) or a
documented upper bound (``estimate``), loaded once at start-up."""
