"""zoo.export: the SavedModel frame that every task's serving module uses.

``folder`` writes an export folder (``model.keras``, the vocabulary, ``serving/N``) and the
float32 copy of a mixed-precision model; ``text_serving`` is the strings-to-strings module of
the text-to-text tasks. The tasks' own serving modules live with them (``zoo.tasks.*.serving``);
``python -m zoo.export.compare DIR [DIR ...]`` prints exported translators' outputs side by side.
"""
