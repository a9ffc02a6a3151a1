"""What build and runtime share (DESIGN.md §2.6): the ABI facts, the manifest, atomic writes.
Standard library only: a deployment imports this without any build-time package."""
