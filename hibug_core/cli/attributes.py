"""`hibug attributes show | propose | suggest-tags | edit`: the attribute schema, where every change is a version."""
from __future__ import annotations

import argparse

from hibug_core.cli.command import Command, project_argument
from hibug_core.errors import HibugError, SchemaError, validation_reasons
from hibug_core.operations import ProposeAttributes, SuggestTags

GROUPS = ("main object", "background", "global")


def _arguments(parser: argparse.ArgumentParser) -> None:
    from hibug_core.cli.options import add_operation_options

    actions = parser.add_subparsers(dest="action", required=True)
    show = actions.add_parser("show", help="print the schema (default: the newest version)")
    project_argument(show)
    show.add_argument("--version", type=int, help="an older version")
    show.add_argument("--history", action="store_true", help="list every version")
    show.add_argument("--json", action="store_true", help="print the schema as JSON")
    for name, op in (("propose", ProposeAttributes), ("suggest-tags", SuggestTags)):
        sub = actions.add_parser(name, help=op.summary, description=op.summary)
        project_argument(sub)
        add_operation_options(sub, op)
    edit = actions.add_parser("edit", help="change one attribute (or add one) and save a new version")
    project_argument(edit)
    edit.add_argument("attribute", help="the attribute to change (or to add)")
    edit.add_argument("--add-tag", action="append", help="add a tag (repeatable)")
    edit.add_argument("--remove-tag", action="append", help="remove a tag (repeatable)")
    edit.add_argument("--rename", help="new name")
    edit.add_argument("--template", action="append", help="prompt template with {tag} and {label} (repeatable)")
    edit.add_argument("--group", choices=GROUPS)
    edit.add_argument("--enable", action="store_true")
    edit.add_argument("--disable", action="store_true")
    edit.add_argument("--delete", action="store_true")


def cmd_attributes(args) -> int:
    from hibug_core.cli.options import operation_from_args
    from hibug_core.store.attribute_versions import latest_version, load_schema, save_schema, schema_history
    from hibug_core.store.project import Project

    with Project.open(args.project, read_only=True if args.action == "show" else None) as project:
        base = latest_version(project)
        if args.action in ("propose", "suggest-tags"):
            op = operation_from_args(ProposeAttributes if args.action == "propose" else SuggestTags, args)
            result = op.execute(project)
            print(result.printed())
            if result.values["version"] in (None, base):  # nothing saved
                return 0
            schema = load_schema(project)
        elif args.action == "edit":
            edited, change = _edit_attribute(load_schema(project), args)
            version = save_schema(project, edited, note=change, base_version=base)
            print(f"saved version {version}: {change}")
            schema = edited
        elif args.history:
            for row in schema_history(project).itertuples():
                print(f"v{row.version:<4} {row.created_at}  {row.author:<12} {row.attributes:>3} attributes  "
                      f"{row.note}")
            return 0
        else:
            schema = load_schema(project, args.version)
    if args.action == "show" and args.json:
        print(schema.model_dump_json(indent=2))
        return 0
    for group in GROUPS:
        members = [a for a in schema.attributes if a.group == group]
        if members:
            print(f"{group}:")
        for a in members:
            state = "" if a.enabled else "  (disabled)"
            print(f"  {a.name:<32} {', '.join(a.tags)}  [{a.source}]{state}")
    return 0


def _edit_attribute(schema, args):
    """The edited schema and what changed; SchemaError (nothing stored) when the edit would make it invalid."""
    try:
        return _edited(schema, args)
    except SchemaError as error:
        raise SchemaError(f"edit of '{args.attribute[:60]}' refused, nothing saved: {error}") from None


def _edited(schema, args):
    from pydantic import ValidationError

    from hibug_core.attributes.schema import Attribute

    if args.attribute not in schema.names():
        if not args.add_tag or len(args.add_tag) < 2:
            raise HibugError(f"no attribute '{args.attribute[:60]}'; to add one, give at least two --add-tag")
        try:
            attribute = Attribute(name=args.attribute, tags=tuple(args.add_tag), group=args.group or "main object",
                                  kind="binary" if args.attribute.startswith("is ") else "descriptive",
                                  templates=tuple(args.template or ()))
        except ValidationError as error:
            raise SchemaError(validation_reasons(error)) from None
        return schema.replace(attribute), f"added '{args.attribute}'"
    attribute = schema[args.attribute]
    if args.delete:
        return schema.without(args.attribute), f"deleted '{args.attribute}'"
    tags = [t for t in attribute.tags if t not in (args.remove_tag or [])] + \
        [t for t in (args.add_tag or []) if t not in attribute.tags]
    update = {"tags": tuple(tags)}
    if args.template:
        update["templates"] = tuple(args.template)
    if args.enable or args.disable:
        update["enabled"] = bool(args.enable)
    if args.group:
        update["group"] = args.group
    edited = attribute.edited(**update, name=args.rename or attribute.name)
    result = schema.replace(edited, name=attribute.name)
    changes = [f"{k} -> {v}" for k, v in update.items() if getattr(attribute, k) != v]
    if args.rename:
        changes.insert(0, f"renamed to '{args.rename}'")
    return result, f"edited '{args.attribute}': " + "; ".join(changes)




COMMANDS = {
    "attributes": Command("show, propose or edit the attribute schema, or suggest tags from the data (every change "
                          "is a version)", _arguments, cmd_attributes),
}
