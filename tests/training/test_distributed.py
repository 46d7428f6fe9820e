"""train() under tf.distribute on this CPU, against one device, each run in a fresh Python
(a strategy must be set up before TensorFlow does anything else): MirroredStrategy over two
logical CPU devices, and MultiWorkerMirroredStrategy on two worker processes on loopback."""

import glob
import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import types

import pytest
import tensorflow as tf

from tests.harness import REPO_ROOT
from zoo.artifacts import BACKUP_DIR, MODEL_FILE, SENTENCEPIECE_FILE, TAGGER_VOCABULARY_FILE
from zoo.models.translator import build_translator, get_config
from zoo.training.strategy import check_distributed_options, fit_across_workers, worker_dir

# The tiny translator without dropout (each replica would draw its own masks), on a few pairs,
# at its peak learning rate from the first step, so that the few steps visibly learn; or the tiny
# tagger so (its preset has no dropout in its layers; its word dropout is drawn from each part's batch
# places, as on one device), on a few sentences (of the dev split: the quickest to read).
_TRAIN = textwrap.dedent(
    """
    import dataclasses, functools, json, os, sys
    import keras
    import tensorflow as tf
    from zoo.data import (DataPart, DataPosition, ParallelCorpus, load_multi30k,
                          load_ud_english_ewt)
    from zoo.tasks import get_task
    from zoo.training import train

    class StepLosses(keras.callbacks.Callback):  # over every fit of a run (a resumed one has two)
        def __init__(self):
            super().__init__()
            self.losses = []
        def on_train_batch_end(self, batch, logs=None):
            self.losses.append(float(logs["loss"]))

    def run(workdir, strategy, epochs, callbacks=(), batch_multiple=None, parts=None,
            shards=None, task="translator", shuffle_buffer=100_000, word_dropout=0.0,
            **options):
        task = get_task(task)
        dataset, run.parts = type(task).dataset.__get__(task), []  # not an earlier run's
        if batch_multiple:  # one device, batched as two replicas are (equal shares of each)
            task.dataset = lambda *args, **kw: dataset(*args, **{**kw,
                                                                 "batch_multiple": batch_multiple})
        elif parts:  # one device, each batch the parts' batches of a step side by side
            task.dataset = functools.partial(side_by_side, dataset, parts)
        else:  # the part of the training data that each call asks for, recorded
            def recorded(config, vocabulary, data, training, jit_compile=False,
                         batch_multiple=1, epoch=None, counts=None, part=None):
                if training:
                    run.parts.append(part)
                return dataset(config, vocabulary, data, training, jit_compile, batch_multiple,
                               epoch, counts, part)
            task.dataset = recorded
        steps = StepLosses()
        if task.name == "tagger":
            config = task.get_config("tiny", epochs=epochs, warmup_steps=1,
                                     word_dropout=word_dropout, use_crf=False)  # softmax: quicker to trace than a CRF
            sentences = load_ud_english_ewt("dev")
            data, validation = sentences[:60], sentences[60:68]
        else:
            config = task.get_config("tiny", vocab_size=400, max_length=24,
                                     long_pairs="truncate", epochs=epochs, batch_tokens=512,
                                     warmup_steps=1, dropout=0.0, attention_dropout=0.0,
                                     activation_dropout=0.0, shuffle_buffer=shuffle_buffer)
            options = {"bleu_sample_size": 0, **options}
            data, validation = load_multi30k("train")[:160], load_multi30k("val")[:16]
        if shards:  # the pairs in files of as many shards, streamed (each worker's by file)
            for shard in range(shards):
                for side, language in enumerate(("en", "de")):
                    path = f"{workdir}-train.{shard}.{language}"  # both workers write it
                    with open(f"{path}.{os.getpid()}", "w") as f:
                        f.writelines(pair[side] + "\\n" for pair in data[shard::shards])
                    os.replace(f"{path}.{os.getpid()}", path)
            data = ParallelCorpus([(f"{workdir}-train.*.en", f"{workdir}-train.*.de")])
        model, history, _ = train(task, config, workdir, strategy=strategy, train_data=data,
                                  validation_data=validation, verbose=0,
                                  callbacks=[steps, *callbacks], **options)
        run.model, run.history = model, history
        # The batches of each epoch of this worker's part (the part read at its epoch), and
        # the tagger's sentences (their word ids, no word dropped) of the first.
        vocabulary, run.batches, run.sentences = task.load_vocabulary(workdir), [], None
        if task.name == "tagger":
            config = dataclasses.replace(config, word_dropout=0.0)
        for epoch in range(epochs):
            part = run.parts[0] if run.parts else None
            position = DataPosition()  # as train() makes the epoch (window by window)
            position.set(epoch)
            batches = list(dataset(config, vocabulary, data, True, epoch=position, part=part))
            run.batches.append(len(batches))
            if epoch == 0 and task.name == "tagger":
                run.sentences = sorted([int(i) for i in words[words != 0]]
                                       for features, _ in batches
                                       for words in features["words"].numpy())
        return steps.losses

    def side_by_side(dataset, count, config, vocabulary, data, training, epoch=None, part=None,
                     **kw):
        # The batches of count parts, step by step, as one batch (padded to the longer):
        # what count replicas take at a step, on one device, while every part has data.
        if not training:
            return dataset(config, vocabulary, data, training, epoch=epoch, **kw)
        parts = [dataset(config, vocabulary, data, training, epoch=epoch,
                         part=DataPart(i, count, count), **kw) for i in range(count)]
        def joined(*batches):
            def join(*tensors):  # padded along the time axis (the tagger's characters too)
                width = tf.reduce_max(tf.stack([tf.shape(t)[1] for t in tensors]))
                return tf.concat([tf.pad(t, [[0, 0], [0, width - tf.shape(t)[1]]]
                                         + [[0, 0]] * (t.shape.rank - 2)) for t in tensors], 0)
            return tf.nest.map_structure(join, *batches)
        return tf.data.Dataset.zip(tuple(parts)).map(joined)
    """
)

