"""The package's import graph, from its own source: which module imports which, and the same
graph between folders (a folder of workflow/convlab is one role). Standard library only.

    python tests/importgraph.py     prints the figures: modules, folders, floors, arrows, back arrows, circles
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "workflow" / "convlab"

# The roles, lowest first: a folder may import the ones below it and its own floor, never one
# above. The package's top-level modules are the ground floor (standard library only).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("status", "atomicfile", "codeversion", "paths", "console", "savedfiles", "machinefaults"),
    ("problem", "pictures"),
    ("measure",),
    ("plan",),
    ("backends", "history"),
    ("run",),
    ("pairs",),
    ("report", "bench"),
    ("service",),
    ("app", "snakefile"),
    ("__main__", "__init__"),
)


@dataclass
class Graph:
    modules: dict[str, Path]
    arrows: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    in_functions: list[tuple[str, str]] = field(default_factory=list)
    type_only: list[tuple[str, str]] = field(default_factory=list)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(module: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The package's modules that one import statement names."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = module.split(".")
        if node.level:
            package = base if modules[module].name == "__init__.py" else base[:-1]
            base_name = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        else:
            base_name = node.module or ""
        names = [f"{base_name}.{alias.name}" if f"{base_name}.{alias.name}" in modules else base_name
                 for alias in node.names]
    found = []
    for name in names:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.append(name)
    return found


def build(package: Path = PACKAGE) -> Graph:
    graph = Graph({module_name(path, package): path for path in package.rglob("*.py")})
    for module, path in graph.modules.items():
        tree = ast.parse(path.read_text())
        type_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                     and "TYPE_CHECKING" in ast.unparse(block.test) for n in ast.walk(block)}
        in_function = {id(n) for fn in ast.walk(tree) if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                       for n in ast.walk(fn)}
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for target in imported(module, node, graph.modules):
                if id(node) in type_only:
                    graph.type_only.append((module, target))
                    continue
                graph.arrows[module].add(target)
                if id(node) in in_function:
                    graph.in_functions.append((module, target))
    return graph


def circles(nodes: list[str], arrows: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(arrows.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            step = next(targets, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(arrows.get(step, ())))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def room(module: str) -> str:
    """The folder (or top-level module) a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def room_arrows(graph: Graph) -> dict[str, set[str]]:
    arrows: dict[str, set[str]] = defaultdict(set)
    for source, targets in graph.arrows.items():
        for target in targets:
            if room(source) != room(target) and room(target) != "__init__":
                arrows[room(source)].add(room(target))
    return arrows


def floor_of(name: str) -> int:
    for floor, names in enumerate(LAYERS):
        if name in names:
            return floor
    raise KeyError(f"{name} has no floor in LAYERS")


def back_arrows(arrows: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Arrows from a folder to one on a higher floor."""
    return sorted((a, b) for a, targets in arrows.items() for b in targets if floor_of(b) > floor_of(a))


def floors(arrows: dict[str, set[str]], rooms: list[str]) -> int:
    """How many floors the folders need when each stands above everything it imports."""
    height: dict[str, int] = {}

    def level(name: str, seen: frozenset[str] = frozenset()) -> int:
        if name not in height:
            below = [level(t, seen | {name}) for t in arrows.get(name, ()) if t not in seen]
            height[name] = 1 + max(below, default=0)
        return height[name]

    return max((level(r) for r in rooms), default=0)


def main(package: Path = PACKAGE) -> int:
    graph = build(package)
    rooms = sorted({room(m) for m in graph.modules})
    arrows = room_arrows(graph)
    print(f"modules {len(graph.modules)}; arrows {sum(map(len, graph.arrows.values()))}; "
          f"module circles {len(circles(sorted(graph.modules), graph.arrows))}; "
          f"imports inside functions {len(graph.in_functions)}; TYPE_CHECKING imports {len(graph.type_only)}")
    known = all(any(r in names for names in LAYERS) for r in rooms)
    back = len(back_arrows(arrows)) if known else "n/a (rooms outside LAYERS)"
    print(f"folders and top-level modules (rooms) {len(rooms)}; floors {floors(arrows, rooms)}; "
          f"arrows {sum(map(len, arrows.values()))}; back arrows {back}; circles {len(circles(rooms, arrows))}")
    for source in sorted(arrows):
        print(f"  {source} -> {', '.join(sorted(arrows[source]))}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else PACKAGE))
