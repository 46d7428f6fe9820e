"""zoo: a Keras 3 transformer model zoo.

Importing zoo registers its layers with Keras, so ``keras.models.load_model`` can read
``.keras`` files that use them.
"""

from zoo import layers

__version__ = "0.1.0"
