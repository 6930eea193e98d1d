# Local stubs: only what tokenward calls of onnxruntime (the classifier extra), which ships
# no types of its own. Checked against the installed package by tests/unit/test_stubs.py.
import enum
import os
from collections.abc import Mapping, Sequence

class GraphOptimizationLevel(enum.Enum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99

class SessionOptions:
    graph_optimization_level: GraphOptimizationLevel
    def __init__(self) -> None: ...
    def add_session_config_entry(self, arg0: str, arg1: str, /) -> None: ...

class InferenceSession:
    def __init__(self, path_or_bytes: str | bytes | os.PathLike[str], sess_options: SessionOptions | None = None,
                 providers: Sequence[str] | None = None, provider_options: Sequence[dict[str, str]] | None = None,
                 **kwargs: object) -> None: ...
    # the outputs are arrays, sparse tensors, lists or maps, as the graph says
    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, object],
            run_options: object = None) -> Sequence[object]: ...
