"""Shared test helpers. Every zoo layer goes through `run_layer_test`.

`run_layer_test` checks, in order:
  1. the class is registered with Keras under the "zoo" package;
  2. every constructor argument is stored under its own name by `get_config`, and
     `from_config(get_config())` gives the same config back;
  3. an eager call, with the expected output shape, and finite outputs;
  4. a symbolic call inside a functional model: same shapes, same outputs as eager;
  5. a `.keras` save, then `keras.models.load_model` in a *fresh subprocess* that imports
     only zoo and keras (forked from a server that has done those imports), giving the same
     outputs;
  6. `mixed_bfloat16`: float32 variables, bfloat16 outputs, close to the float32 outputs;
  7. one `fit` step that changes every trainable weight.

`fit_built` is `model.fit` with the optimizer built first, for tests that fit a model of
their own.
"""

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
import textwrap

import keras
import numpy as np
from keras import ops

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _as_dict(input_data):
    if isinstance(input_data, dict):
        return dict(input_data)
    if isinstance(input_data, list):
        return {f"inputs_{i}": array for i, array in enumerate(input_data)}
    return {"inputs": input_data}


def _call(layer, inputs, call_kwargs, as_list=False):
    """Call `layer` with the first input positionally and the rest by name, or (``as_list``)
    with all of them as one list, its first argument."""
    names = list(inputs)
    if as_list:
        return layer([inputs[name] for name in names], **call_kwargs)
    first = inputs[names[0]]
    rest = {name: inputs[name] for name in names[1:]}
    return layer(first, **rest, **call_kwargs)


def _flat(outputs):
    return list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]


def _numpy(x):
    return np.asarray(ops.convert_to_numpy(ops.cast(x, "float32") if _is_float(x) else x))


def _dtype(x):
    return keras.backend.standardize_dtype(x.dtype)


def _is_float(x):
    return "float" in _dtype(x)


def _same_shape(symbolic, concrete):
    if len(symbolic) != len(concrete):
        return False
    return all(s is None or s == c for s, c in zip(symbolic, concrete))


def _relative_error(a, b):
    a, b = np.asarray(a, "float64"), np.asarray(b, "float64")
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-12)


# A server that imports only zoo and keras, then forks one child per load: each load runs in
# a process whose state is that of a fresh Python after `import keras, zoo`, without paying
# for the imports (TensorFlow alone takes seconds) once per load. Fork is safe here: the
# server never runs a TensorFlow op, so no runtime or thread pool exists before the fork.
_LOADER_SCRIPT = textwrap.dedent(
    """
    import json
    import os
    import sys
    import traceback

    import numpy as np
    import keras
    import zoo  # registers the zoo layers


    def load(model_path, inputs_path, outputs_path):
        model = keras.models.load_model(model_path)
        data = np.load(inputs_path)
        inputs = {name: data[name] for name in data.files}
        outputs = model(inputs)
        outputs = list(outputs) if isinstance(outputs, (tuple, list)) else [outputs]
        np.savez(
            outputs_path,
            *[keras.ops.convert_to_numpy(keras.ops.cast(o, "float32")) for o in outputs],
        )


    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: its output goes to the request's log file
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(log, 1)
            os.dup2(log, 2)
            try:
                load(*request["args"])
                code = 0
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status), flush=True)
    """
)
_loader = None


