"""One registry per pluggable kind (encoders, generators, selection and retraining methods, taggers, job kinds):
name, help text and constructor together, feeding the operations' validation, the CLI's choices and the pages' menus."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from hibug_core.access import check_spec
from hibug_core.errors import HibugError
from hibug_core.safe_files import check_model_files

LANGUAGE_MODEL = "a language model"  # an entry that asks one (Entry.needs)


class UnknownChoice(HibugError, ValueError):
    """A name that no entry of a registry answers to."""


@dataclass(frozen=True)
class Entry:
    name: str  # what users type; for a family, the prefix before ':' (e.g. "open_clip")
    help: str
    build: Callable | None = None
    form: str | None = None  # a family's spelling, e.g. "open_clip:<architecture>:<pretrained tag or path>"
    hidden: bool = False  # built for tests (random weights): accepted, never offered in menus
    runs_code: bool = False  # builds by importing code the spec names (refused where typed on a shared dashboard)
    # What it needs, so that a page asks the entry rather than its name: a secret's name (read from the environment
    # or Streamlit secrets and handed to the job that builds it), and what is missing for an argument (e.g. weights
    # not on this machine: a sentence saying how to provide them; None when nothing is).
    secret: str | None = None
    missing: Callable[[str], str | None] | None = None
    needs: tuple[str, ...] = ()  # what running it involves, in words a page tests (e.g. LANGUAGE_MODEL)

    @property
    def spelling(self) -> str:
        return self.form or self.name


class Registry:
    """Entries by name; a family entry (form given) answers to every 'name:<argument>' spec."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry] = {}

    def add(self, name: str, help: str, build: Callable | None = None, *, form: str | None = None,
            hidden: bool = False, runs_code: bool = False, secret: str | None = None,
            missing: Callable[[str], str | None] | None = None, needs: tuple[str, ...] = ()) -> Entry:
        if name in self._entries:
            raise ValueError(f"{self.kind} '{name}' is registered twice")
        entry = self._entries[name] = Entry(name, help, build, form, hidden, runs_code, secret, missing, needs)
        return entry

    def register(self, name: str, help: str, *, form: str | None = None, hidden: bool = False,
                 runs_code: bool = False, secret: str | None = None,
                 missing: Callable[[str], str | None] | None = None, needs: tuple[str, ...] = ()):
        """Decorator form of add: the decorated callable is the entry's constructor."""
        def decorate(build):
            self.add(name, help, build, form=form, hidden=hidden, runs_code=runs_code, secret=secret, missing=missing,
                     needs=needs)
            return build
        return decorate

    def missing(self, spec: str) -> str | None:
        """What the entry `spec` names needs and this machine lacks for it (a sentence), or None."""
        entry = self.get(spec)
        return entry.missing(self.argument(spec)) if entry.missing is not None else None

    def __iter__(self) -> Iterator[Entry]:
        return iter(self._entries.values())

    def __contains__(self, spec: str) -> bool:
        return self.find(spec) is not None

    def names(self, *, hidden: bool = False) -> list[str]:
        """Fixed names offered to users (families are typed as specs, so they are not listed)."""
        return [e.name for e in self if e.form is None and (hidden or not e.hidden)]

    def families(self) -> list[Entry]:
        return [e for e in self if e.form is not None and not e.hidden]

    def find(self, spec: str) -> Entry | None:
        spec = spec.strip()
        entry = self._entries.get(spec)
        if entry is not None and entry.form is None:
            return entry
        prefix, _, argument = spec.partition(":")
        entry = self._entries.get(prefix)
        return entry if entry is not None and entry.form is not None and argument.strip() else None

    def get(self, spec: str) -> Entry:
        entry = self.find(spec)
        if entry is None:
            raise UnknownChoice(f"unknown {self.kind} '{spec}'; use one of: {self.help_text()}")
        return entry

    def argument(self, spec: str) -> str:
        """What follows a family's prefix ('ViT-B-32:laion2b' of 'open_clip:ViT-B-32:laion2b'); '' for a name."""
        entry = self.get(spec)
        return spec.strip().partition(":")[2].strip() if entry.form else ""

    def build(self, name: str, /, **options):
        """The entry's constructor called with the name's argument (families) and options; what a shared
        dashboard's visitor may not reach on its server (their code, files outside its data roots) is refused first."""
        entry = self.get(name)
        check_spec(self.kind, name, entry.runs_code)
        check_model_files(name, self.kind)
        if entry.build is None:
            raise UnknownChoice(f"{self.kind} '{name}' has no constructor")
        return entry.build(self.argument(name), **options) if entry.form else entry.build(**options)

    def help_text(self) -> str:
        return "; ".join(f"{e.spelling}: {e.help}" for e in self if not e.hidden)
