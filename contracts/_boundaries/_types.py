"""Array annotations: jaxtyping's language, with the dtypes contracts accept."""

from __future__ import annotations

from typing import TYPE_CHECKING, Union

import jaxtyping
import numpy as np
from jaxtyping import Bool

__all__ = ["Array", "Bool", "Index"]

if TYPE_CHECKING:
    # Static checkers see the array type itself, as jaxtyping arranges for its own dtypes.
    from typing import Annotated as Index

    import torch

    Array = Union[np.ndarray, torch.Tensor]
else:
    # jaxtyping needs a runtime type; validation accepts numpy and torch alike.
    Array = np.ndarray

    class Index(jaxtyping.AbstractDtype):
        """Integer ids, counts and offsets: int32 or int64, as engines store them."""

        dtypes = ["int32", "int64"]  # noqa: RUF012 - jaxtyping reads this class attribute
