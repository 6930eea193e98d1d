"""Personal data (PII): the built-in validated pattern detector (``patterns``, ``checksums``) and its users."""
