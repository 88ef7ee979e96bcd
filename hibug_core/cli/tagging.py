"""Commands that embed and tag images: embed, tag, tags (sources per attribute) and teach."""
from __future__ import annotations

from hibug_core.cli.command import Command, operation_command, project_argument, run_here
from hibug_core.errors import HibugError
from hibug_core.operations import Embed, Predict, Tag, Teach


def _find_sample(samples, value: str) -> int | None:
    """A sample by its manifest id, its image path, or the end of its image path (e.g. images/cat.jpg)."""
    for column in ("sample_key", "image_path"):
        hits = samples.index[samples[column] == value]
        if len(hits):
            return int(hits[0])
    hits = samples.index[samples["image_path"].str.endswith("/" + value.lstrip("./"))]
    return int(hits[0]) if len(hits) == 1 else None


def _teach_examples(parser) -> None:
    parser.add_argument("--examples", required=True, help="CSV with columns sample (manifest id or image) and tag")


def cmd_teach(args) -> int:
    from hibug_core.ingest.table import read_table
    from hibug_core.store.project import Project

    examples = read_table(args.examples)  # the manifest's reader: a missing or non-UTF-8 file is named, row and byte
    if not {"sample", "tag"} <= set(examples.columns):
        raise HibugError(f"{args.examples} needs the columns 'sample' (the manifest id or image path) and 'tag'")
    with Project.open(args.project) as project:
        samples = project.samples()
        ids = [_find_sample(samples, value) for value in examples["sample"]]
    unknown = [v for v, i in zip(examples["sample"], ids) if i is None]
    if unknown:
        raise HibugError(f"{len(unknown)} example(s) name samples that are not in the project, e.g. {unknown[0]!r}")
    return run_here(Teach, args, examples=dict(zip(ids, examples["tag"])))


def _tags_arguments(parser) -> None:
    project_argument(parser)
    parser.add_argument("--choose", action="append", metavar="ATTRIBUTE=SOURCE",
                        help="put SOURCE in force for ATTRIBUTE: imported, run:<id>, or auto (the best measured one); "
                        "repeatable")


def cmd_tags(args) -> int:
    from hibug_core.store import tag_store
    from hibug_core.store.attribute_versions import schema_names
    from hibug_core.store.project import Project
    from hibug_core.tagging.sources import rank_sources, trust_message

    with Project.open(args.project) as project:
        for choice in args.choose or []:
            attribute, _, source = choice.rpartition("=")
            if not attribute:
                raise HibugError("--choose takes ATTRIBUTE=SOURCE (SOURCE: auto, imported or run:<id>), "
                                 f"not {choice!r}")
            tag_store.choose_source(project, attribute.strip(), source.strip())
        ranking = rank_sources(project, schema_names(project))
    for attribute, rows in ranking.table.groupby("attribute", sort=False):
        print(f"{attribute}:")
        for row in rows.itertuples():
            accuracy = f"{row.accuracy:6.1%} [{row.low:.0%}, {row.high:.0%}] on {row.checked:,}" if row.checked else \
                f"{'':6} ({row.against})"
            mark = "in force" + (" (chosen)" if row.chosen else "") if row.in_force else ""
            print(f"  {row.source:<10} {row.label:<40} {accuracy:<36} {mark}")
    message = trust_message(ranking)
    if message:
        print(message)
    return 0


COMMANDS = {
    "embed": operation_command(Embed),
    "predict": operation_command(Predict),
    "tag": operation_command(Tag),
    "tags": Command("show every tag source per attribute with its measured accuracy, and choose the one in force",
                    _tags_arguments, cmd_tags),
    "teach": operation_command(Teach, cmd_teach, extra=_teach_examples),
}
