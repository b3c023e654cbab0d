"""Which part of the container made the difference: the delta-debugging search over
components (search, pure), what an image is made of (components), the scripts run inside
an image (scripts), and swap probes with their log (swap_probes, swap_log).

May import: core (images are reached through a backend's Containers, core/probes.py)."""
