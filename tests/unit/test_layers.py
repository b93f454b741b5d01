"""The kit's rooms and layers (docs/kit.md, "Layers"): every import in scripts/visitkit, read with ast
(those inside functions too, relative ones resolved), goes to the module's own room or to a room of
lower rank, never between two rooms of one rank, and no modules import each other round a cycle."""
import ast

import pytest

from visitkit.paths import ROOT

PACKAGE = ROOT / "scripts" / "visitkit"
# The rooms, bottom to top: a module imports from its own room and from rooms of a lower rank only.
RANKS = {
    "base": 0,  # the top-level modules in BASE
    "model": 1,  # the capacity and cost model, the fleet's sizing
    "twin": 2, "cloud": 2,  # the two places a system runs: peers, neither imports the other
    "results": 3,  # a results folder's records: runs write them, reports read them
    "benchmarks": 4, "rehearsal": 4,  # the cloud run rehearsed on the twin: above both, peer of the benchmarks
    "runs": 5,
    "reports": 6,
    "studies": 7,  # a whole study: its plan, its runs through the runner, its report beside the study's
    "cli": 8,  # the command line: cli.py and __main__.py
}
BASE = {"paths", "errors", "net", "formatting", "catalogue", "settings", "suite", "steps", "settle", "samples"}
CLI = {"cli", "__main__"}
# (importing module, imported module): imports that may run upward, each with the reason. None now.
UPWARD_ALLOWED = {}


def module_name(path):
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    """{module name: (path, whether it is a package's __init__)} of every module of the kit."""
    return {module_name(path): (path, path.name == "__init__.py") for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = modules()


def room_of(module):
    """The room of a module of visitkit, by the table above (None for a module it does not place)."""
    parts = module.split(".")
    if len(parts) == 1:
        return "base"  # the package's own __init__
    if parts[1] in CLI and len(parts) == 2:
        return "cli"
    if parts[1] in BASE and len(parts) == 2:
        return "base"
    if parts[1] in RANKS and (len(parts) > 2 or MODULES[module][1]):
        return parts[1]
    return None


def imported(module):
    """The kit's modules `module` imports, anywhere in it: [(line, imported module)]."""
    path, is_package = MODULES[module]
    package = module if is_package else module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:  # `from a import b` imports the module a.b where there is one, else a
                found.append((node.lineno, f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base))
    return [(line, name) for line, name in found if name == "visitkit" or name.startswith("visitkit.")]


GRAPH = {module: imported(module) for module in MODULES}


def test_every_module_of_the_kit_has_a_room():
    unplaced = sorted(module for module in MODULES if room_of(module) is None)
    assert not unplaced, f"modules the layer table (tests/unit/test_layers.py) does not place: {unplaced}"
    unknown = sorted({name for imports in GRAPH.values() for _, name in imports if name not in MODULES})
    assert not unknown, f"imports of modules the kit does not have: {unknown}"


def test_no_module_imports_a_room_above_its_own_or_a_peer_room():
    wrong = []
    for module, imports in GRAPH.items():
        room = room_of(module)
        for line, name in imports:
            other = room_of(name)
            if other == room or (module, name) in UPWARD_ALLOWED:
                continue
            if RANKS[other] > RANKS[room]:
                wrong.append(f"{MODULES[module][0].relative_to(ROOT)}:{line}: {module} ({room}, rank {RANKS[room]}) "
                             f"imports {name} ({other}, rank {RANKS[other]}), a room above it")
            elif RANKS[other] == RANKS[room]:
                wrong.append(f"{MODULES[module][0].relative_to(ROOT)}:{line}: {module} ({room}) imports {name} "
                             f"({other}), a peer room of the same rank")
    assert not wrong, "imports against the layers (docs/kit.md, Layers):\n" + "\n".join(wrong)


def cycles(graph):
    """One cycle [a, b, ..., a] through each group of modules that import each other (Tarjan's
    strongly connected components, then a path round each)."""
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for other in graph.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = set()
            while True:
                other = stack.pop()
                on_stack.discard(other)
                group.add(other)
                if other == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    found = []
    for group in groups:
        start = min(group)
        path, seen = [start], {start}
        while True:  # walk inside the group until a module comes round again
            step = sorted(other for other in graph[path[-1]] if other in group)
            following = next((other for other in step if other not in seen), None) or step[0]
            path.append(following)
            if following in seen:
                found.append(path[path.index(following):])
                break
            seen.add(following)
    return found


def test_no_modules_import_each_other_round_a_cycle():
    graph = {module: sorted({name for _, name in imports if name != module}) for module, imports in GRAPH.items()}
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(cycle) for cycle in found)


@pytest.mark.parametrize("graph, expected", [
    ({"a": ["b"], "b": ["c"], "c": []}, []),
    ({"a": ["b"], "b": ["c"], "c": ["a"]}, [["a", "b", "c", "a"]]),
    ({"a": ["b"], "b": ["a", "c"], "c": ["c2"], "c2": ["c"]}, [["c", "c2", "c"], ["a", "b", "a"]]),
])
def test_the_cycle_finder_names_each_cycle(graph, expected):
    assert sorted(cycles(graph)) == sorted(expected)
