"""What changed between two versions of the attribute schema, one row per attribute that differs; what saving a
proposal makes of the version in force."""
from __future__ import annotations

import pandas as pd

from hibug_core.attributes.schema import MAX_ATTRIBUTES, AttributeSchema

FIELDS = ("group", "kind", "enabled", "templates", "source")


def schema_diff(old: AttributeSchema, new: AttributeSchema) -> pd.DataFrame:
    """attribute, change ("added", "removed", "changed"), and what: tags added or removed and fields changed."""
    rows = []
    for name in [*old.names(), *(n for n in new.names() if n not in old.names())]:
        if name not in new.names():
            rows.append({"attribute": name, "change": "removed", "what": ", ".join(old[name].tags)})
        elif name not in old.names():
            rows.append({"attribute": name, "change": "added", "what": ", ".join(new[name].tags)})
        else:
            before, after = old[name], new[name]
            what = [f"+{t}" for t in after.tags if t not in before.tags]
            what += [f"−{t}" for t in before.tags if t not in after.tags]
            what += [f"{f}: {getattr(before, f)!s} → {getattr(after, f)!s}" for f in FIELDS
                     if getattr(before, f) != getattr(after, f)]
            if what:
                rows.append({"attribute": name, "change": "changed", "what": "; ".join(what)})
    return pd.DataFrame(rows, columns=["attribute", "change", "what"])


def proposed_version(current: AttributeSchema | None, proposal: AttributeSchema, *,
                     replace: bool = False) -> tuple[AttributeSchema, int]:
    """What saving `proposal` makes of the version in force, and how many proposed attributes the schema's cap left
    out: by default the proposal's new attributes added to it, in the proposal's order, up to MAX_ATTRIBUTES (people's
    edits and the attributes measured or imported are kept); `replace` swaps it for the proposal. With no version
    yet, the proposal."""
    if current is None or not current.attributes or replace:
        return proposal, 0
    new = [a for a in proposal.attributes if a.name not in current.names()]
    room = max(MAX_ATTRIBUTES - len(current.attributes), 0)
    return current.with_new_from(proposal.model_copy(update={"attributes": tuple(new[:room])})), max(len(new) - room, 0)


def proposal_note(base: int | None, source: str, *, replace: bool = False) -> str:
    """The history's note for a version saved from a proposal by `source` onto version `base` (None: the first)."""
    if base is None:
        return f"proposed by {source}"
    return f"version {base} {'replaced by' if replace else 'with the new attributes of'} a proposal by {source}"
