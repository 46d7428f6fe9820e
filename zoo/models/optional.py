"""Whether TensorFlow is installed. The task models and their preprocessors tokenize with
tf-text and need it; the backbones are ``keras.ops`` only and do not (Keras's JAX backend on a
GPU machine where TensorFlow is not installed)."""

try:
    import tensorflow  # noqa: F401
except ImportError:
    HAS_TENSORFLOW = False
else:
    HAS_TENSORFLOW = True

__all__ = ["HAS_TENSORFLOW"]
