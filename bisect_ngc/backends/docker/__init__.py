"""The Docker backend: probes in containers (backend) and the engine for what is not a
probe (engine): connecting, pulling, image inventories."""
