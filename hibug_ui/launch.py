"""Starting the dashboard (app.py and pages/ beside this package) with what it serves decided here, before any
visitor arrives; imports no streamlit itself."""
from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import tomllib

from hibug_core.errors import ConfigError, HibugError
from hibug_core.serving.policy import POLICY_ENV, PROJECT_ENV, ServerPolicy
from hibug_core.serving.roles import RoleMap

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
logger = logging.getLogger(__name__)


def secrets_files(secrets: str | None) -> list[Path]:
    """The secrets files the dashboard reads, as Streamlit reads them (later ones win)."""
    if secrets:
        return [Path(secrets).expanduser().resolve()]
    return [Path.home() / ".streamlit" / "secrets.toml", ROOT / ".streamlit" / "secrets.toml"]


def read_secrets(files: list[Path]) -> dict:
    merged: dict = {}
    for path in files:
        if not path.is_file():
            continue
        try:
            merged.update(tomllib.loads(path.read_text(encoding="utf-8")))
        except (OSError, tomllib.TOMLDecodeError) as error:
            raise ConfigError(f"secrets file {path} cannot be read as TOML ({error})") from None
    return merged


def server_policy(args, *, project: str | None = None, projects_root: str | None = None) -> ServerPolicy:
    """The policy of `hibug serve` / `hibug demo` from their options; refuses a server the network can reach that
    nobody signs in to (unless read-only or plainly open), and sign-in without roles."""
    if args.secrets and not Path(args.secrets).is_file():
        raise ConfigError(f"--secrets {args.secrets}: no such file")
    secrets = read_secrets(secrets_files(args.secrets))
    sign_in = "auth" in secrets
    if args.roles:
        roles = RoleMap.from_file(args.roles).as_mapping()
    else:
        roles = RoleMap.from_mapping(secrets.get("hibug", {}).get("roles", {}),
                                     source="[hibug.roles] in the secrets").as_mapping()
    if sign_in and not roles:
        raise ConfigError("sign-in is set up ([auth] in the secrets) but nobody has a role, so nobody could use the "
                          "dashboard: give --roles FILE or a [hibug.roles] table (admin/editor/viewer = [...])")
    policy = ServerPolicy.build(
        project=project, projects_root=projects_root, data_roots=tuple(args.data_root), address=args.address,
        read_only=args.read_only, open_to_anyone=args.open_to_anyone, sign_in=sign_in, roles=roles,
        max_jobs=args.max_jobs, max_waiting=args.max_waiting, max_jobs_per_person=args.max_jobs_per_person)
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
