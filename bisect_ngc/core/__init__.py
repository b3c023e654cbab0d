"""The bisection itself, whatever is bisected and wherever it runs.

search (pure: verdicts in, next probes or an answer out), belief (pure: every run in, the
probability of each answer and the next runs out), verdicts (what a backend saw ->
a verdict), environments, keys, records and store (the state in SQLite; on a network
filesystem, filesystems.py says so), session_lock (one process per question), artifacts
(built outputs) and kept_builds (the local backend's, per commit), recipes (what a probe
builds and tests) and host_inputs (the host files and variables its keys hold), probes
(the Backend protocol and its requests), inputs (what a bisection is run with and the release-mode interfaces it calls),
judges (how probes become verdicts: pass/fail for release mode's tiers), belief_judge (the
belief as the judge of any other pass/fail bisection), engine (the loop), verification and
rerun (release mode's answer run again before it is given), host_gpu (this host's GPU).

May import: vcs, and the pure leaves of other packages."""
