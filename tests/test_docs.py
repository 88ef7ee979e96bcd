"""The documentation's code examples run: every `>>>` example in README.md and docs/*.md, with its output, on a copy
of the demo project; and every relative link in them points at a file that exists."""
from __future__ import annotations

import doctest
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCED = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\]\((?!https?://|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)")


def _with_examples() -> list[Path]:
    return [p for p in PAGES if ">>> " in p.read_text(encoding="utf-8")]


@pytest.fixture(scope="module")
def demo_folder(demo_project, tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("docs")
    shutil.copytree(demo_project, where / "hibug-demo")
    return where


def test_the_readme_and_the_cli_reference_have_examples():
    assert {ROOT / "README.md", ROOT / "docs" / "cli.md"} <= set(_with_examples())


@pytest.mark.parametrize("page", _with_examples(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_examples_run_with_their_output(page, demo_folder):
    """Each page's examples in a fresh interpreter, as a reader would run them (no state left by other tests)."""
    blocks = FENCED.findall(page.read_text(encoding="utf-8"))
    examples = demo_folder / f"{page.stem}.txt"
    examples.write_text("\n".join(blocks), encoding="utf-8")
    assert doctest.DocTestParser().get_examples(examples.read_text(encoding="utf-8"))
    run = subprocess.run([sys.executable, "-m", "doctest", "-o", "ELLIPSIS", "-o", "NORMALIZE_WHITESPACE",
                          examples.name], cwd=demo_folder, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"{page.name}: an example's output differs\n{run.stdout[-4000:]}{run.stderr[-2000:]}"


def test_relative_links_point_at_files_that_exist():
    broken = [f"{page.relative_to(ROOT)}: {target}" for page in PAGES
              for target in LINK.findall(page.read_text(encoding="utf-8"))
              if not (page.parent / target).exists()]
    assert broken == []
