"""The CLI's subcommands beyond bisect, plan and probe, grouped by what they show."""
