import os

import numpy as np

def load_file(filename: str | os.PathLike[str], *, backend: str = "mmap") -> dict[str, np.ndarray]: ...
