"""What every operation is: a frozen, validated set of parameters (choices from the registries, bounds from the
core's configs) that runs itself on a project and returns a Result that says what it did."""
from __future__ import annotations

import types
import typing
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

from hibug_core.embeddings.registry import ENCODERS
from hibug_core.errors import HibugError
from hibug_core.progress import no_progress
from hibug_core.redaction import carries_secret, redact
from hibug_core.registry import Registry
from hibug_core.values import normalise_name

NO_BASELINE = "none"


class OperationError(HibugError):
    """Parameters an operation refuses; the message names the field and what is allowed."""


@dataclass(frozen=True)
class OneOf:
    """Field metadata: the value must be one of these (a registry's entries, including its families and test-only
    entries; menus offer `names()`)."""

    choices: Registry | tuple[str, ...]
    extra: tuple[str, ...] = ()  # values allowed besides the choices (e.g. "none")

    def names(self) -> list[str]:
        base = self.choices.names() if isinstance(self.choices, Registry) else list(self.choices)
        return base + [e for e in self.extra if e not in base]

    def allows(self, value: str) -> bool:
        if value in self.extra:
            return True
        return value in self.choices if isinstance(self.choices, Registry) else value in self.names()

    def check(self, value):
        if value is not None and not self.allows(value):
            raise ValueError(f"not allowed; use one of: {self.describe()}")
        return value

    def __get_pydantic_core_schema__(self, source, handler):
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def describe(self) -> str:
        if isinstance(self.choices, Registry):
            return self.choices.help_text() + "".join(f"; {e}" for e in self.extra)
        return ", ".join(self.names())


@dataclass(frozen=True)
class Cli:
    """Field metadata: how the field appears on the command line (default: --field-name)."""

    flag: str | None = None  # another spelling, e.g. --split for `splits`
    positional: bool = False
    comma: bool = False  # a list typed as "a,b,c"
    repeat: bool = False  # a list typed as --flag a --flag b
    skip: bool = False  # not a command-line option (e.g. rows edited on a page)
    parse: typing.Callable[[str], Any] | None = None  # how the typed text is read (default: the field's type)


@dataclass
class Result:
    """What an operation did: its summary in words (a job shows it, the command line prints it after its lines), the
    lines the command line prints first (a table), the JSON-able values a job stores, and a warning when it ran but
    what it made is doubtful."""

    summary: str
    values: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    warning: str | None = None
    warning_details: str | None = None  # why, and what to do
    exit_code: int = 0  # the command's: 1 for a gate that failed
    summary_first: bool = False  # the command line prints the summary as the lines' heading

    def stored(self) -> dict[str, Any]:
        """What a job keeps of it (hibug_ui.jobs shows the summary and the warning)."""
        extra = {"warning": self.warning, "warning_details": self.warning_details} if self.warning else {}
        return {**self.values, **extra, "summary": self.summary}

    def printed(self) -> str:
        """What the command line prints: its lines, the summary, then the warning and why."""
        warning = [f"warning: {self.warning}"] + ([f"  why: {self.warning_details}"] if self.warning_details else []) \
            if self.warning else []
        said = [self.summary] if self.summary else []
        return "\n".join([*said, *self.lines, *warning] if self.summary_first else [*self.lines, *said, *warning])


