"""numbench: a reproducible benchmark of NumPy, JAX, PyTorch, TensorFlow and Numba.

This top-level module imports nothing heavy: the cell worker sets thread limits and the
environment before any numerical library is loaded. Its public names are loaded when first
used: ``numbench.Operation``, the class every operation is (the nine built-in ones and a
user's own file alike: ``OPERATION = Operation(...)``; ``numbench.operations.base``), and
``numbench.as_is``, with which a builder hands over a kernel compiled its own way
(``numbench.operations.kernels``).
"""

__version__ = "0.1.0"

#: public name -> the module that defines it, imported on first use (PEP 562)
_PUBLIC = {"Operation": "numbench.operations.base", "as_is": "numbench.operations.kernels"}

__all__ = ["Operation", "__version__", "as_is"]


def __getattr__(name: str):
    if name in _PUBLIC:
        import importlib

        return getattr(importlib.import_module(_PUBLIC[name]), name)
    raise AttributeError(f"module 'numbench' has no attribute {name!r}")
