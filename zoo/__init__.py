"""zoo: a Keras 3 transformer model zoo.

Importing zoo registers its layers and models with Keras, so ``keras.models.load_model`` reads
a ``.keras`` file of zoo's back into the model that saved it (a ``Translator`` translates).
"""

from zoo import layers, models

__version__ = "0.1.0"
