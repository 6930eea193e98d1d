"""Request validation: strict schemas, bounded parsing, plan bounds, normalization, media.

``request.Validator`` is the entry point; the stage in ``stages/s08_validation.py`` calls it.
docs/validation.md lists every reason code, bound and feature switch.
"""
