"""The package layout is the pipeline: each stage imports only the stages before it.

Read from the source with `ast` (lazy imports inside functions included), so a circle hidden behind
an import at call time fails here as surely as one at the top of a module.
"""

from __future__ import annotations

import ast
import collections
from pathlib import Path

import thesisgym

ROOT = Path(thesisgym.__file__).parent

# data -> dataset -> rewards -> tools -> teachers -> train -> evaluate -> experiments -> integrations -> cli, with the
# shared vocabulary (schema, progress display, thesis format, LLM client) below them all.
STAGES = [
    "schema",
    "progress",
    "<root>",
    "thesis",
    "llm",
    "data",
    "dataset",
    "rewards",
    "consistency",
    "tools",
    "teachers",
    "train",
    "evaluate",
    "experiments",
    "integrations",
    "cli",
]


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        name = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports() -> dict[str, set[tuple[str, tuple[str, ...]]]]:
    """module -> {(imported module, names imported from it)} over every import statement."""
    mods = _modules()
    edges: dict[str, set] = collections.defaultdict(set)
    for name, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("thesisgym"):
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    edges[name].add((sub, ()) if sub in mods else (node.module, (alias.name,)))
            elif isinstance(node, ast.Import):
                edges[name].update((a.name, ()) for a in node.names if a.name.startswith("thesisgym"))
    return edges


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def test_every_package_is_a_known_stage():
    stages = {_stage(m) for m in _modules()}
    assert stages <= set(STAGES), f"new top-level modules need a place in the pipeline: {stages - set(STAGES)}"


def test_stages_import_only_earlier_stages():
    order = {s: i for i, s in enumerate(STAGES)}
    bad = sorted(
        f"{src} imports {dst}"
        for src, targets in _imports().items()
        for dst, _ in targets
        if order[_stage(dst)] > order[_stage(src)]
    )
    assert not bad, "imports against the pipeline order:\n" + "\n".join(bad)


def test_no_import_circles_between_modules():
    mods = _modules()
    graph = {m: {d for d, _ in targets if d in mods and d != m} for m, targets in _imports().items()}
    seen: dict[str, int] = {}  # 1 = on the stack, 2 = done
    cycles = []

    def visit(node: str, stack: list[str]) -> None:
        seen[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if seen.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in seen:
                visit(nxt, [*stack, nxt])
        seen[node] = 2

    for m in sorted(mods):
        if m not in seen:
            visit(m, [m])
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_private_names_imported_across_modules():
    bad = sorted(
        f"{src} imports {dst}.{n}"
        for src, targets in _imports().items()
        for dst, names in targets
        for n in names
        if n.startswith("_") and not n.startswith("__")
    )
    assert not bad, "private names used from another module:\n" + "\n".join(bad)


def test_nothing_below_the_cli_imports_it():
    bad = sorted(
        f"{src} imports {dst}"
        for src, targets in _imports().items()
        for dst, _ in targets
        if _stage(dst) == "cli" and _stage(src) != "cli"
    )
    assert not bad, bad