class Operation(BaseModel):
    """Base of every operation: frozen, unknown parameters refused, choices checked when built."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: ClassVar[str]
    summary: ClassVar[str]
    needs: ClassVar[tuple[str, ...]] = ()  # what the project's task must be able to do (tasks.base.CAPABILITY_WORDS)
    # Long work: the dashboard runs it as a background job in its own process (hibug_core.jobs), never in a page.
    background: ClassVar[bool] = False
    writes: ClassVar[bool] = True  # False: it only reads the project (the command line opens it read-only)

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        """Do the work on an open project; callers go through execute, which checks the task first."""
        raise NotImplementedError(f"operation '{self.kind}' does not run itself")

    def execute(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        """Run it after checking the project's task can do what it needs (a TaskError saying what to do instead,
        before anything runs): what the command line and the background jobs both call."""
        from hibug_core.tasks import task_of

        self.check_task(task_of(project))
        self.check_data(project)
        if self.writes:
            project.require_writable(f"'{self.kind}'")
        return self.run(project, progress=progress, author=author)

    def data_refusal(self, project) -> str | None:
        """Why the project holds nothing for this operation to work on (e.g. no pool images to select from), and what
        to do; None when it does. Said before anything starts, a job included."""
        return None

    def check_data(self, project) -> None:
        from hibug_core.errors import ProjectError

        refusal = self.data_refusal(project)
        if refusal:
            raise ProjectError(refusal)

    def required(self) -> tuple[str, ...]:
        """The capabilities this operation, with these parameters, needs of the project's task."""
        return self.needs

    def refusal(self, task) -> str | None:
        """Why the project's task cannot run this operation, and what to do instead; None when it can."""
        return task.refusal(self.required())

    def check_task(self, task) -> None:
        """TaskError before anything runs when the project's task cannot do what this operation needs."""
        from hibug_core.tasks.base import TaskError

        refusal = self.refusal(task)
        if refusal:
            raise TaskError(refusal)

    @classmethod
    def build(cls, params: dict[str, Any] | None = None, **more):
        """The operation from plain parameters (a job's, a form's); OperationError naming every bad field."""
        try:
            return cls.model_validate({**(params or {}), **more})
        except ValidationError as error:
            problems = []
            for issue in error.errors():
                where = ".".join(str(part) for part in issue["loc"])
                message = issue["msg"].removeprefix("Value error, ")
                if not issue["loc"]:
                    problems.append(message)  # a check across fields names its fields itself
                elif issue["type"] in ("missing", "extra_forbidden"):
                    problems.append(f"{where}: {message}")
                else:
                    problems.append(f"{where} = {issue['input']!r}: {message}")
            raise OperationError(f"{cls.kind}: " + "; ".join(problems)) from None

    @classmethod
    def default(cls, name: str):
        return cls.model_fields[name].get_default(call_default_factory=True)

    @classmethod
    def rule(cls, name: str) -> OneOf | None:
        """The field's allowed values, when it has a fixed set."""
        return next((m for m in cls.model_fields[name].metadata if isinstance(m, OneOf)), None)

    @classmethod
    def choices(cls, name: str) -> list[str]:
        """The values offered for a field (registry entries meant for users; test-only ones left out)."""
        rule = cls.rule(name)
        if rule is None:
            raise KeyError(f"{cls.__name__}.{name} has no fixed choices")
        return rule.names()

    @classmethod
    def field_type(cls, name: str) -> tuple[type, bool]:
        """(the field's scalar type, whether it is a list of them), Optional unwrapped."""
        annotation = cls.model_fields[name].annotation
        if typing.get_origin(annotation) in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        if typing.get_origin(annotation) is list:
            return typing.get_args(annotation)[0], True
        return annotation, False

    @classmethod
    def help(cls, name: str) -> str:
        return cls.model_fields[name].description or ""

    def params(self) -> dict[str, Any]:
        """JSON-able parameters (what a job stores)."""
        return self.model_dump(mode="json")


Encoder = Annotated[str, OneOf(ENCODERS), Field(description="encoder: " + ENCODERS.help_text())]
Splits = Annotated[list[str] | None, Cli(flag="--split", repeat=True),
                   Field(description="only these splits (repeatable; default: all)")]
Attributes = Annotated[list[str] | None, Cli(comma=True),
                       Field(description="comma-separated attribute names (default: every enabled one)")]
def _stored_name(value: str | None) -> str | None:
    """A name typed for a model, an attribute or a view, in the one form the store keeps (hibug_core.values)."""
    return None if value is None or not str(value).strip() else normalise_name(value, "the name")


StoredName = AfterValidator(_stored_name)
ModelName = Annotated[str | None, StoredName, Field(description="model name (default: the project's first)")]
LLMModel = Annotated[str | None, Field(description="LLM model name (default: HIBUG_LLM_MODEL, else gpt-4o-mini)")]
LLMBaseURL = Annotated[str | None, Field(description="OpenAI-compatible server URL (default: HIBUG_LLM_BASE_URL); "
                                                     "the key is read from OPENAI_API_KEY or Streamlit secrets")]
Seed = Annotated[int, Field(ge=0, description="random seed")]


class LLMSettings(BaseModel):
    """Where the language model is: model name and server; the key never passes through an operation."""

    model_config = ConfigDict(hide_input_in_errors=True)  # a refused URL may hold a key

    llm_model: LLMModel = None
    llm_base_url: LLMBaseURL = None

    @field_validator("llm_base_url")
    @classmethod
    def _no_key_in_the_url(cls, value: str | None) -> str | None:
        if carries_secret(value):
            raise ValueError(f"the server URL carries a key ({redact(value)}); give the URL without it and put the "
                             "key in OPENAI_API_KEY or Streamlit secrets (a URL is stored with the job and shown)")
        return value

    def llm_config(self):
        from hibug_core.llm.client import LLMConfig

        return LLMConfig.from_env(model=self.llm_model or None, base_url=self.llm_base_url or None)


class RaySettings(BaseModel):
    """Running an encoder or a model as Ray Data batch inference on a cluster instead of in this process."""

    ray: bool = Field(False, description="run as Ray Data batch inference (needs hibug[cluster])")
    ray_address: str | None = Field(None, description="Ray cluster address (default: start a local instance)")
    ray_actors: int = Field(2, ge=1, description="actors running the model (one GPU each when there are GPUs)")

    def ray_options(self, batch_size: int):
        from hibug_core.embeddings.ray_backend import RayOptions

        return RayOptions(address=self.ray_address, actors=self.ray_actors, batch_size=batch_size)

