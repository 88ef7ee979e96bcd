"""The layering holds: no import cycle anywhere in hibug_core (imports inside functions counted), the low packages
load neither streamlit nor the tasks, and nothing outside hibug_core/tasks asks which task it runs."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOW_PACKAGES = ("store", "objects", "ingest", "embeddings", "attributes", "tagging", "slices", "models", "llm",
                "repair")
TASK_COMPARISON = re.compile(r'[!=]= *"(classification|detection|pose)"')


def module_names() -> dict[str, Path]:
    names = {}
    for path in (ROOT / "hibug_core").rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        names[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return names


def import_graph() -> dict[str, set[str]]:
    """Module -> the hibug_core modules it imports anywhere in its text (a `from package import name` counts as
    importing package.name where that is a module, else the package); imports under `if TYPE_CHECKING:` are for type
    checkers only and never run, so they do not count."""
    modules = module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for block in ast.walk(tree):
            if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING":
                block.body = []
        for node in ast.walk(tree):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
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

    sys.setrecursionlimit(10_000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_hibug_core_has_no_import_cycle():
    graph = import_graph()
    assert "hibug_core.tasks.registry" in graph["hibug_core.tasks.classification"]  # the scan sees imports
    assert cycles(graph) == []


def test_low_packages_load_neither_streamlit_nor_the_tasks():
    code = f"""
import importlib, pkgutil, sys
for package in {LOW_PACKAGES!r}:
    root = importlib.import_module("hibug_core." + package)
    for module in pkgutil.walk_packages(root.__path__, root.__name__ + "."):
        importlib.import_module(module.name)
    loaded = [m for m in ("streamlit", "hibug_core.tasks") if m in sys.modules]
    if loaded:
        print(package, *loaded)
        break
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == ""


def test_nothing_outside_the_tasks_asks_which_task_it_runs():
    places = [ROOT / "hibug_core", ROOT / "hibug_ui", ROOT / "pages", ROOT / "app.py"]
    files = [p for place in places for p in ([place] if place.is_file() else place.rglob("*.py"))]
    asking = [f"{path.relative_to(ROOT)}:{number}" for path in files if "tasks" not in path.relative_to(ROOT).parts
              for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
              if TASK_COMPARISON.search(line)]
    assert asking == []


UI_EDGE = [ROOT / "app.py", *sorted((ROOT / "pages").glob("*.py")), *sorted((ROOT / "hibug_ui").glob("*.py"))]


def test_the_ui_asks_entries_and_tasks_not_their_names():
    """No page tests a registry entry's name (`kind == "diffusers"`), keys a dict by task names or starts a job by a
    kind's name: they ask the entry (its help, secret, needs, what is missing) and the task (its overview, nouns,
    capabilities), and hand start_job the operation."""
    import ast
    import gc

    import hibug_core.demo.study
    import hibug_core.jobs.kinds
    import hibug_core.tagging.run  # noqa: F401
    import hibug_ui.jobs  # noqa: F401
    from hibug_core.registry import Registry
    from hibug_core.tasks import all_tasks

    entry_names = {e.name for r in gc.get_objects() if type(r) is Registry for e in r} - {"model", "tag"}
    task_names = {t.name for t in all_tasks()}
    found = []
    for path in UI_EDGE:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In)) for op in node.ops):
                named = [c.value for c in (node.left, *node.comparators)
                         if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in entry_names]
                found += [f"{where} compares with the entry name {n!r}" for n in named]
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "start_job" and len(node.args) > 1
                    and isinstance(node.args[1], ast.Constant)):
                found.append(f"{where} starts a job by a kind's name, not its operation")
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                if len(keys & task_names) >= 2:
                    found.append(f"{where} keys a dict by task names {sorted(keys & task_names)}")
    assert found == []


def test_the_library_does_not_depend_on_its_demo():
    graph = import_graph()
    leaning = {module: sorted(t for t in targets if t.startswith("hibug_core.demo"))
               for module, targets in graph.items()
               if module.count(".") and module.split(".")[1] in ("models", "objects", "repair", "slices", "tagging",
                                                                 "tasks", "store")}
    assert {module: demo for module, demo in leaning.items() if demo} == {}
