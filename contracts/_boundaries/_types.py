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

    class _Subscripted(type):
        """Subscripting as jaxtyping's dtypes do: ``Index[Array, "num_seqs"]`` is a class
        carrying ``dim_str`` and the family's ``dtypes``, made once per shape."""

        def __getitem__(cls, item: Any) -> type:
            if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], str)):
                raise TypeError(f"{cls.__name__}[array type, 'shape'] expected, got {item!r}")
            made: dict[tuple[Any, str], type] = cls.__dict__["_made"]
            found = made.get(item)
            if found is None:
                array_type, dim_str = item
                name = f"{cls.__name__}[{getattr(array_type, '__name__', array_type)}, " \
                       f"{dim_str!r}]"
                found = type(name, (), {"array_type": array_type, "dim_str": dim_str,
                                        "dtypes": cls.dtypes, "dtype": cls,
                                        "__module__": __name__})
                made[item] = found
            return found

    class Index(metaclass=_Subscripted):
        """Integer ids, counts and offsets: int32 or int64, as engines store them."""

        dtypes = ("int32", "int64")
        _made: dict[tuple[Any, str], type] = {}  # noqa: RUF012 - one cache per family

    class Bool(metaclass=_Subscripted):
        """Flags: bool."""

        dtypes = ("bool",)
        _made: dict[tuple[Any, str], type] = {}  # noqa: RUF012 - one cache per family
