"""The device worker: the process that owns the card.

It holds the DiffRhythm model core (DiT, sampler, Oobleck VAE) and the backends that run it (torch on
CPU/CUDA, ttnn on a Tenstorrent p100a). It imports nothing from `engine` or `studio` and runs on
CPython 3.10-3.12, so it can live in the card's own environment.
"""

__version__ = "0.1.0"
