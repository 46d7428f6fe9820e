"""The run options that the ``zoo`` command offers before TensorFlow loads, defined once.

Standard library only: the command reads this file by its path (see :mod:`zoo.tasks.table`).
"""

STRATEGIES = ("auto", "one_device", "mirrored", "multi_worker", "tpu")
# The compute dtype of --mixed-precision and its Keras policy; the weights stay float32.
MIXED_POLICIES = {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}
BACKUP_EVERY = 200  # steps between backups within an epoch
KEEP_CHECKPOINTS = 5  # the last epochs' weights a workdir keeps, for `zoo average`
