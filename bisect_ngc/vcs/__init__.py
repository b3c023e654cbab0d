"""Git: repositories and revisions (history), the probes' worktrees in lanes of their own
(worktrees), the clones the tool keeps (mirrors), submodules from a shared object cache,
and kept build trees.

May import: nothing of this package but errors and the pure leaves."""
