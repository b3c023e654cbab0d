"""`--with`: the user's own layer on top of every probe's torch. specs (pure: what a
companion is), sources (git companions resolved to commits), builds (made ready for one
probe).

May import: core, vcs."""
