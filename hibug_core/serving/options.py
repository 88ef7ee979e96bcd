"""A server's policy from the command line's options (`hibug serve`, `hibug demo`, `hibug mcp`): the secrets files
as Streamlit reads them, the roles, the data roots and the job limits."""
from __future__ import annotations

from pathlib import Path

import tomllib

from hibug_core.errors import ConfigError
from hibug_core.serving.policy import ServerPolicy
from hibug_core.serving.roles import RoleMap

ROOT = Path(__file__).resolve().parents[2]  # hibug's own folder (its .streamlit/secrets.toml)


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


def server_secrets(args) -> dict:
    """The secrets a server started with these options reads (--secrets, else Streamlit's files)."""
    if args.secrets and not Path(args.secrets).is_file():
        raise ConfigError(f"--secrets {args.secrets}: no such file")
    return read_secrets(secrets_files(args.secrets))


def policy_from_options(args, secrets: dict, *, project: str | None = None, projects_root: str | None = None,
                        sign_in: bool, how: str) -> ServerPolicy:
    """The policy of a server from its options; refuses sign-in (`how` people sign in, in words) without roles."""
    if args.roles:
        roles = RoleMap.from_file(args.roles).as_mapping()
    else:
        roles = RoleMap.from_mapping(secrets.get("hibug", {}).get("roles", {}),
                                     source="[hibug.roles] in the secrets").as_mapping()
    if sign_in and not roles:
        raise ConfigError(f"{how} but nobody has a role, so nobody could use the server: give --roles FILE or a "
                          "[hibug.roles] table (admin/editor/viewer = [...])")
    return ServerPolicy.build(
        project=project, projects_root=projects_root, data_roots=tuple(args.data_root), address=args.address,
        read_only=args.read_only, open_to_anyone=args.open_to_anyone, sign_in=sign_in, roles=roles,
        max_jobs=args.max_jobs, max_waiting=args.max_waiting, max_jobs_per_person=args.max_jobs_per_person)
