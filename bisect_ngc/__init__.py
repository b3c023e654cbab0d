"""bisect-ngc: find the upstream commit that changed a repro between two NGC releases."""
__version__ = "0.1.0"
