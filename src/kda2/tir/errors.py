"""Errors of the TIR stage. Kept free of TVM imports so callers can catch them cheaply."""
from __future__ import annotations


class TirError(Exception):
    """Base class of every error the TIR stage raises on purpose."""


class TirConfigError(TirError, ValueError):
    """A config the TIR stage cannot model (missing field, value outside what the model supports)."""


class TirBudgetError(TirError):
    """The variant's shared-memory tile does not fit the shared-memory budget it was planned for."""


class BankModelError(TirError):
    """The bank-conflict analysis met IR it cannot evaluate (an unsupported expression or statement)."""
