"""The notes of benchmarks.parquet's ``roof_note`` column, and the noise they are judged by:
analyse writes them (``numbench.analyse.roofline``), report explains them."""

from __future__ import annotations

#: how far past its roof a cell may be before it is called a cost-model error
ROOF_NOISE_FACTOR = 1.1
CACHE_RESIDENT = "cache-resident"
WITHIN_NOISE = "within noise"
COST_MODEL_ERROR = "cost-model error"
