"""The suite's own input maker: realistic ocean values from its own generator and seed."""

import numpy as np


def generate_inputs(size: int, seed: int = 42) -> dict[str, np.ndarray]:
    rng = np.random.RandomState(seed)
    return {
        "t": rng.uniform(-2.0, 30.0, size),  # temperature, degrees C
        "s": rng.uniform(30.0, 40.0, size),  # salinity, g/kg
        "p": rng.uniform(0.0, 6000.0, size),  # pressure, dbar
    }
