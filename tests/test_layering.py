"""The house's layering, read from the code's imports (ast), so that the rule outlives the change
that made it: layers <- models <- tasks -> (training, decoding, export, evaluation, data).

Generic code receives what it needs (a task object, a search, a serving function) and never
imports a task or a model; nothing imports back up; no module of zoo/ is in an import cycle,
counting the imports inside functions too (so none can exist to dodge one); and no module is over
500 lines."""

import ast
import pathlib
import sys

import pytest

from tests.harness import REPO_ROOT

ZOO = pathlib.Path(REPO_ROOT) / "zoo"

# What each part of zoo may not import (by the part's first name under zoo).
FORBIDDEN = {
    "layers": {"models", "tasks", "training", "decoding", "export", "evaluation", "data", "cli"},
    "models": {"tasks", "training", "evaluation", "data", "cli"},
    "decoding": {"models", "tasks", "training", "export", "evaluation", "cli"},
    "export": {"models", "tasks", "training", "evaluation", "cli"},
    "training": {"models", "tasks", "decoding", "export", "evaluation", "cli"},
    "evaluation": {"models", "tasks", "training", "decoding", "export", "cli"},
    "data": {"models", "tasks", "training", "decoding", "export", "evaluation", "cli"},
    "tasks": {"cli"},
}
# A model's preprocessor (raw text -> the backbone's inputs, in TensorFlow) lives with the model
# and reads text as the data layer does; the rest of a model stays off it. A task model writes
# its own SavedModel (export_serving) in the generic frame of export/, as generate runs its
# search in the generic frame of decoding/.
ALLOWED = {("preprocessor", "data")}
MAX_LINES = 500


def module_name(path):
    parts = path.relative_to(ZOO.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    return {module_name(path): path for path in sorted(ZOO.rglob("*.py"))}


def imports(path, known, name=None):
    """The zoo modules that the file at ``path`` (the module ``name``, by default the one its
    place under zoo/ names) imports, anywhere in it (functions too)."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            # `from zoo.x import y` imports the module zoo.x.y when there is one.
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]  # fmt: skip
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def graph():
    known = modules()
    return {name: imports(path, known) for name, path in known.items()}


def part(name):
    parts = name.split(".")
    return parts[1] if len(parts) > 1 else ""


def violations(edges):
    return sorted(
        f"{name} imports {target}"
        for name, targets in edges.items()
        for target in targets
        if part(target) in FORBIDDEN.get(part(name), ())
        and (name.rpartition(".")[2], part(target)) not in ALLOWED
    )


def test_no_part_imports_a_part_it_must_not():
    wrong = violations(graph())
    assert not wrong, "\n".join(wrong)


def cycles(edges):
    """Every import cycle, as the list of its modules (Tarjan's strongly connected components)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in edges.get(node, ()):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def all_imports(path):
    """The top-level names of the modules that the file at ``path`` imports when it loads (its
    module-level absolute imports)."""
    found = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            found.add(node.module.split(".")[0])
    return found


def test_nothing_in_zoo_imports_the_root_script():
    # zoo_cli.py reads zoo (its table of tasks); zoo never reads it back.
    wrong = sorted(name for name, path in modules().items() if "zoo_cli" in all_imports(path))
    assert not wrong, wrong


# What the `zoo` command reads before TensorFlow: these import the standard library and each
# other only (zoo_cli.py loads them by their paths, without the package's __init__).
STANDARD_LIBRARY_ONLY = ("zoo.artifacts", "zoo.training.options", "zoo.tasks.table")


@pytest.mark.parametrize("name", STANDARD_LIBRARY_ONLY)
def test_what_the_command_reads_first_imports_the_standard_library_only(name):
    path = modules()[name]  # (artifacts.read_model imports Keras when it is called)
    assert imports(path, modules()) <= set(STANDARD_LIBRARY_ONLY)
    assert all_imports(path) - {"zoo"} <= set(sys.stdlib_module_names)


def test_the_standard_library_check_can_fail(tmp_path):
    fake = tmp_path / "table.py"
    fake.write_text("import json\nfrom zoo.models import presets\n")
    assert imports(fake, modules(), "zoo.tasks.table") == {"zoo.models.presets"}
    fake.write_text("import numpy\n")
    assert all_imports(fake) == {"numpy"}


def test_no_import_cycle():
    assert cycles(graph()) == []


def test_the_cycle_finder_finds_one():
    # The check above can fail: a made-up loop of three modules is found, a chain is not.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}}) == []


def test_the_rules_catch_a_forbidden_import(tmp_path):
    # An import inside a function counts: training reaching for the task loader is caught.
    fake = tmp_path / "bad.py"
    fake.write_text("def f():\n    from zoo.tasks import load\n")
    edges = {"zoo.training.bad": imports(fake, modules(), "zoo.training.bad")}
    assert edges == {"zoo.training.bad": {"zoo.tasks"}}
    assert violations(edges) == ["zoo.training.bad imports zoo.tasks"]


def test_only_a_preprocessor_of_a_model_reads_the_data_layer():
    edges = {"zoo.models.translator.preprocessor": {"zoo.data.utf8"},
             "zoo.models.translator.backbone": {"zoo.data.utf8"}}  # fmt: skip
    assert violations(edges) == ["zoo.models.translator.backbone imports zoo.data.utf8"]


@pytest.mark.parametrize("name", sorted(modules()))
def test_no_module_is_over_500_lines(name):
    lines = len(modules()[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{modules()[name]} has {lines} lines"
