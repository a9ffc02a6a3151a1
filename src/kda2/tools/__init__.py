"""Commands around the pipeline: the `kda2` CLI, inspection, tuning (DESIGN.md §3)."""
