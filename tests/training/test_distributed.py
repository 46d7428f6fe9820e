"""train() under tf.distribute on this CPU: MirroredStrategy over two logical CPU devices
against one device, in a fresh Python (the logical devices must be configured before
TensorFlow does anything else)."""

import json
import os
import subprocess
import sys
import textwrap

from tests.harness import REPO_ROOT

# The tiny translator without dropout (each replica would draw its own masks), on a few pairs,
# at its peak learning rate from the first step, so that the few steps visibly learn.
_TRAIN = textwrap.dedent(
    """
    import json, sys
    import keras
    from zoo.data import load_multi30k
    from zoo.tasks import get_task
    from zoo.training import train

    class StepLosses(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.losses = []
        def on_train_batch_end(self, batch, logs=None):
            self.losses.append(float(logs["loss"]))

    def run(workdir, strategy, epochs):
        task = get_task("translator")
        config = task.get_config("tiny", vocab_size=400, max_length=24, epochs=epochs,
                                 batch_tokens=512, warmup_steps=1, dropout=0.0,
                                 attention_dropout=0.0, activation_dropout=0.0)
        steps = StepLosses()
        train(task, config, workdir, strategy=strategy, train_data=load_multi30k("train")[:160],
              validation_data=load_multi30k("val")[:16], verbose=0, bleu_sample_size=0,
              callbacks=[steps])
        return steps.losses
    """
)


def _python(script, *args, env=None, timeout=300):
    env = dict(os.environ if env is None else env, PYTHONPATH=REPO_ROOT, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.Popen([sys.executable, "-c", script, *args], env=env, cwd=REPO_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip


def _finish(process, timeout=300):
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"no result in {timeout} s")
    assert process.returncode == 0, err[-3000:]
    return out


def test_mirrored_over_two_devices_follows_one_device_on_the_same_global_batch(tmp_path):
    script = "import tensorflow as tf\n" + textwrap.dedent(
        """
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        """
    ) + _TRAIN + textwrap.dedent(
        """
        from zoo.training.strategy import get_strategy
        assert get_strategy("mirrored").num_replicas_in_sync == 2
        curves = {}
        for strategy in ("one_device", "mirrored"):
            keras.utils.set_random_seed(0)
            curves[strategy] = run(sys.argv[1] + "/" + strategy, strategy, epochs=1)
        print(json.dumps(curves))
        """
    )
    curves = json.loads(_finish(_python(script, str(tmp_path))).splitlines()[-1])
    one, mirrored = curves["one_device"], curves["mirrored"]
    assert len(one) == len(mirrored) >= 6
    # The same data, initial weights and updates; each replica takes its mean over its own
    # half of a batch's tokens, and the update averages the two, which weighs the tokens a
    # little differently from one mean over the whole batch. So the curves agree to 2%.
    for step, (a, b) in enumerate(zip(one, mirrored)):
        assert abs(a - b) <= 0.02 * a, (step, a, b)
    assert mirrored[-1] < mirrored[0]
