"""Range types for config values: what builder and settings signatures annotate their parameters
with (``gamma: Discount``), so that the signature is the key's schema.

A leaf module (pydantic only): the env factory, the algorithm builders, the settings classes and
the config check import from here, and it imports nothing of xdrl.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

from pydantic import Field

PositiveInt = Annotated[int, Field(ge=1)]
NonNegativeInt = Annotated[int, Field(ge=0)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]  # [0, 1]
OpenFraction = Annotated[float, Field(gt=0, le=1, allow_inf_nan=False)]  # (0, 1]
Discount = Fraction
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
Cells = Sequence[PositiveInt]  # hidden layer sizes of an MLP
Activation = Literal["tanh", "relu", "elu"]
LossFunction = Literal["l2", "l1", "smooth_l1"]
Encoder = Literal["auto", "mlp", "cnn"]  # observation encoder: auto picks a CNN for images
RecurrentCell = Literal["lstm", "gru"]  # the memory cell of a recurrent policy
Seed = Annotated[int, Field(ge=0, le=2**32 - 1)]
NonEmptyStr = Annotated[str, Field(min_length=1)]

# The names above, for reading an annotation from source (xdrl.config.signatures.read_signature).
RANGE_TYPES = (
    "PositiveInt NonNegativeInt PositiveFloat NonNegativeFloat Fraction OpenFraction Discount "
    "FiniteFloat Cells Activation LossFunction Encoder RecurrentCell Seed NonEmptyStr"
).split()
