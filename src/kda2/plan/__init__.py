"""Stage 2, plan: Spec × arch → kernel variants and the dispatch table that routes buckets to them
(DESIGN.md §2.2). Agents propose, rules adjust, `variant` names what gets compiled."""
