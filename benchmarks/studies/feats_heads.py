"""The FEATS head two ways: each whole bundle one class, or one classifier per feature.

UDPipe 2 and UDify predict a word's features as one class, its whole bundle
(``Case=Nom|Gender=Fem|Number=Sing``); Stanza has one classifier per feature, each choosing a
value or "absent", so that a bundle never seen in training can still be predicted. Both rows
train the ``small`` tagger with every head (UPOS, XPOS, FEATS, lemma) on the same treebank for
the same epochs, through ``zoo.training.train``; only the FEATS head differs:

- bundle: ``zoo.models.build_tagger``'s ``feats_logits`` over the training bundles, as
  ``zoo train tagger --feats`` trains it;
- per feature: one softmax per feature that training has (its values and "absent"), the sum of
  their cross entropies as the FEATS loss, the bundle read back as the features whose choice is
  not "absent", in UD order (sorted by name).

After every epoch each row tags the dev file and logs its UFeats (the CoNLL 2018 figure:
universal features only, ``zoo.evaluation.conll18``) beside AllTags. The table gives each
row's best dev UFeats and AllTags over the epochs and the epoch of each: the test file is never
read. zoo keeps the FEATS head that wins here.

    python benchmarks/studies/feats_heads.py --train T.conllu --valid D.conllu [--epochs 30]
        [--workdir workdirs/feats-heads] [--only bundle|per-feature]
"""

import argparse
import json
import os
import sys

# benchmarks/: common.py
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from zoo_cli import quiet_native_logs  # noqa: E402

quiet_native_logs()  # before TensorFlow: none of its C++ start-up lines

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from keras import ops  # noqa: E402

import common  # noqa: E402  (benchmarks/common.py)
from zoo.data import TaggerVocabulary, Treebank  # noqa: E402
from zoo.evaluation.conll18 import universal_features  # noqa: E402
from zoo.layers import CRFAccuracy, CRFLoss  # noqa: E402
from zoo.models.tagger import Tagger, TaggerBackbone, build_tagger  # noqa: E402
from zoo.tasks.tagging import TaggingTask  # noqa: E402
from zoo.tasks.tagging.validation import alltags_accuracy  # noqa: E402
from zoo.training import train  # noqa: E402
from zoo.training.losses import MaskedSparseCrossEntropy  # noqa: E402
from zoo.training.metrics import MaskedAccuracy  # noqa: E402
from zoo.training.optimizer import make_optimizer  # noqa: E402

TITLE = "FEATS head: whole bundles against one classifier per feature (dev)"
ROWS = ("bundle", "per-feature")


def feature_groups(bundles):
    """``[(feature, values)]`` of the features in ``bundles``, sorted; a value index of
    ``len(values)`` means absent."""
    values = {}
    for bundle in bundles:
        for pair in bundle.split("|") if bundle != "_" else ():
            name, value = pair.split("=", 1)
            values.setdefault(name, set()).add(value)
    return [(name, sorted(values[name])) for name in sorted(values, key=str.lower)]


def bundle_matrix(bundles, groups):
    """``(bundles, G)`` int32: each bundle's choice per feature."""
    matrix = np.zeros((len(bundles), len(groups)), "int32")
    for b, bundle in enumerate(bundles):
        pairs = dict(p.split("=", 1) for p in bundle.split("|")) if bundle != "_" else {}
        for g, (name, values) in enumerate(groups):
            matrix[b, g] = values.index(pairs[name]) if name in pairs else len(values)
    return matrix


class GroupedCrossEntropy(keras.losses.Loss):
    """The sum over features of the cross entropy of each feature's choice; labels ``(B, T,
    G)``, logits ``(B, T, sum of sizes)``; a label < 0 (a bundle unseen in training) adds 0."""

    def __init__(self, sizes, name="grouped_cross_entropy"):
        super().__init__(name=name)
        self.sizes = list(sizes)

    def call(self, y_true, y_pred):
        y_true = ops.cast(y_true, "int32")
        total, start = 0.0, 0
        for g, size in enumerate(self.sizes):
            labels = y_true[..., g]
            logits = ops.cast(y_pred[..., start : start + size], "float32")
            loss = keras.losses.sparse_categorical_crossentropy(
                ops.maximum(labels, 0), logits, from_logits=True)
            total = total + ops.where(labels >= 0, loss, 0.0)
            start += size
        return total


