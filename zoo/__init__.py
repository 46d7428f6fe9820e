"""zoo: a Keras 3 transformer model zoo.

Importing zoo registers its layers and models with Keras, so ``keras.models.load_model`` reads
a ``.keras`` file of zoo's back into the model that saved it (a ``Translator`` translates).
"""

import gc

# Importing TensorFlow, Keras and zoo makes several hundred thousand long-lived objects and
# little garbage. No collection runs while they are made (each would walk them all), and then
# they are frozen, so that later collections skip them too: those while graphs are traced, and
# the one at exit. A process that imports zoo spends about 3 s of CPU less.
_collecting = gc.isenabled()
gc.disable()
try:
    from zoo import layers, models
finally:
    if _collecting:
        gc.enable()
gc.freeze()

__version__ = "0.1.0"
