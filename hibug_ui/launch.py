"""Starting the dashboard (app.py and pages/ beside this package) on a project; imports no streamlit itself."""
from __future__ import annotations

import os
import sys
from pathlib import Path

from hibug_core.errors import HibugError

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"


def serve(project: Path, port: int, address: str, headless: bool = True) -> int:
    """Run the dashboard on a project (replaces this process with streamlit)."""
    if not APP.exists():
        raise HibugError(f"the dashboard files are not next to hibug_ui ({APP} is missing); "
                         "install hibug from its source folder with `pip install -e .`")
    env = dict(os.environ, HIBUG_PROJECT=str(Path(project).resolve()))
    command = [sys.executable, "-m", "hibug_ui.server", "run", str(APP), "--server.port", str(port),
               "--server.address", address, "--server.headless", "true" if headless else "false"]
    os.chdir(ROOT)  # .streamlit/config.toml is read from the working folder
    os.execve(sys.executable, command, env)
    return 0
