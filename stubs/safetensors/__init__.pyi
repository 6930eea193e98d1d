# Local stubs: only what tokenward calls of safetensors (the classifier extra), so that mypy
# gives one answer whether the extra is installed or not ([tool.mypy] in pyproject.toml).
# Checked against the installed package by tests/unit/test_stubs.py (mypy's stubtest).
