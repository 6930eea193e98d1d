"""tokenward: an LLM ingress gateway that admits work, not requests."""

__version__ = "0.1.0"
