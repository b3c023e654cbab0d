"""The command line, click only: it parses, calls and prints. main holds the group, bisect,
plan and probe; cache, catalog, diff, components, sessions and slurm the other commands; the
rest is what they print (answers, summary_text, metric_text, json_output, progress, live,
tracker, help_sections).

May import: every package."""
