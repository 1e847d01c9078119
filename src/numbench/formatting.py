"""How values and series are written: times, sizes, speedups, library names.

Shared by the summary, the charts and the commands, so a library, a device or a size reads the
same in all of them. Markdown is written in ``numbench.report.markdown`` alone.
"""

from __future__ import annotations

import math

import pandas as pd

DISPLAY_NAMES = {
    "numpy": "NumPy",
    "jax": "JAX",
    "torch": "PyTorch",
    "tensorflow": "TensorFlow",
    "numba": "Numba",
    "cupy": "CuPy",
    "jax-eager": "JAX (eager)",
    "torch-compile": "PyTorch (torch.compile)",
    "tensorflow-eager": "TensorFlow (eager)",
}


def missing(value) -> bool:
    """None, NaN or pandas' NA: a value the tables left empty."""
    return value is None or (isinstance(value, float) and math.isnan(value)) or value is pd.NA


def format_seconds(s: float | None) -> str:
    if missing(s):
        return "–"
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def format_size(n: float | int | None, approx: bool = False, mark: bool = True) -> str:
    """'10^4' for powers of ten from 1000 up, '1,024' otherwise; an interpolated size is
    rounded to two significant digits, '≈ 2,300' (without the '≈' when ``mark`` is false)."""
    if missing(n):
        return "–"
    if approx:
        digits = max(0, int(math.floor(math.log10(n))) - 1)
        rounded = round(n / 10**digits) * 10**digits
        return f"≈ {rounded:,.0f}" if mark else f"{rounded:,.0f}"
    n = int(n)
    k = math.log10(n) if n > 0 else 0
    if n >= 1000 and k.is_integer():
        return f"10^{int(k)}"
    return f"{n:,}"


def format_sizes(sizes) -> str:
    """'10, 100, 10^3': sizes in increasing order."""
    return ", ".join(format_size(s) for s in sorted(sizes))


def format_speedup(s: float | None) -> str:
    if missing(s):
        return "–"
    return f"{s:.3g}×"


def format_ci(lo: float | None, hi: float | None) -> str:
    if missing(lo) or missing(hi):
        return ""
    return f"({lo:.3g} to {hi:.3g})"


def slowdown(s: float) -> str:
    """', i.e. 12× slower' for speedups well below 1, where '0.083×' is hard to read."""
    return f", i.e. {1 / s:.3g}× slower" if 0 < s < 0.5 else ""


# -- names --------------------------------------------------------------------------------------
def display(library: str) -> str:
    """The library's name in prose: 'PyTorch' for 'torch'."""
    return DISPLAY_NAMES.get(library, library)


def who(library: str, device: str, multi_device: bool) -> str:
    """A library in a sentence: 'PyTorch', or 'PyTorch on gpu' when devices must be told apart."""
    name = display(library)
    return f"{name} on {device}" if multi_device else name


def series_label(library: str, device: str, with_device: bool) -> str:
    """A library in a table header, a chart legend or a list: 'torch', or 'torch (gpu)'."""
    return f"{library} ({device})" if with_device else str(library)


def series_labels(df: pd.DataFrame, with_device: bool | None = None) -> pd.Series:
    """``series_label`` of every row of ``df``; by default the device is named when ``df``
    holds more than one. Where ``df`` holds several dtypes or thread counts, each label
    names its own too ('jax (float32, 2 threads)'), so a chart or a table never draws two
    of them as one series."""
    if with_device is None:
        with_device = df["device"].nunique() > 1
    labels = [series_label(lib, dev, with_device) for lib, dev in zip(df["library"], df["device"])]
    extra: list[list[str]] = [[] for _ in labels]
    if "dtype" in df and df["dtype"].nunique() > 1:
        for parts, dtype in zip(extra, df["dtype"], strict=True):
            parts.append(str(dtype))
    if "threads" in df and df["threads"].nunique() > 1:
        for parts, n in zip(extra, df["threads"], strict=True):
            parts.append(f"{int(n)} thread" + ("" if int(n) == 1 else "s"))
    labels = [
        label
        if not parts
        else f"{label[:-1]}, {', '.join(parts)})"
        if label.endswith(")")
        else f"{label} ({', '.join(parts)})"
        for label, parts in zip(labels, extra, strict=True)
    ]
    return pd.Series(labels, index=df.index, dtype=str)
