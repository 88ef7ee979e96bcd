"""One rule per parameter, said once: its range and meaning, checked by the core config that holds it and reused by
every operation that sets it (scikit-learn's parameter constraints, one table per config)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pydantic import Field

from hibug_core.errors import check_fields


@dataclass(frozen=True)
class Bound:
    """A number's allowed range (ends closed with ge/le, open with gt/lt) and what it means."""

    help: str
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    optional: bool = False  # None is allowed (its meaning is in the help)
    integer: bool = False  # a count: an int, never a float that happens to be whole

    def holds(self, value) -> bool:
        if value is None:
            return self.optional
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            return False
        return ((self.ge is None or value >= self.ge) and (self.gt is None or value > self.gt)
                and (self.le is None or value <= self.le) and (self.lt is None or value < self.lt))

    def describe(self) -> str:
        """What a value must be, in words: 'a count from 1 to 4', 'in (0, 1]', 'None or 0 or more'."""
        low, high = (self.ge, "[") if self.ge is not None else (self.gt, "(")
        top, close = (self.le, "]") if self.le is not None else (self.lt, ")")
        if low is not None and top is not None:
            said = f"from {low:g} to {top:g}" if self.integer else f"in {high}{low:g}, {top:g}{close}"
        elif low is not None:
            said = f"{low:g} or more" if self.ge is not None else f"above {low:g}"
        elif top is not None:
            said = f"{top:g} or less" if self.le is not None else f"below {top:g}"
        else:
            said = "a number"
        said = f"a count {said}" if self.integer else said
        return f"None or {said}" if self.optional else said

    def field(self, default, **more):
        """The pydantic field of an operation that sets this parameter: the same range, the same help."""
        return Field(default, ge=self.ge, gt=self.gt, le=self.le, lt=self.lt, description=self.help, **more)


def check_bounds(config, bounds: dict[str, Bound], also: dict[str, tuple[bool, str]] | None = None) -> None:
    """ConfigError naming each field of a config dataclass outside its bound (and each of `also`'s rules that fails)."""
    check_fields(config, {**{name: (bound.holds(getattr(config, name)), bound.describe())
                             for name, bound in bounds.items()}, **(also or {})})


def configured(config, name: str, **more):
    """An operation's field for parameter `name` of a config dataclass: its bound and help, and the default of
    `config` (the class, or an instance whose values are another use's defaults)."""
    bound = config.BOUNDS[name]
    default = getattr(config, name) if not isinstance(config, type) else \
        next(f for f in dataclasses.fields(config) if f.name == name).default
    return bound.field(default, **more)
