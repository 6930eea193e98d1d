# Local stubs: only what tokenward calls of onnx (the classifier extra: an ONNX graph built in
# memory), so that mypy gives one answer whether the extra is installed or not. Checked
# against the installed package by tests/unit/test_stubs.py (mypy's stubtest).
from . import helper as helper
from . import numpy_helper as numpy_helper

class TensorProto:
    FLOAT: int
    INT64: int

class NodeProto: ...
class ValueInfoProto: ...
class GraphProto: ...
class OperatorSetIdProto: ...

class ModelProto:
    def SerializeToString(self, **kwargs: object) -> bytes: ...
