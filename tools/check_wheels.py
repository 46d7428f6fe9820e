"""Do binary wheels exist for zoo's whole pinned dependency set on every Python it admits?

For each Python version that ``requires-python`` (pyproject.toml) admits, and for the next one
above, pip resolves zoo with all its extras under ``constraints.txt`` as if installing on that
Python (``--python-version``), from binary wheels only, without installing anything. An admitted
version that does not resolve fails the check, naming the package that has no wheel; the
version above is only reported, with what holds it back. It needs the package registry.

    python tools/check_wheels.py [--constraints constraints.txt]
"""

import argparse
import glob
import os
import re
import subprocess
import sys
import tempfile
import tomllib

from packaging.specifiers import SpecifierSet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANDIDATES = [f"3.{minor}" for minor in range(8, 20)]


def admitted_versions():
    """The Python versions of CANDIDATES that pyproject.toml's requires-python admits."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        spec = SpecifierSet(tomllib.load(f)["project"]["requires-python"])
    return [version for version in CANDIDATES if spec.contains(version + ".0")]


def build_wheel(folder):
    """zoo's own wheel (pure Python, one for every version), built into ``folder``."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", folder, ROOT],
        check=True,
    )
    [wheel] = glob.glob(os.path.join(folder, "keras_zoo-*.whl"))
    return wheel


def resolve(wheel, python_version, constraints):
    """None if the pinned set resolves from wheels on ``python_version``, else what is missing."""
    with tempfile.TemporaryDirectory() as target:
        result = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
             "--disable-pip-version-check", "--only-binary=:all:",
             "--python-version", python_version, "--target", target,
             "-c", constraints, f"{wheel}[test,bench]"],
            capture_output=True, text=True,
        )  # fmt: skip
    if result.returncode == 0:
        return None
    # pip names the package either way: no candidate at all, or none that meets its pin (that
    # explanation goes to stdout).
    output = result.stdout + result.stderr
    missing = re.findall(r"No matching distribution found for (\S+)", output)
    missing += re.findall(r"The user requested \(constraint\) (\S+)", output)
    if missing:
        return "no wheel of " + ", ".join(missing)
    lines = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    return (lines or result.stderr.strip().splitlines() or ["pip failed"])[-1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--constraints", default=os.path.join(ROOT, "constraints.txt"))
    args = parser.parse_args(argv)
    admitted = admitted_versions()
    above = CANDIDATES[CANDIDATES.index(admitted[-1]) + 1]
    failed = []
    with tempfile.TemporaryDirectory() as folder:
        wheel = build_wheel(folder)
        for version in admitted + [above]:
            problem = resolve(wheel, version, args.constraints)
            verdict = "resolves from wheels" if problem is None else problem
            kind = "admitted" if version in admitted else "not admitted"
            print(f"Python {version} ({kind}): {verdict}", flush=True)
            if problem is not None and version in admitted:
                failed.append(version)
    if failed:
        print(f"requires-python admits {', '.join(failed)}, where the pinned set has no wheels")
        return 1
    print(f"every admitted Python ({', '.join(admitted)}) resolves {args.constraints} from wheels")
    return 0


if __name__ == "__main__":
    sys.exit(main())