def _loader_process():
    """The running loader server, started on first use (and again if it died)."""
    global _loader
    if _loader is None or _loader.poll() is not None:
        env = dict(os.environ, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
        env.setdefault("KERAS_BACKEND", keras.backend.backend())
        _loader = subprocess.Popen(
            [sys.executable, "-c", _LOADER_SCRIPT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        atexit.register(_loader.kill)
    return _loader


def load_in_fresh_process(model_path, inputs, timeout=300):
    """Load a `.keras` file in a new process that has imported only zoo and keras (forked
    from the loader server), and return its outputs on `inputs`."""
    folder = os.path.dirname(model_path)
    inputs_path = os.path.join(folder, "inputs.npz")
    outputs_path = os.path.join(folder, "outputs.npz")
    log_path = os.path.join(folder, "load.log")
    np.savez(inputs_path, **inputs)
    loader = _loader_process()
    request = {"args": [model_path, inputs_path, outputs_path], "log": log_path}
    loader.stdin.write(json.dumps(request) + "\n")
    loader.stdin.flush()
    ready, _, _ = select.select([loader.stdout], [], [], timeout)
    reply = loader.stdout.readline() if ready else ""
    if not reply:  # timed out, or the server died: start a new one next time
        loader.kill()
    log = open(log_path).read() if os.path.exists(log_path) else ""
    assert reply.strip() == "0", f"load_model in a fresh process failed ({reply!r}):\n{log[-4000:]}"
    loaded = np.load(outputs_path)
    return [loaded[f"arr_{i}"] for i in range(len(loaded.files))]


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    call_kwargs=None,
    expected_output_shape=None,
    allow_untrained_weights=(),
    run_training=True,
    run_mixed_precision=True,
    atol=1e-5,
):
    """Run the full battery of checks on one layer configuration.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        input_data: a NumPy array (the first call argument); a list of arrays, passed
            together as one list, the first call argument (a layer over several tensors); or a
            dict of call-argument name to array, the first entry passed positionally and the
            rest by name.
        call_kwargs: non-tensor call arguments (flags such as `use_causal_mask`).
        expected_output_shape: shape of the first output, or a list of shapes.
        allow_untrained_weights: substrings of weight paths that may legitimately get no
            gradient (for example the key bias, to which softmax is invariant).
        run_training: run the fit-step check.
        run_mixed_precision: run the mixed_bfloat16 check.
        atol: tolerance of the output comparisons.

    Returns:
        The layer built in the eager check, and its eager outputs (a list).
    """
    call_kwargs = dict(call_kwargs or {})
    inputs = _as_dict(input_data)
    as_list = isinstance(input_data, list)

    # 1. Registered with Keras.
    registered = keras.saving.get_registered_name(layer_cls)
    assert registered.startswith("zoo>"), f"{layer_cls.__name__} is not registered: {registered}"

    # 2. Config round trip.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    for name, value in init_kwargs.items():
        assert name in config, f"get_config() of {layer_cls.__name__} lacks {name!r}"
        stored = config[name]
        if isinstance(value, str) and isinstance(stored, dict):
            # A Keras object given by name ("glorot_uniform") is stored serialized.
            stored = stored.get("class_name", "")
            assert stored.replace("_", "").lower() == value.replace("_", "").lower(), (
                f"{name!r}: config has {config[name]!r}, given {value!r}"
            )
        elif isinstance(value, (bool, int, float, str, type(None))):
            assert stored == value, f"{name!r}: config has {stored!r}, given {value!r}"
    clone = layer_cls.from_config(config)
    assert json.dumps(clone.get_config(), sort_keys=True, default=str) == json.dumps(
        config, sort_keys=True, default=str
    ), "from_config(get_config()) does not give the same config back"

    # 3. Eager call.
    eager = [_numpy(o) for o in _flat(_call(layer, inputs, call_kwargs, as_list))]
    if expected_output_shape is not None:
        expected = (
            expected_output_shape
            if isinstance(expected_output_shape, list)
            else [expected_output_shape]
        )
        for out, shape in zip(eager, expected):
            assert out.shape == tuple(shape), f"output shape {out.shape}, expected {tuple(shape)}"
    for out in eager:
        if out.dtype.kind == "f":
            assert np.all(np.isfinite(out)), "eager output is not finite"

    # 4. Symbolic call in a functional model, sharing the eager layer's weights.
    symbolic_inputs = {
        name: keras.Input(shape=array.shape[1:], dtype=str(array.dtype), name=name)
        for name, array in inputs.items()
    }
    symbolic = _flat(_call(layer, symbolic_inputs, call_kwargs, as_list))
    assert len(symbolic) == len(eager), "symbolic and eager calls return different structures"
    for sym, out in zip(symbolic, eager):
        assert _same_shape(tuple(sym.shape), out.shape), f"symbolic {sym.shape} vs eager {out.shape}"
    model = keras.Model(symbolic_inputs, symbolic if len(symbolic) > 1 else symbolic[0])
    functional = [_numpy(o) for o in _flat(model(inputs))]
    for got, want in zip(functional, eager):
        np.testing.assert_allclose(got, want, atol=atol, err_msg="functional != eager")

    # 5. `.keras` round trip, loaded in a fresh process.
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.keras")
        model.save(path)
        reloaded = load_in_fresh_process(path, inputs)
    for got, want in zip(reloaded, eager):
        np.testing.assert_allclose(got, want, atol=atol, err_msg="reloaded .keras != original")

    # 6. mixed_bfloat16.
    if run_mixed_precision:
        _check_mixed_bfloat16(layer_cls, init_kwargs, layer, inputs, call_kwargs, eager, as_list)

    # 7. (last: it changes the weights) One fit step.
    if run_training:
        _check_fit_step(symbolic_inputs, symbolic[0], inputs, allow_untrained_weights)
    return layer, eager


def fit_built(model, *args, **kwargs):
    """``model.fit(*args, **kwargs)`` with the optimizer's variables made first, as zoo's
    ``train()`` makes them.

    Without a tf.distribute strategy in scope (``train()`` runs under one), Keras makes them
    inside the first traced train step, and TensorFlow then traces that step a second time
    without the variable creation: about half of a small model's first ``fit``. The variables,
    and so the results, are the same either way.
    """
    assert model.built, "fit_built needs a built model: its trainable variables are the optimizer's"
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    return model.fit(*args, **kwargs)


def _check_fit_step(symbolic_inputs, output, inputs, allow_untrained_weights):
    model = keras.Model(symbolic_inputs, output)
    model.compile(optimizer=keras.optimizers.Adam(1e-2), loss="mse")
    before = {w.path: np.array(w.numpy()) for w in model.trainable_weights}
    batch = next(iter(inputs.values())).shape[0]
    target = np.random.default_rng(0).normal(size=(batch,) + tuple(output.shape[1:]))
    history = fit_built(model, inputs, target.astype("float32"), batch_size=batch, epochs=1,
                        verbose=0)
    assert np.isfinite(history.history["loss"][0]), "the fit step gave a non-finite loss"
    unchanged = [
        w.path
        for w in model.trainable_weights
        if np.array_equal(before[w.path], w.numpy())
        and not any(allowed in w.path for allowed in allow_untrained_weights)
    ]
    assert not unchanged, f"one fit step left these weights unchanged: {unchanged}"


def _check_mixed_bfloat16(layer_cls, init_kwargs, layer, inputs, call_kwargs, eager, as_list):
    mixed = layer_cls(**{**init_kwargs, "dtype": "mixed_bfloat16"})
    outputs = _flat(_call(mixed, inputs, call_kwargs, as_list))  # builds it
    mixed.set_weights(layer.get_weights())
    outputs = _flat(_call(mixed, inputs, call_kwargs, as_list))
    for weight in mixed.weights:
        if _is_float(weight):
            assert _dtype(weight) == "float32", f"{weight.path} is {weight.dtype}, not float32"
    for got, want in zip(outputs, eager):
        if _is_float(got):
            assert _dtype(got) == "bfloat16", f"mixed_bfloat16 output is {got.dtype}"
            error = _relative_error(_numpy(got), want)
            assert error < 5e-2, f"mixed_bfloat16 output is {error:.3f} (relative) from float32"


def assert_unchanged_where(before, after, keep, atol=1e-5, message=""):
    """Assert that outputs at positions where `keep` (B, T) is True did not move."""
    before, after = _numpy(before), _numpy(after)
    keep = np.asarray(keep, bool)
    np.testing.assert_allclose(after[keep], before[keep], atol=atol, err_msg=message)
    return np.abs(after - before).max()


def check_padding_leak(layer_fn, x, padding_mask, seed=0, atol=1e-5):
    """Changing padded positions of `x` must not change the outputs at real positions.

    Args:
        layer_fn: ``f(x, padding_mask) -> (B, T, ...)`` outputs.
        x: ``(B, T, D)`` float inputs.
        padding_mask: ``(B, T)`` boolean, True for real positions.
    """
    padding_mask = np.asarray(padding_mask, bool)
    noise = np.random.default_rng(seed).normal(size=x.shape).astype(x.dtype) * 10
    perturbed = np.where(padding_mask[..., None], x, x + noise)
    before = layer_fn(x, padding_mask)
    after = layer_fn(perturbed, padding_mask)
    assert_unchanged_where(before, after, padding_mask, atol, "padded positions leaked")


def check_causal_leak(layer_fn, x, seed=0, atol=1e-5):
    """Changing future positions of `x` must never change the outputs at earlier ones.

    Args:
        layer_fn: ``f(x) -> (B, T, ...)`` outputs of a causal layer.
        x: ``(B, T, D)`` float inputs.
    """
    batch, length = x.shape[:2]
    rng = np.random.default_rng(seed)
    base = layer_fn(x)
    for t in range(1, length):
        perturbed = x.copy()
        perturbed[:, t:] += rng.normal(size=perturbed[:, t:].shape).astype(x.dtype) * 10
        keep = np.zeros((batch, length), bool)
        keep[:, :t] = True
        assert_unchanged_where(base, layer_fn(perturbed), keep, atol, f"future leaked into t<{t}")


def check_cached_decode(layer, x, atol=1e-5):
    """Step-by-step self-attention decoding with the KV cache, under XLA, equals the full
    causal pass, at every step.

    Args:
        layer: an attention layer (MultiHeadAttention or a variant).
        x: ``(B, T, D)`` float inputs.
    """
    import tensorflow as tf  # the XLA compile of the step; tests run on TensorFlow

    batch, length = x.shape[:2]
    full = _numpy(layer(x, use_causal_mask=True))

    @tf.function(jit_compile=True)
    def step(token, cache, index):
        return layer(token, cache=cache, cache_index=index)

    cache = layer.init_cache(batch, length + 3)  # longer than needed: empty slots stay unseen
    for t in range(length):
        out, cache = step(x[:, t : t + 1], cache, tf.constant(t))
        np.testing.assert_allclose(_numpy(out)[:, 0], full[:, t], atol=atol, err_msg=f"step {t}")


def jit_call(layer, *inputs, **kwargs):
    """``layer(*inputs, **kwargs)`` compiled whole by ``jax.jit``, on Keras's JAX backend.

    Eager JAX compiles every op on its own, tens of milliseconds each; one compile of the
    whole call costs a fraction of that. An unbuilt layer is built by a symbolic call first.
    NumPy arrays are traced; the other arguments (flags) are fixed at compile time. The call
    is the layer's ``stateless_call``, as ``fit`` runs it on JAX: what it writes to its
    variables (training-time statistics) is assigned to them afterwards.
    """
    import jax

    if not layer.built:
        layer(*(keras.Input(batch_shape=x.shape, dtype=str(x.dtype)) for x in inputs))
    arrays = {name: value for name, value in kwargs.items() if isinstance(value, np.ndarray)}
    flags = {name: value for name, value in kwargs.items() if name not in arrays}

    def run(trainable, non_trainable, inputs, arrays):
        return layer.stateless_call(trainable, non_trainable, *inputs, **arrays, **flags)

    outputs, non_trainable = jax.jit(run)(
        [v.value for v in layer.trainable_variables],
        [v.value for v in layer.non_trainable_variables],
        inputs,
        arrays,
    )
    for variable, value in zip(layer.non_trainable_variables, non_trainable):
        variable.assign(value)
    return outputs


class NoTensorFlow:
    """First in ``sys.meta_path``, this finder makes TensorFlow and tf-text unimportable, as on
    a GPU machine where they are not installed. A module already imported stays imported."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("tensorflow", "tensorflow_text"):
            raise ImportError(f"No module named {name!r}")


def run_on_jax(script, timeout=600):
    """Run ``script`` in a fresh Python on Keras's JAX backend (CPU); return its stdout.

    Keras fixes its backend at import and the suite runs on TensorFlow, so a backend check
    needs its own process. Each process costs seconds of imports: add a layer's check to the
    one process of tests/layers/test_layers_on_jax.py rather than start another. Fails the
    test, with the process's output, if the script fails.
    """
    env = dict(
        os.environ,
        KERAS_BACKEND="jax",
        JAX_PLATFORMS="cpu",
        PYTHONPATH=REPO_ROOT,
        TF_CPP_MIN_LOG_LEVEL="3",
        # XLA's optimisation passes cost more than they save at test sizes (with them, the
        # checks of tests/layers/test_layers_on_jax.py took 116 s against 94 s here).
        JAX_DISABLE_MOST_OPTIMIZATIONS="1",
        # One thread (besides tests/conftest.py's flags): at test sizes XLA's thread pool costs
        # more than it saves (45 s against 47 s alone here), and it would take the other
        # pytest worker's core. Only a JAX process may have these: TensorFlow's XLA rejects
        # the second flag.
        XLA_FLAGS=os.environ.get("XLA_FLAGS", "")
        + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1",
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=timeout
    )
    assert result.returncode == 0, f"the JAX run failed:\n{result.stdout}\n{result.stderr[-4000:]}"
    return result.stdout


class CrashAtEpoch(keras.callbacks.Callback):
    """Raise ``RuntimeError("simulated crash")`` as epoch ``epoch`` begins: a run to resume."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise RuntimeError("simulated crash")


# A fresh-process script's function (spliced into its text, where zoo and Keras may be blocked):
# `saved_model_cli show --all` run by its module's main(), in that Python.
SAVED_MODEL_CLI_SHOW = """
def saved_model_cli_show(folder):
    import contextlib, io
    from tensorflow.python.tools import saved_model_cli
    sys.argv = ["saved_model_cli", "show", "--all", "--dir", folder]
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        try:
            saved_model_cli.main()
            code = 0
        except SystemExit as stop:
            code = stop.code or 0
    return {"code": code, "stdout": shown.getvalue()}
"""


def serve_without_zoo(script, serving_dir, timeout=300):
    """Run ``script`` (it loads the SavedModel in ``sys.argv[1]``) in a fresh Python that cannot
    import zoo; return its printed ``name | output | ...`` lines as ``{name: "output | ..."}``."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH="")
    result = subprocess.run(
        [sys.executable, "-c", script, serving_dir],
        capture_output=True, text=True, env=env, timeout=timeout, cwd="/",
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return dict(line.split(" | ", 1) for line in result.stdout.splitlines() if " | " in line)


def assert_dog_in_the_snow(lines, names):
    """Each of ``names`` in :func:`serve_without_zoo`'s lines translated "A dog is running in the
    snow." and, for the empty input, gave the empty string."""
    for name in names:
        translation, empty = lines[name].split(" | ")
        assert "Hund" in translation and "Schnee" in translation, translation
        assert empty == ""
