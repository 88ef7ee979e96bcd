"""Starting the dashboard (app.py and pages/ beside this package) with what it serves decided here, before any
visitor arrives; imports no streamlit itself."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

from hibug_core.errors import HibugError
from hibug_core.serving.options import policy_from_options, server_secrets
from hibug_core.serving.policy import POLICY_ENV, PROJECT_ENV, ServerPolicy

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
logger = logging.getLogger(__name__)


def server_policy(args, *, project: str | None = None, projects_root: str | None = None) -> ServerPolicy:
    """The policy of `hibug serve` / `hibug demo` from their options; refuses a server the network can reach that
    nobody signs in to (unless read-only or plainly open), and sign-in without roles."""
    secrets = server_secrets(args)
    policy = policy_from_options(args, secrets, project=project, projects_root=projects_root,
                                 sign_in="auth" in secrets, how="sign-in is set up ([auth] in the secrets)")
    policy.check_exposure()
    return policy


def describe(policy: ServerPolicy) -> str:
    """One line on what the server serves and to whom (printed when it starts)."""
    what = f"project {policy.project}" if policy.project else f"the projects in {policy.projects_root}"
    who = ("sign-in required" if policy.sign_in else "read-only for everyone" if policy.read_only
           else "OPEN TO ANYONE who reaches it" if policy.shared else "this machine only")
    roots = ", ".join(map(str, policy.data_roots)) or "none (uploads only)"
    return f"serving {what} on {policy.address}: {who}; data roots: {roots}; jobs at once: {policy.max_jobs}"


def serve(policy: ServerPolicy, port: int, *, secrets: str | None = None, headless: bool = True) -> int:
    """Run the dashboard under `policy` (replaces this process with streamlit)."""
    if not APP.exists():
        raise HibugError(f"the dashboard files are not next to hibug_ui ({APP} is missing); "
                         "install hibug from its source folder with `pip install -e .`")
    env = {name: value for name, value in os.environ.items() if name not in (POLICY_ENV, PROJECT_ENV)}
    env.update(policy.to_environment())
    command = [sys.executable, "-m", "hibug_ui.server", "run", str(APP), "--server.port", str(port),
               "--server.address", policy.address, "--server.headless", "true" if headless else "false"]
    if policy.shared:  # an unforeseen error shows its kind, never a traceback with the server's paths (logged)
        command += ["--client.showErrorDetails", "type"]
    if secrets:
        command += ["--secrets.files", str(Path(secrets).expanduser().resolve())]
    print(describe(policy), flush=True)
    os.chdir(ROOT)  # .streamlit/config.toml is read from the working folder
    os.execve(sys.executable, command, env)
    return 0
