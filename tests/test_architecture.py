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


def _registered_names() -> set[str]:
    """Every registry entry's name, with every module that registers entries imported first."""
    import gc

    import hibug_core.bench.run
    import hibug_core.demo.study
    import hibug_core.jobs.kinds
    import hibug_core.tagging.run
    import hibug_core.tasks.object_repair  # noqa: F401
    from hibug_core.registry import Registry

    # Words that name data as well as an entry: "model" the model's own features (and a model family), "tag" a table's
    # column, "box", "keypoints" and "segmentation" COCO's fields (the shapes a manifest draws, and the task that reads
    # masks: its name is guarded by test_nothing_outside_the_tasks_asks_which_task_it_runs), "mask" a stored mask.
    return {e.name for r in gc.get_objects() if type(r) is Registry for e in r} - {
        "model", "tag", "box", "keypoints", "segmentation", "mask"}


def _own_entries(tree) -> set[str]:
    """The names a module registers itself (Registry.add / .register with a literal name): it may branch on them."""
    return {node.args[0].value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", None) in ("add", "register", "_entry")
            and node.args and isinstance(node.args[0], ast.Constant)}


def test_nothing_branches_on_a_registry_entrys_name_outside_its_registry():
    """No `== "<entry name>"` (or `in`) anywhere but in the module that registers the entry: the rest asks the entry
    (its behaviour, help, secret, needs) or the task."""
    names = _registered_names()
    found = []
    for path in [*sorted((ROOT / "hibug_core").rglob("*.py")), *UI_EDGE]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        allowed = _own_entries(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare) and any(isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn))
                                                     for op in node.ops):
                found += [f"{path.relative_to(ROOT)}:{node.lineno} compares with the entry name {c.value!r}"
                          for c in (node.left, *node.comparators)
                          if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in names
                          and c.value not in allowed]
    assert found == []


def test_no_dict_is_keyed_by_task_names():
    """What differs by task is the task's own (its overview, nouns, shapes, evidence, library entry) or a registry
    entry; a dict keyed by task names would have to be edited for every new task."""
    from hibug_core.tasks import all_tasks

    task_names = {t.name for t in all_tasks()}
    found = []
    for path in [*sorted((ROOT / "hibug_core").rglob("*.py")), *UI_EDGE]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                if len(keys & task_names) >= 2:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} keys a dict by {sorted(keys & task_names)}")
    assert found == []


def test_pages_run_jobs_by_their_operation():
    """A page starts a job with a built operation (never a kind's name or a hand-built dict of parameters) and watches
    it by the operation's kind (Op.kind), not a string it spells itself."""
    found = []
    for path in UI_EDGE:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            where = f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"
            name = getattr(node.func, "id", None) if isinstance(node, ast.Call) else None
            if name == "start_job" and len(node.args) > 1 and isinstance(node.args[1], (ast.Constant, ast.Dict)):
                found.append(f"{where} starts a job from a name or a dict, not a built operation")
            if name in ("job_status", "latest_job", "job_running", "jobs") and len(node.args) > 1 \
                    and isinstance(node.args[1], ast.Constant):
                found.append(f"{where} names a job kind {node.args[1].value!r} instead of its operation's kind")
            if name == "submit" and path.name != "jobs.py":  # hibug_ui/jobs.py's start_job is the one that does
                found.append(f"{where} submits a job itself instead of start_job")
    assert found == []


def test_the_library_does_not_depend_on_its_demo():
    graph = import_graph()
    leaning = {module: sorted(t for t in targets if t.startswith("hibug_core.demo"))
               for module, targets in graph.items()
               if module.count(".") and module.split(".")[1] in ("models", "objects", "repair", "slices", "tagging",
                                                                 "tasks", "store")}
    assert {module: demo for module, demo in leaning.items() if demo} == {}


# The segmentation task and its pieces (issue 56): its model family, what its masks measure and its demo. Only they,
# and the places that register them (the tasks' package, the model registry's adapters, the demos), import them.
SEGMENTATION_PIECES = {"hibug_core.tasks.segmentation", "hibug_core.objects.mask_geometry",
                       "hibug_core.models.zoo.scene_masks", "hibug_core.demo.segmentation",
                       "hibug_core.demo.mask_scenes", "hibug_core.bench.masks"}
REGISTERING = {"hibug_core.tasks", "hibug_core.models.object_models", "hibug_core.demo", "hibug_core.bench"}


def test_adding_the_segmentation_task_touched_only_its_own_module_and_its_pieces():
    """A task is one module and its pieces: no generic module (import, matching, slices, repair, store, pages) imports
    the segmentation task or its pieces; they reach it through the task registry and the hooks every task has."""
    graph = import_graph()
    assert SEGMENTATION_PIECES <= set(graph)
    leaning = {module: sorted(targets & SEGMENTATION_PIECES) for module, targets in graph.items()
               if module not in SEGMENTATION_PIECES | REGISTERING and targets & SEGMENTATION_PIECES}
    assert leaning == {}