class BundleTagging(TaggingTask):
    """The tagging task, with the dev figures of :class:`DevFigures` in its epoch logs (its
    AllTags keeps the best epoch, as ``val_alltags`` does in zoo)."""

    def metric_callbacks(self, config, vocabulary, validation_data):
        return [DevFigures(self, vocabulary, validation_data)]

    def best_metric(self, config):
        return "val_alltags_dev"


class PerFeatureTagging(BundleTagging):
    """The tagging task with a FEATS head of one softmax per feature."""

    def __init__(self, groups, bundles):
        self.groups = groups
        self.sizes = [len(values) + 1 for _, values in groups]
        self.matrix = tf.constant(bundle_matrix(bundles, groups))

    def build_model(self, config):
        base = build_tagger(config)
        x = base.get_layer("encoder_norm").output
        outputs = dict(base.output)
        outputs["feats"] = keras.layers.Dense(sum(self.sizes), name="feats_per_feature")(x)
        model = keras.Model(base.input, outputs, name="tagger")
        model.base = base  # its tagger's backbone, whose layers it shares
        return model

    def inference_model(self, model, config, vocabulary):
        return model  # a study's model: its file is not zoo's Tagger

    def dataset(self, config, vocabulary, data, training, **options):
        def per_feature(features, labels):
            ids = labels["feats"]  # bundle ids, -1 for a bundle unseen in training
            choices = tf.gather(self.matrix, tf.maximum(ids, 0))  # (B, T, G)
            choices = tf.where(ids[..., tf.newaxis] < 0, -1, choices)
            return features, {**labels, "feats": choices}

        return super().dataset(config, vocabulary, data, training, **options).map(per_feature)

    def compile_model(self, model, config, jit_compile=False):
        losses, metrics = {}, {}
        for head in config.heads:
            if head == "feats":
                losses[head], metrics[head] = GroupedCrossEntropy(self.sizes), []
            elif config.head_uses_crf(head):
                losses[head], metrics[head] = CRFLoss(), [CRFAccuracy(name="accuracy")]
            else:
                losses[head] = MaskedSparseCrossEntropy(label_smoothing=config.label_smoothing,
                                                        pad_id=-1)
                metrics[head] = [MaskedAccuracy(name="accuracy")]
        model.compile(optimizer=make_optimizer(config), loss=losses, metrics=metrics,
                      jit_compile=jit_compile)
        return model

    def decode_feats(self, logits):
        """The bundle of each word from its ``(S,)`` logits."""
        bundles, start = [], 0
        choices = []
        for size in self.sizes:
            choices.append(np.argmax(logits[..., start : start + size], axis=-1))
            start += size
        for word in zip(*choices):
            pairs = [f"{name}={values[c]}" for (name, values), c in zip(self.groups, word)
                     if c < len(values)]
            bundles.append("|".join(pairs) or "_")
        return bundles


def ufeats(sentences, predicted):
    right = total = 0
    for sentence, bundles in zip(sentences, predicted):
        for gold, guess in zip(sentence.feats, bundles):
            total += 1
            right += universal_features(gold) == universal_features(guess)
    return 100.0 * right / total


