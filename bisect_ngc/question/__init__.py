"""From command-line options to one wired question: the options (declared once) and their
rules, the recipe, the metric options, component mode, merge descents, and wiring (range,
recipe, backend, tiers).

May import: every package but cli."""
