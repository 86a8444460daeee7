"""Every converter module of the front end, imported in one place: importing this module registers every
Keras layer the front end converts, so its CONVERTERS and PRODUCES are complete (base.py's are filled as
modules register). A new layer family is a module in this folder that uses `@converts`, listed here."""

from . import (  # noqa: F401  importing a module registers its converters
    activations,
    attention,
    convolution,
    convolution_variants,
    core,
    embedding,
    merge,
    normalization,
    recurrent,
    reshaping,
    spatial,
)
from .base import CONVERTERS, PRODUCES, REFUSES

__all__ = ["CONVERTERS", "PRODUCES", "REFUSES"]
