"""Array annotations: jaxtyping's language, with the dtypes contracts accept.

``Index[Array, "num_decode mtp_k"]`` reads as in jaxtyping, and static checkers see
jaxtyping's own types. At run time the annotations are small classes carrying the two
things field compilation reads, ``dim_str`` and ``dtypes``, built without importing
jaxtyping: its import (and its import hook) cost more than the rest of
``import specguard.contracts`` together. Fields annotated with jaxtyping's own dtypes
(``jaxtyping.Int[...]``) compile the same way, by the same two attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Union

import numpy as np

__all__ = ["Array", "Bool", "Index"]

if TYPE_CHECKING:
    # Static checkers see the array type itself, as jaxtyping arranges for its own dtypes.
    from typing import Annotated as Index

    import torch
    from jaxtyping import Bool

    Array = Union[np.ndarray, torch.Tensor]
else:
    # Validation accepts numpy and torch alike; the annotation names numpy's array type.
    Array = np.ndarray

    class _Dtypes:
        """A dtype family subscripted like jaxtyping's: ``Index[Array, "num_seqs"]``."""

        __slots__ = ("__name__", "_made", "dtypes")

        def __init__(self, name: str, dtypes: tuple[str, ...]) -> None:
            self.__name__ = name
            self.dtypes = dtypes
            self._made: dict[tuple[Any, str], type] = {}

        def __getitem__(self, item: Any) -> type:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str)):
                raise TypeError(f"{self.__name__}[array type, 'shape'] expected, got {item!r}")
            array_type, dim_str = item
            made = self._made.get(item)
            if made is None:
                name = f"{self.__name__}[{getattr(array_type, '__name__', array_type)}, " \
                       f"{dim_str!r}]"
                made = type(name, (), {"array_type": array_type, "dim_str": dim_str,
                                       "dtypes": self.dtypes, "dtype": self,
                                       "__module__": __name__})
                self._made[item] = made
            return made

        def __repr__(self) -> str:
            return self.__name__

    #: Integer ids, counts and offsets: int32 or int64, as engines store them.
    Index = _Dtypes("Index", ("int32", "int64"))
    #: Flags: bool.
    Bool = _Dtypes("Bool", ("bool",))
