"""paperlib: a reproducible compendium of better generative models of language."""

__version__ = "0.1.0"
