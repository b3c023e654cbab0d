"""What answers before a build: prebuilt tiers (images, nightly wheels, given artifacts)
and overlay probes, a neighbour's wheel with a commit's Python files put in (overlay is
the pure rule, wheel_overlay the probes).

May import: core, vcs, images."""
