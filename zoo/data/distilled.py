"""Reading a folder of ``zoo distill``: a teacher's translations of the training sources (the
files that ``zoo train --train`` takes, named in its manifest)."""

import json
import os

from zoo.artifacts import DISTILL_MANIFEST_FILE
from zoo.data.multi30k import read_parallel

__all__ = ["read_distilled", "read_manifest"]


def read_distilled(folder):
    """The ``(source, translation)`` pairs of a finished :func:`zoo.tasks.translation.distillation.distill` folder, in corpus order.

    Args:
        folder: the ``workdir`` of :func:`zoo.tasks.translation.distillation.distill`.

    Returns:
        A list of ``(str, str)`` pairs, as :func:`zoo.data.load_multi30k` gives them.

    Raises:
        FileNotFoundError: no such folder, or one of its files missing.
        ValueError: an unfinished distillation, or files whose line counts disagree (with each
            other or with the manifest).

    Example:
        >>> pairs = read_distilled("workdirs/kd")  # doctest: +SKIP
    """
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"{folder}: no such folder; make it with `zoo distill`")
    manifest_path = os.path.join(folder, DISTILL_MANIFEST_FILE)
    if not os.path.exists(manifest_path):
        raise FileNotFoundError(f"{manifest_path}: missing; {folder} is no folder of `zoo distill`")
    manifest = read_manifest(manifest_path)
    if not manifest.get("finished"):
        raise ValueError(
            f"{manifest_path}: the distillation is not finished; rerun `zoo distill` with "
            f"--workdir {folder} to complete it"
        )
    files = manifest.get("files")
    if not (isinstance(files, dict) and all(isinstance(files.get(k), str)
                                            for k in ("source", "target"))):  # fmt: skip
        raise ValueError(f"{manifest_path}: no source and target files named (\"files\")")
    paths = [os.path.join(folder, files[side]) for side in ("source", "target")]
    for path in paths:
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: missing, though {manifest_path} says finished")
    pairs = read_parallel(*paths)  # its error names both files when their line counts differ
    if len(pairs) != manifest.get("sentences"):
        raise ValueError(
            f"{paths[1]} has {len(pairs)} lines, but {manifest_path} says "
            f"{manifest.get('sentences')} sentences"
        )
    return pairs


def read_manifest(path):
    with open(path, encoding="utf-8") as f:
        try:
            manifest = json.load(f)
        except ValueError as error:
            raise ValueError(f"{path} is not a JSON manifest ({error})") from None
    if not isinstance(manifest, dict):
        raise ValueError(f"{path} is not a JSON manifest (an object)")
    return manifest


