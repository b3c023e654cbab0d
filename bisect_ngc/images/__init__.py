"""NGC images and their registry: the release catalog (releases: release -> image, torch
commit, CUDA, TE), what an image's config says it holds (image_config, pure: the one table
of components), its registry read with no pull (registry, registry_login, and oras_seam:
the oras internals it uses), and release mode's rule for images among builds
(image_evidence). Nothing here runs outside release mode and the commands that name
images (`releases`, `resolve`, `diff`, `components`).

May import: core, vcs."""
