import numpy as np
import numpy.typing as npt

from . import TensorProto

def from_array(array: npt.NDArray[np.generic], /, name: str | None = None) -> TensorProto: ...
