import os
from collections.abc import Sequence
from typing import IO, Literal, overload

import numpy as np
import numpy.typing as npt

from matplotlib.text import Text

class Figure:
    def __init__(self, figsize: tuple[float, float] | None = None, dpi: float | None = None, *,
                 facecolor: object = None, edgecolor: object = None, linewidth: float = 0.0,
                 frameon: bool | None = None, subplotpars: object = None, tight_layout: object = None,
                 constrained_layout: object = None,
                 layout: Literal["constrained", "compressed", "tight"] | None = None, **kwargs: object) -> None: ...
    def suptitle(self, t: str, **kwargs: object) -> Text: ...
    @overload   # squeeze=False: always a 2-d array of matplotlib.axes.Axes
    def subplots(self, nrows: int = 1, ncols: int = 1, *, sharex: bool | str = False, sharey: bool | str = False,
                 squeeze: Literal[False], width_ratios: Sequence[float] | None = None,
                 height_ratios: Sequence[float] | None = None, subplot_kw: dict[str, object] | None = None,
                 gridspec_kw: dict[str, object] | None = None) -> npt.NDArray[np.object_]: ...
    @overload   # one Axes, or an array of them
    def subplots(self, nrows: int = 1, ncols: int = 1, *, sharex: bool | str = False, sharey: bool | str = False,
                 squeeze: bool = True, width_ratios: Sequence[float] | None = None,
                 height_ratios: Sequence[float] | None = None, subplot_kw: dict[str, object] | None = None,
                 gridspec_kw: dict[str, object] | None = None) -> object: ...
    def savefig(self, fname: str | os.PathLike[str] | IO[bytes], *, transparent: bool | None = ...,
                **kwargs: object) -> None: ...
