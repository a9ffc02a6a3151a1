"""`import kda2.monitor` (and `from kda2.monitor import enable`): the runtime monitor, kda2.runtime.monitor.

Not a copy: this module puts kda2.runtime.monitor itself in its place in sys.modules, so `kda2.monitor`,
reached as an attribute of kda2 or imported, is one module with one state. Like kda2.runtime, importing it
needs no torch.
"""
import sys

from kda2.runtime import monitor as _monitor

sys.modules[__name__] = _monitor
