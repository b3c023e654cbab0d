"""The Slurm backend: probes as job arrays (backend), with its batch scripts, queue,
results, tasks, images for enroot and pyxis, containers, companions and settings."""
