"""Stand-in for Transformer Engine (see ../README.md): not TE."""
__version__ = "2.12.0+standin"
