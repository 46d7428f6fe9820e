"""zoo.export: the SavedModel frame that every model's serving module uses: the export folder
and the float32 copy of a mixed-precision model (``folder``), TF Serving's warm-up requests
(``warmup``), and ``python -m zoo.export.compare`` to print exported translators side by side.
"""
