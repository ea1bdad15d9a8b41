"""Session setup of the Python tests.

Loaders read the whole stream even when the tests run under a launcher (a
SLURM step, torchrun), whose variables would otherwise put them in a
consumer group (docs/semantics.md, "Groups, several GPUs, several nodes"); the
tests of groups set up their own environment (test_groups.py).
"""
import os

os.environ["BATCHCAST_GROUP"] = "none"
