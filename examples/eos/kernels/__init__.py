"""An equation of state of seawater, written once per library as a scientist would write it:
the density (kg/m^3) from temperature (degrees C), salinity (g/kg) and pressure (dbar), a
polynomial of the kind ocean models evaluate at every grid point of every time step.

Each module holds one library's kernel, compiled the way its author chose (already under
``jax.jit``, a ``tf.function`` with an input signature, a Numba loop written for
``numba.prange``), and imports its library at its top, as such modules do: numbench's
operation file (``../eos.py``) imports each one inside its builder only.
"""
