import os

# Compiles dominate the suite's time; XLA's optimizations don't change what the
# tests compare (the original and decoded programs run under the same flags).
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
