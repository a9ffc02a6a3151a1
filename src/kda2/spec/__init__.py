"""Stage 1, spec: YAML specs and rules, validated into data (DESIGN.md §2.1). Nothing here knows of
the later stages; the planner reads what this stage returns."""