class DevFigures(keras.callbacks.Callback):
    """Log ``val_ufeats`` and ``val_alltags_dev`` after each epoch (the averaged weights)."""

    def __init__(self, task, vocabulary, sentences):
        super().__init__()
        self.task, self.vocabulary, self.sentences = task, vocabulary, sentences

    def on_epoch_end(self, epoch, logs=None):
        words = [list(s.words) for s in self.sentences]
        if isinstance(self.task, PerFeatureTagging):
            predicted = self._per_feature(words)
        else:
            predicted = self._tagger(self.model).tag_columns(words)
        logs["val_ufeats"] = ufeats(self.sentences, predicted["feats"])
        logs["val_alltags_dev"] = alltags_accuracy(self.sentences, predicted)

    def _tagger(self, backbone):
        return Tagger.from_backbone(backbone, self.vocabulary, copy=False)

    def _per_feature(self, words):
        # tag_columns for the other heads (a tagger of the same layers with a bundle head of
        # one class); the FEATS head read here (sentences fit one window).
        model, vocabulary = self.model, self.vocabulary
        config = {**model.base.get_config(), "num_feats_tags": 0}
        others = TaggerBackbone.from_config(config)
        for layer in others.layers:
            if layer.weights:
                layer.set_weights(model.base.get_layer(layer.name).get_weights())
        predicted = self._tagger(others).tag_columns(words)
        tagger, feats = self._tagger(model.base), []
        for start in range(0, len(words), 64):
            batch = words[start : start + 64]
            flat = tf.constant([w for sentence in batch for w in sentence])
            inputs, _, _ = tagger.preprocessor.windows(
                tf.RaggedTensor.from_row_lengths(flat, [len(s) for s in batch]))
            logits = np.asarray(model(inputs, training=False)["feats"])
            for row, sentence in zip(logits, batch):
                feats.append(self.task.decode_feats(row[: len(sentence)]))
        predicted["feats"] = feats
        return predicted


def run_row(name, args):
    workdir = os.path.join(args.workdir, name)
    result_path = os.path.join(workdir, "feats_heads.json")
    if os.path.exists(result_path):
        with open(result_path) as f:
            return json.load(f)
    train_data = Treebank([args.train], flag="--train")
    dev = Treebank([args.valid], flag="--valid").sentences
    if max(len(s.words) for s in dev) > 256:
        raise SystemExit("a dev sentence is longer than the model's 256 positions")
    config = TaggingTask().get_config("small", epochs=args.epochs, num_xpos_tags=1,
                                      num_feats_tags=1, num_lemma_scripts=1)  # fmt: skip
    if name == "bundle":
        task = BundleTagging()
    else:
        bundles = TaggerVocabulary.build(train_data, feats=True).feats_tags
        task = PerFeatureTagging(feature_groups(bundles), bundles)
    seconds = common.train_clocked(task, config, workdir, train_data=train_data,
                                   validation_data=dev, jit_compile=False)
    history = {}
    with open(os.path.join(workdir, "history.csv")) as f:
        names = f.readline().strip().split(",")
        for line in f:
            for key, value in zip(names, line.strip().split(",")):
                history.setdefault(key, []).append(float(value))
    best = {figure: (max(history[key]), int(np.argmax(history[key])) + 1)
            for figure, key in (("UFeats", "val_ufeats"), ("AllTags", "val_alltags_dev"))}
    result = {"name": name, "epochs": args.epochs, "minutes": round(seconds / 60, 1),
              "best": best}  # fmt: skip
    with open(result_path, "w") as f:
        json.dump(result, f)
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--train", required=True)
    parser.add_argument("--valid", required=True)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--workdir", default=os.path.join("workdirs", "feats-heads"))
    parser.add_argument("--only", choices=ROWS)
    args = parser.parse_args()
    results = [run_row(name, args) for name in ROWS if args.only in (None, name)]
    rows = [[r["name"], r["epochs"], r["minutes"],
             f"{r['best']['UFeats'][0]:.2f} (epoch {r['best']['UFeats'][1]})",
             f"{r['best']['AllTags'][0]:.2f} (epoch {r['best']['AllTags'][1]})"]
            for r in results]  # fmt: skip
    header = ["FEATS head", "epochs", "train minutes", "best dev UFeats", "best dev AllTags"]
    notes = [f"train {os.path.basename(args.train)}, dev {os.path.basename(args.valid)}; the "
             "small preset with every head (UPOS and XPOS with a CRF), no XLA; the averaged "
             "weights of each epoch; test is not read"]  # fmt: skip
    command = (f"python benchmarks/studies/feats_heads.py --train {os.path.basename(args.train)} "
               f"--valid {os.path.basename(args.valid)} --epochs {args.epochs}")
    common.publish_table(TITLE, command, header, rows, notes)
    for row in rows:
        print(" | ".join(map(str, row)))


if __name__ == "__main__":
    main()
