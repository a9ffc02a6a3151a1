"""Exceptions of the runtime. Each message names the thing at fault, what it was and what would work."""
from __future__ import annotations


class KDA2Error(Exception):
    """Base class of every error the runtime raises on purpose."""


class ArtifactError(KDA2Error, RuntimeError):
    """A built artifact is missing, corrupt or does not match its manifest (or this runtime)."""


class KDA2InputError(KDA2Error, ValueError):
    """A call's arguments cannot run on the loaded library; raised before anything is launched."""


class KDA2LaunchError(KDA2Error, RuntimeError):
    """The library refused or failed a launch; `code` is the raw return value (cudaError_t or KDA2Status)."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code
