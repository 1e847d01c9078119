"""numbench: a reproducible benchmark of NumPy, JAX, PyTorch, TensorFlow and Numba.

This top-level module imports nothing heavy: the cell worker sets thread limits and the
environment before any numerical library is loaded.
"""

__version__ = "0.1.0"
