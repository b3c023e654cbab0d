"""What answers before a build: the NGC release catalog (releases), prebuilt tiers (images,
nightly wheels), overlay probes, a neighbour's wheel with a commit's Python files put in
(overlay is the pure rule, wheel_overlay the probes), release mode's rule for images among
builds (image_evidence), and what an image's config says it holds (image_config, pure),
read from its registry with no pull (registry).

May import: core, vcs."""
