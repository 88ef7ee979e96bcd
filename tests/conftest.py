"""Shared fixtures: small real image files, manifests written on the fly, and the demo project built once."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from PIL import Image

os.environ.setdefault("HIBUG_USER", "tester")


@pytest.fixture
def image_dir(tmp_path: Path) -> Path:
    """Six small real PNG images a.png .. f.png, plus a corrupt one and a non-image."""
    folder = tmp_path / "images"
    folder.mkdir()
    for i, name in enumerate("abcdef"):
        Image.new("RGB", (32, 24), (40 * i, 100, 200 - 30 * i)).save(folder / f"{name}.png")
    good = (folder / "a.png").read_bytes()
    (folder / "truncated.png").write_bytes(good[: len(good) // 2])
    (folder / "notes.png").write_text("this is not an image")
    return folder


@pytest.fixture
def write_csv(tmp_path: Path):
    """Write a manifest next to the images folder; returns its path."""

    def write(text: str, name: str = "manifest.csv", encoding: str | None = "utf-8") -> Path:
        path = tmp_path / name
        path.write_bytes(text.encode(encoding) if encoding else text)
        return path

    return write


@pytest.fixture(scope="session")
def demo_project(tmp_path_factory) -> Path:
    """The full demo project, built once per test session from the shipped checkpoint."""
    from hibug_core.demo import build_demo

    folder = tmp_path_factory.mktemp("demo") / "hibug-demo"
    build_demo(folder).close()
    return folder
