"""Which role each signed-in identity holds: a roles file (or the server's secrets) maps identities to roles."""
from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from hibug_core.access import Role
from hibug_core.errors import ConfigError


@dataclass(frozen=True)
class RoleMap:
    """Identities (e-mail addresses or OIDC subjects; `*` patterns allowed, e.g. "*@team.example.com") per role. An
    identity holds the highest role any of its patterns gives; one that matches none has no access."""

    patterns: Mapping[Role, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, mapping: Mapping, *, source: str = "roles") -> RoleMap:
        """From {"admin": [...], "editor": [...], "viewer": [...]}; a bad role or entry is refused, naming it."""
        patterns: dict[Role, tuple[str, ...]] = {}
        for name, entries in mapping.items():
            try:
                role = Role.named(name)
            except ValueError as error:
                raise ConfigError(f"{source}: {error}") from None
            if isinstance(entries, str):
                entries = [entries]
            if not isinstance(entries, (list, tuple)) or not all(isinstance(e, str) and e.strip() for e in entries):
                raise ConfigError(f"{source}: '{name}' must be a list of identities (e-mail addresses or patterns "
                                  "such as \"*@example.com\")")
            patterns[role] = tuple(e.strip().casefold() for e in entries)
        return cls(patterns)

    @classmethod
    def from_file(cls, path: str | Path) -> RoleMap:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as error:
            raise ConfigError(f"roles file {path}: cannot read it ({error.strerror or error})") from None
        except tomllib.TOMLDecodeError as error:
            raise ConfigError(f"roles file {path}: not valid TOML ({error})") from None
        return cls.from_mapping(data.get("roles", data), source=f"roles file {path}")

    def role_of(self, identity: str) -> Role | None:
        key = identity.strip().casefold()
        held = [role for role, entries in self.patterns.items()
                if any(fnmatch.fnmatchcase(key, pattern) for pattern in entries)]
        return max(held) if held else None

    def as_mapping(self) -> dict[str, list[str]]:
        return {role.label: list(entries) for role, entries in self.patterns.items()}