# One process of a run (a worker of a cluster, or one device): argv = workdir, strategy, and the
# train() options as JSON, with "epochs", and "pause_at" and "marker": after that many batches
# it creates the file marker.PID and waits to be killed. It prints the loss after each batch,
# the optimizer's steps and a digest of the weights.
_RUN = _TRAIN + textwrap.dedent(
    """
    import hashlib, os, time

    class PauseAtBatch(keras.callbacks.Callback):
        def __init__(self, batches, marker):
            super().__init__()
            self.batches, self.marker, self.seen = batches, marker, 0
        def on_train_batch_end(self, batch, logs=None):
            self.seen += 1
            if self.seen == self.batches and os.environ.get("ZOO_TEST_PAUSE", "1") == "1":
                open(f"{self.marker}.{os.getpid()}", "w").close()
                time.sleep(600)

    # TensorFlow checks its peers' health every 30 s: every second here, so that a killed
    # worker is seen at once.
    from tensorflow.python.distribute import collective_all_reduce_strategy
    collective_all_reduce_strategy.CollectiveAllReduceExtended._check_health_interval = 1

    options = json.loads(sys.argv[3])
    epochs, pause = options.pop("epochs"), PauseAtBatch(options.pop("pause_at", None),
                                                        options.pop("marker", None))
    keras.utils.set_random_seed(0)
    losses = run(sys.argv[1], sys.argv[2], epochs, [pause], **options)
    weights = b"".join(w.tobytes() for w in run.model.get_weights())
    print(json.dumps({"losses": losses, "steps": int(run.model.optimizer.iterations.numpy()),
                      "weights": hashlib.sha1(weights).hexdigest(),
                      "history": run.history.history, "batches": run.batches,
                      "sentences": run.sentences,
                      "parts": [list(part) if part else None for part in run.parts]}))
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
            curves[strategy] = run(sys.argv[1] + "/" + strategy, strategy, epochs=1,
                                   batch_multiple=2 if strategy == "one_device" else None)
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


# ---------------------------------------------------------------- multi_worker
def _free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _workers(workdir, options, count=2, timeout=300, kill_after=None, pausing=None):
    """Run ``_RUN`` on a cluster of ``count`` worker processes on loopback; all are killed if
    any is still running after ``timeout`` seconds, or (``kill_after``) once every one has
    trained that many batches. Returns each one's (status, JSON or None, stderr)."""
    cluster = {"worker": [f"127.0.0.1:{_free_port()}" for _ in range(count)]}
    marker = f"{workdir}-paused"
    if kill_after:
        options = {**options, "pause_at": kill_after, "marker": marker}
    processes = []
    for index in range(count):
        task = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        pause = "1" if pausing is None or index in pausing else "0"
        env = dict(os.environ, TF_CONFIG=json.dumps(task), ZOO_TEST_PAUSE=pause)
        processes.append(_python(_RUN, str(workdir), "multi_worker", json.dumps(options), env=env))
    if kill_after:  # each waits at that batch (its peers' next all-reduce waits on it)
        deadline = time.monotonic() + timeout
        paused = count if pausing is None else len(pausing)
        while len(glob.glob(marker + ".*")) < paused and time.monotonic() < deadline:
            if any(process.poll() is not None for process in processes):
                break  # one of them ended before the batch: its status says why
            time.sleep(0.5)
        for index, process in enumerate(processes):
            if pausing is None or index in pausing:
                process.kill()
    results = []
    try:
        for process in processes:
            out, err = process.communicate(timeout=timeout)
            lines = out.splitlines()
            results.append((process.returncode, json.loads(lines[-1]) if lines else None, err))
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the workers did not finish in {timeout} s")
    finally:
        for process in processes:
            process.kill()
            process.wait()
    return results


def _finished(results):
    for status, _, err in results:
        assert status == 0, err[-3000:]
    return [result for _, result, _ in results]


def test_two_tagger_workers_each_read_their_own_sentences_train_as_one_device_and_resume_exactly(
        tmp_path):
    # train() under multi_worker against one device, on the tagger; the translators' parts are
    # tests/data/test_translation_pipeline.py's, and the NAT's two workers run in the test
    # below (the translator's are those parts, and one device's exact resume, together).
    # With word dropout, whose draws are each part's own (its batches' places): one device,
    # reading the parts side by side, draws them too.
    options = {"epochs": 1, "task": "tagger", "word_dropout": 0.25, "backup_every": 3}
    # One device, each batch the two parts' batches of a step side by side, run meanwhile; and
    # a cluster killed at its 5th batch (a backup after the 3rd).
    one = _python(_RUN, str(tmp_path / "alone"), "auto", json.dumps({**options, "parts": 2}))
    workdir, killed = tmp_path / "cluster", tmp_path / "killed"
    chief, worker = _finished(_workers(workdir, options))
    assert [status for status, _, _ in _workers(killed, options, kill_after=5)] == [-9, -9]
    one = json.loads(_finish(one).splitlines()[-1])
    # Each built its own part, in batches of a replica's half of the word budget: disjoint
    # sentences, together the epoch's (which one device reads whole).
    assert chief["parts"] == [[0, 2, 2]] and worker["parts"] == [[1, 2, 2]]
    assert abs(len(chief["sentences"]) - len(worker["sentences"])) <= 1
    assert sorted(chief["sentences"] + worker["sentences"]) == one["sentences"]
    longer, shorter = max(chief["batches"][0], worker["batches"][0]), min(
        chief["batches"][0], worker["batches"][0])  # fmt: skip
    # The epoch ends with the longer part: the other's replica gets empty batches meanwhile.
    assert len(chief["losses"]) == len(worker["losses"]) == longer >= 6 and longer > shorter
    assert chief["weights"] == worker["weights"] and chief["losses"] == worker["losses"]
    # The same data, initial weights and updates as one device while both parts have data;
    # each replica's loss is the mean over its own batch, so the curves agree to 2%.
    assert len(one["losses"]) == shorter
    for step, (a, b) in enumerate(zip(one["losses"], chief["losses"][:shorter])):
        assert abs(a - b) <= 0.02 * a, (step, a, b)
    assert chief["losses"][-1] < chief["losses"][0]
    assert sorted(os.listdir(workdir)) == sorted(os.listdir(tmp_path / "alone"))
    assert {MODEL_FILE, TAGGER_VOCABULARY_FILE} <= set(os.listdir(workdir))
    assert not os.path.exists(worker_dir(workdir, "worker", 1))
    # The killed cluster, run again with the same command: each worker resumes its own part
    # from its backup (the batches done made again and dropped, their word dropout drawn
    # again) to the never-killed cluster's weights, with its steps.
    for folder in (killed, worker_dir(killed, "worker", 1)):
        with open(os.path.join(folder, BACKUP_DIR, "training_metadata.json")) as f:
            assert json.load(f)["batches"] == 3, folder
    for result in _finished(_workers(killed, options)):
        assert result["weights"] == chief["weights"]
        assert len(result["losses"]) == longer - 3 and result["steps"] == chief["steps"]


def test_a_worker_whose_peer_dies_stops_and_both_resume_exactly_with_the_same_command(
        tmp_path):
    workdir = tmp_path / "cluster"
    # The NAT, whose CMLM masks are drawn in each worker's pipeline (the translator's pipeline
    # and more), with mixed precision and the BLEU validation of every epoch. The pairs in two
    # files, streamed: each worker reads one of them, in windows of 16 pairs.
    options = {"epochs": 1, "task": "nat", "backup_every": 3, "mixed_precision": True,
               "bleu_sample_size": 4, "shards": 2, "shuffle_buffer": 16}  # fmt: skip
    # A cluster never killed, and one whose worker 1 is killed at its 5th batch: the chief
    # stops, naming it, and keeps the backup.
    never = _finished(_workers(tmp_path / "never", options))
    chief, worker = _workers(workdir, options, kill_after=5, pausing=(1,))
    assert worker[0] == -9
    status, _, err = chief
    assert status == 1, err[-3000:]
    lost = "ConnectionError: worker 1 of the cluster stopped or cannot be reached"
    assert lost in err, err[-3000:]
    assert f"the backup in {workdir} is as it was" in err
    assert BACKUP_DIR in os.listdir(workdir)
    assert os.path.exists(worker_dir(workdir, "worker", 1))  # its backup, for the rerun
    for folder in (workdir, worker_dir(workdir, "worker", 1)):  # each where its part stood
        with open(os.path.join(folder, BACKUP_DIR, "training_metadata.json")) as f:
            backup = json.load(f)
        assert backup["batches"] == 3 and backup["window"][0] >= 1, (folder, backup)
    chief, worker = _finished(_workers(workdir, options))
    # Both went on from the backup after 3 batches, to the never-killed cluster's weights and
    # steps: as many as the longer part has batches (Keras counts one more at the epoch's end).
    assert chief["parts"] == [[0, 2, 2]] and worker["parts"] == [[1, 2, 2]]
    epochs = [max(a, b) for a, b in zip(chief["batches"], worker["batches"])]
    assert len(chief["losses"]) == len(worker["losses"]) == sum(epochs) - 3
    assert chief["steps"] == worker["steps"] == never[0]["steps"] == sum(epochs) + 1
    assert chief["weights"] == worker["weights"] == never[0]["weights"] == never[1]["weights"]
    assert chief["losses"] == worker["losses"]
    assert not os.path.exists(worker_dir(workdir, "worker", 1))
    assert len(chief["history"]["val_bleu"]) == 1
    assert chief["history"]["val_loss"] == worker["history"]["val_loss"] == never[0][
        "history"]["val_loss"]  # fmt: skip
    assert {MODEL_FILE, SENTENCEPIECE_FILE} <= set(os.listdir(workdir))


def test_the_multi_worker_fix_does_nothing_on_one_device_and_under_mirrored():
    model = build_translator(get_config("tiny", vocab_size=50))
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    for strategy in (tf.distribute.get_strategy(), tf.distribute.MirroredStrategy(["/cpu:0"])):
        assert fit_across_workers(model, strategy) is model
        assert not {"train_step", "test_step", "_maybe_symbolic_build"} & set(vars(model))


def test_what_cannot_run_on_several_replicas_is_refused_before_training():
    two = types.SimpleNamespace(num_replicas_in_sync=2)  # mirrored or multi_worker
    with pytest.raises(ValueError, match="gradient_accumulation_steps=2 does not run under a "
                                         "strategy of 2 replicas.*raise --batch-tokens"):
        check_distributed_options(two, jit_compile=False, accumulation_steps=2)
    with pytest.raises(ValueError, match="--xla does not run under a strategy of several "
                                         "replicas on CPUs"):
        check_distributed_options(two, jit_compile=True, accumulation_steps=1)
    check_distributed_options(two, jit_compile=False, accumulation_steps=1)
    one = tf.distribute.get_strategy()
    check_distributed_options(one, jit_compile=True, accumulation_steps=4)
