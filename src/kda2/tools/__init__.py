"""Commands around the pipeline: the `kda2` CLI, inspection, tuning (DESIGN.md §3)."""


def count_arg(text: str, allowed: str) -> int:
    """An argparse type: a whole number >= 1 (`-j`, `--workers`); anything else is refused saying `allowed`."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed: {allowed}")
    return value
