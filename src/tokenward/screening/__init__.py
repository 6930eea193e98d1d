"""Content screening: the Screener protocol, the detectors, and the texts they read."""
