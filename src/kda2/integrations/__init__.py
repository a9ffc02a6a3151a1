"""Integrations of the kda2 runtime with other libraries. Each one is opt-in, a module you import:

- `kda2.integrations.fla`: kda2 as a backend of flash-linear-attention (FLA >= 0.6). After
  `import kda2.integrations.fla` and with `FLA_KDA2=1` in the environment, FLA's `chunk_kda` and
  `fused_recurrent_kda` (and so FLA's KDA layers and models) run on the built kda2 libraries for every call
  those libraries can serve, and on FLA's own kernels otherwise.

Importing this package imports nothing else: FLA and torch are only needed by the module you import.
"""
