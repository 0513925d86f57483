"""Print a pip constraints file that pins every core dependency of pyproject.toml at its floor.

Used by .ci/run's minimum-versions step: `name>=X` becomes `name==X`, so the smoke tests run on the
oldest releases the project claims to support, while everything those pull in resolves as a user's
install would today. A core dependency without a `>=` floor is an error (nothing to check).

Pins that cannot follow the floor are given on the command line, e.g. `--pin torch==2.13.0` (only the
CPU wheel on disk can be installed on a CI machine).

Runs on the Python floor of pyproject.toml (requires-python >= 3.11, the first with `tomllib`).
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from pathlib import Path

FLOOR = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*>=\s*([^,;\s]+)\s*$")

# transformers 5.0-5.2 and huggingface-hub 1.x require `typer-slim`, which before 0.22 ships its own
# copy of the `typer` package: left unpinned, the resolver picks a typer-slim whose files overwrite the
# typer floor being tested. Pin it to the same release.
SAME_AS = {"typer-slim": "typer"}


def constraints(pyproject: Path, pins: list[str]) -> list[str]:
    deps = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"]
    overrides = dict(p.split("==", 1) for p in pins)
    floors: dict[str, str] = {}
    for dep in deps:
        m = FLOOR.match(dep)
        if not m:
            raise SystemExit(f"{pyproject}: dependency {dep!r} has no single `>=` floor to check")
        floors[m.group(1).lower()] = m.group(3)
    for name, source in SAME_AS.items():
        if source in floors:
            floors.setdefault(name, floors[source])
    unknown = sorted(set(overrides) - set(floors))
    if unknown:
        raise SystemExit(f"--pin {unknown}: not a core dependency of {pyproject}")
    floors.update(overrides)
    return [f"{name}=={version}" for name, version in floors.items()]


def check_installed(path: Path) -> None:
    """Print the installed version of each pinned package; exit 1 if one differs from its pin."""
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import Version

    seen, wrong = [], []
    for line in path.read_text(encoding="utf-8").split():
        name, want = line.split("==", 1)
        try:
            got = version(name)
        except PackageNotFoundError:
            got = "missing"
        seen.append(f"{name}=={got}")
        if got == "missing" or Version(got.split("+")[0]) != Version(want):
            wrong.append(f"{name}: pinned {want}, installed {got}")
    print("minimum versions installed: " + " ".join(seen))
    if wrong:
        raise SystemExit("constraints not honoured: " + "; ".join(wrong))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pyproject", type=Path, default=Path(__file__).resolve().parents[1] / "pyproject.toml")
    ap.add_argument("--pin", action="append", default=[], metavar="NAME==VERSION")
    ap.add_argument("--check-installed", type=Path, metavar="FILE",
                    help="instead: check that the running environment holds exactly the pins of FILE")
    args = ap.parse_args(argv)
    if args.check_installed:
        check_installed(args.check_installed)
        return
    bad = [p for p in args.pin if "==" not in p]
    if bad:
        raise SystemExit(f"--pin {bad}: expected NAME==VERSION")
    sys.stdout.write("\n".join(constraints(args.pyproject, args.pin)) + "\n")


if __name__ == "__main__":
    main()
