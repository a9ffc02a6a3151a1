"""SCons-facing part of kda2 (imported only inside an SCons process)."""
