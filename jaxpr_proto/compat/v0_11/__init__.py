"""JAX 0.11: its adapter (`adapter.py`), the param names its primitives take
(`params.py`, generated), and what changed since the previous minor
(`changes.py`)."""
