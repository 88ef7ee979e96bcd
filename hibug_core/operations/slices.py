"""Operations on slices: find and explain a model's error slices, predict the slices the split barely shows, compare
models slice by slice, gate a candidate model, export the findings."""
from __future__ import annotations

import json
import math
from typing import Annotated, ClassVar

from pydantic import BaseModel, Field, model_validator

from hibug_core.bounds import configured
from hibug_core.operations.base import Cli, LLMSettings, ModelName, OneOf, Operation, Result
from hibug_core.progress import no_progress
from hibug_core.slices.compare import COMPARED_SLICES, CompareConfig
from hibug_core.slices.report import TAG_SOURCES, tag_source
from hibug_core.slices.search import RANKINGS, SliceConfig
from hibug_core.slices.unseen import UNSEEN_METHODS

Depth = Cli(flag="--depth")
Support = Cli(flag="--support")
Tags = Annotated[str, OneOf(TAG_SOURCES)]


class _SliceSearch(BaseModel):
    """Where and how one model's error slices are searched: the split, the slice settings (SliceConfig's own
    parameters, bounds and help) and the tags."""

    model: ModelName = None
    split: str = Field("val", min_length=1, description="labelled split to evaluate on")
    max_depth: Annotated[int, Depth] = configured(SliceConfig, "max_depth")
    min_support: Annotated[int, Support] = configured(SliceConfig, "min_support")
    gap: float = configured(SliceConfig, "gap")
    threshold: float | None = configured(SliceConfig, "threshold")
    rank_by: Annotated[str, OneOf(RANKINGS)] = Field(SliceConfig.rank_by, description="order of the error slices: "
                                                     + RANKINGS.help_text())
    alpha: float = configured(SliceConfig, "alpha")
    attributes: Annotated[list[str] | None, Cli(comma=True)] = Field(
        None, description="comma-separated attributes to slice by (default: every tagged one); any imported column "
                          "is also 'known: <name>'")
    by_class: bool = Field(SliceConfig.by_class, description="slice by the class too")
    tags: Tags = Field("in force", description="tag source: " + TAG_SOURCES.help_text())

    def slice_config(self) -> SliceConfig:
        return SliceConfig(max_depth=self.max_depth, min_support=self.min_support, gap=self.gap,
                           threshold=self.threshold, rank_by=self.rank_by, alpha=self.alpha, by_class=self.by_class)

    def tag_warning(self, project, report) -> str | None:
        """A sentence when tags in force that the report slices by are too poor to trust, with what to do; None when
        all are fine or the tags searched are not those in force."""
        from hibug_core.store.attribute_versions import schema_names
        from hibug_core.tagging.sources import rank_sources, trust_message

        sliced = [c for c in report.all_tags.columns if c in set(schema_names(project))]
        return trust_message(rank_sources(project, sliced)) if tag_source(self.tags).in_force and sliced else None

    def report(self, project):
        """The error slices (kept in the project's files, read back when they hold this project state)."""
        from hibug_core.slices.report_files import kept_error_slices

        return kept_error_slices(project, self.model, split=self.split, config=self.slice_config(),
                                 attributes=self.attributes, tags=self.tags)


def _unseen(project, report, method: str, count: int, settings: LLMSettings):
    """The slices `method` predicts for the report, checked on the data that match them."""
    from hibug_core.slices.unseen import asks_a_language_model, predict_unseen
    from hibug_core.tasks import task_of

    return predict_unseen(project, report, method, task=task_of(project), count=count,
                          llm_config=settings.llm_config() if asks_a_language_model(method) else None)


def _unseen_said(predicted, method: str, report) -> tuple[str, list[str], dict]:
    """(HiBug2's Table 1 measure in words, one line per predicted slice, those the split barely shows first, the
    measure itself: slices.unseen.how_they_fail)."""
    from hibug_core.metrics import points
    from hibug_core.slices.unseen import how_they_fail

    measured = how_they_fail(predicted, report)
    said = f"{len(predicted)} slices predicted by {method}"
    if measured["scored"]:
        said += (f": mean {measured['split']} score {measured['mean_score']:.1%} on the {measured['scored']} it holds "
                 f"enough of, against {measured['overall_score']:.1%} on the whole split "
                 f"({points(measured['points'])}; {measured['relative_change']:+.1%} relative, HiBug2's Table 1 "
                 "measure)")
    else:
        said += f"; the {measured['split']} split holds too few of each to score them"
    lines = []
    for row in predicted.head(20).itertuples():
        checked = (f"test score {row.check_score:.1%} on {row.n_check}" if row.check_score == row.check_score
                   else f"{row.n_check} in test (too few to score)")
        predicted_score = f"predicted {row.predicted_score:.1%}; " if row.predicted_score == row.predicted_score else ""
        lines.append(f"  {'unseen ' if row.unseen else 'seen   '}{row.description:<50} {predicted_score}{checked}; "
                     f"{row.n_eval} in {report.split}, {row.n_pool} in the pool; {row.reason}")
    lines += [f"  dropped {line}" for line in predicted.attrs.get("dropped", [])]
    return said + ".", lines, measured


class FindSlices(Operation, _SliceSearch, LLMSettings):
    kind: ClassVar[str] = "slices"
    summary: ClassVar[str] = "find, rank and explain the error slices of a model"
    writes: ClassVar[bool] = False
    top: int = Field(20, ge=1, description="slices to show")
    output: str | None = Field(None, description="write every error slice to this .csv or .json file")
    unseen: Annotated[str | None, OneOf(UNSEEN_METHODS)] = Field(
        None, description="also predict slices the split barely shows (HiBug2), each checked on the pool and the "
                          "test split: " + UNSEEN_METHODS.help_text())
    unseen_count: int = Field(10, ge=1, le=50, description="slices the language model is asked for")

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.csv_export import write_csv
        from hibug_core.slices.report_files import kept_false_positives
        from hibug_core.tasks import task_of

        # 1. the slices, and what else the split says: the tags' trust, the slices it barely shows, false positives
        report = self.report(project)
        warning = self.tag_warning(project, report)
        predicted = _unseen(project, report, self.unseen, self.unseen_count, self) if self.unseen else None
        apart = (kept_false_positives(project, report.model, split=self.split, config=self.slice_config(),
                                      tags=self.tags) if report.false_positives() else None)
        # 2. the file
        if self.output:
            table = report.exported()
            table.to_json(self.output, orient="records", indent=2) if self.output.endswith(".json") else \
                write_csv(table, self.output, index=True)
        # 3. the lines
        figure = task_of(project).nouns.figure
        lines = [f"{rank + 1:>3}. {row['description']:<50} n={row['count']:<5} {figure} {row['score']:6.1%} "
                 f"[{row['score_low']:.0%}, {row['score_high']:.0%}] q={row['q_value']:.1e}  {row['bug_type']}: "
                 f"{row['reason']}{_precision_note(row)}" for rank, row in report.slices.head(self.top).iterrows()]
        lines += [line for line in (report.empty_verdict(), apart.headline() if apart is not None else None) if line]
        rare = report.rare_classes[report.rare_classes["rare"]]
        if len(rare):
            lines.append("rare classes in training: " + ", ".join(
                f"{c} ({n})" for c, n in zip(rare["class"], rare["train_count"])))
        if predicted is not None:
            said, rows, _ = _unseen_said(predicted, self.unseen, report)
            lines += [f"\nunseen slices predicted by {self.unseen}: {len(predicted)} (checked on the pool and the "
                      f"test split; unseen: fewer than {report.config.min_support} in {report.split})", *rows, said]
        return Result(report.headline(task_of(project).nouns), {"slices": len(report.slices)}, lines,
                      warning=warning, summary_first=True)


def _precision_note(row) -> str:
    if not row["tag_checked"]:
        return ""
    note = f" (tags right on {row['tag_precision']:.0%} of {row['tag_checked']:,} checked)"
    return note if row["trusted"] else f" UNTRUSTED TAGS{note}"


class PredictUnseen(Operation, _SliceSearch, LLMSettings):
    kind: ClassVar[str] = "unseen slices"
    summary: ClassVar[str] = ("predict the slices the split barely shows (HiBug2), each checked on the pool and the "
                              "test split")
    background: ClassVar[bool] = True  # it may ask a language model: never in a page's process
    method: Annotated[str, OneOf(UNSEEN_METHODS)] = Field("substitution", description=UNSEEN_METHODS.help_text())
    count: int = Field(10, ge=1, le=50, description="slices the language model is asked for")

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        progress("finding the error slices", 0, 2)
        report = self.report(project)
        progress(f"predicting unseen slices ({self.method})", 1, 2)
        predicted = _unseen(project, report, self.method, self.count, self)
        said, lines, measured = _unseen_said(predicted, self.method, report)
        table = json.loads(predicted.drop(columns=["definition"]).to_json(orient="records"))
        # JSON for the job: numbers as floats, a NaN (nothing scored) as null
        measured = {k: None if isinstance(v, float) and math.isnan(v) else v if isinstance(v, (str, int))
                    else float(v) for k, v in measured.items()}
        return Result(said, {"method": self.method, "table": table, "dropped": predicted.attrs.get("dropped", []),
                             "measured": measured}, lines, summary_first=True)


class _ComparedSlices(BaseModel):
    """What two or more models are compared on: the split, the slices (their depth, support, tags) and the test."""

    split: str = Field("val", min_length=1, description="labelled split the models are compared on")
    max_depth: Annotated[int, Depth] = configured(COMPARED_SLICES, "max_depth")
    min_support: Annotated[int, Support] = configured(COMPARED_SLICES, "min_support")
    attributes: Annotated[list[str] | None, Cli(comma=True)] = Field(
        None, description="comma-separated attributes to slice by (default: every tagged one)")
    by_class: bool = Field(SliceConfig.by_class, description="slice by the class too")
    tags: Tags = Field("in force", description="tag source (see `hibug slices --help`)")
    alpha: float = configured(CompareConfig, "alpha")

    def slice_config(self) -> SliceConfig:
        return SliceConfig(max_depth=self.max_depth, min_support=self.min_support, by_class=self.by_class)

    def comparison(self, project, models: list[str], progress=no_progress):
        from hibug_core.slices.kept_comparisons import kept_comparison

        return kept_comparison(project, models, split=self.split, slices=self.slice_config(),
                               config=self.compare_config(), attributes=self.attributes, tags=self.tags,
                               progress=progress)

    def is_kept(self, project, models: list[str]) -> bool:
        """Whether the project's files hold this comparison of `models` for the project's current state."""
        from hibug_core.slices.kept_comparisons import is_kept

        return is_kept(project, models, split=self.split, slices=self.slice_config(), config=self.compare_config(),
                       attributes=self.attributes, tags=self.tags)


def _line(row) -> str:
    warning = "(untrusted tags) " if row.get("tag_warning") else ""
    return (f"{warning + row['description']:<55} n={int(row['count']):<6} {row['baseline_score']:6.1%} -> "
            f"{row['candidate_score']:6.1%} ({100 * row['difference']:+5.1f} pts) q={row['q_value']:.1e}")


class CompareModels(Operation, _ComparedSlices):
    kind: ClassVar[str] = "compare"
    summary: ClassVar[str] = ("compare models slice by slice on the samples they share: what got better or worse than "
                              "the baseline, with a paired test and q-values")
    writes: ClassVar[bool] = False
    # A first comparison of ten million objects takes most of a minute: the dashboard makes it as a job (kept in the
    # project's files, which the page then reads) rather than in a page's run.
    background: ClassVar[bool] = True
    models: Annotated[list[str], Cli(comma=True)] = Field(
        min_length=2, description="comma-separated model names, the baseline first (see `hibug info`)")
    top: int = Field(20, ge=1, description="slices shown per candidate")
    output: str | None = Field(None, description="also write the comparison to this .html, .md or .csv file")

    def compare_config(self) -> CompareConfig:
        return CompareConfig(alpha=self.alpha)

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.slices.compare_files import write_comparison

        comparison = self.comparison(project, self.models, progress)
        lines = []
        for _, row in comparison.overall.iterrows():
            change = "" if row["model"] == comparison.baseline else \
                f" ({100 * row['difference']:+.1f} pts, p={row['p_value']:.1e}: {row['change']})"
            lines.append(f"  {row['model']:<30} {row['score']:.1%}{change}; {int(row['error_slices']):,} error slices "
                         f"at C = {comparison.config.error_gap:g}")
        for candidate in comparison.candidates:
            counts = comparison.change_counts(candidate)
            lines.append(f"\n{candidate} against {comparison.baseline}: {counts['worse']} slices worse, "
                         f"{counts['better']} better, of {counts['compared']:,} compared")
            listed = comparison.changes(candidate)
            lines += [f"  {row['change']:<12} {_line(row)}" for _, row in listed[listed["kind"] == "class"].iterrows()]
            lines += [f"  {row['change']:<12} {_line(row)}"
                      for _, row in listed[listed["kind"] == "slice"].head(self.top).iterrows()]
            repeats = counts["repeats"]
            if repeats:
                lines.append(f"  ... and {repeats} more that repeat these (the same samples named by other tags)")
        if len(comparison.candidates) > 1:
            lines.append("\nfailure IoU between models: " + "; ".join(
                f"{r['model_a']} & {r['model_b']} {r['iou']:.2f}" for _, r in comparison.failure_iou.iterrows()))
            lines.append(f"overlap of their worst {comparison.config.worst_share:.0%} of slices (Jaccard): "
                         + "; ".join(f"{r['model_a']} & {r['model_b']} {r['jaccard']:.2f}"
                                     for _, r in comparison.worst_overlap.iterrows()))
        if self.output:
            path = write_comparison(comparison, self.output, f"{project.name}: {', '.join(self.models)}", self.top)
            lines.append(f"written to {path}")
        return Result(f"{comparison.shared:,} shared labelled '{self.split}' samples; {comparison.test}, "
                      f"q-values over the slices compared (significant at {self.alpha:g})",
                      {"models": list(self.models)}, lines, summary_first=True)


class Check(Operation, _ComparedSlices):
    kind: ClassVar[str] = "check"
    summary: ClassVar[str] = ("a gate for CI: exit 1 when the candidate model is significantly worse than the baseline "
                              "by more than --max-drop overall, on a class or on a slice; 0 otherwise; 2 for bad input")
    writes: ClassVar[bool] = False
    baseline: str = Field(min_length=1, description="the model to hold the line (e.g. the main branch's)")
    candidate: str = Field(min_length=1, description="the model to check (e.g. the pull request's)")
    max_drop: float = configured(CompareConfig, "max_drop")
    min_count: int | None = Field(None, ge=1, description="check slices of at least this many shared samples "
                                                          "(default: --support)")
    junit: str | None = Field(None, description="write JUnit XML here: one test case per check")
    markdown: str | None = Field(None, description="write a Markdown summary here (to post on a pull request)")

    def compare_config(self) -> CompareConfig:
        return CompareConfig(alpha=self.alpha, max_drop=self.max_drop, min_count=self.min_count)

    @model_validator(mode="after")
    def _two_models(self):
        if self.baseline == self.candidate:
            raise ValueError(f"baseline and candidate are both '{self.baseline}': name two different models")
        return self

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.safe_files import write_output
        from hibug_core.slices.compare_files import gate_junit, gate_markdown

        comparison = self.comparison(project, [self.baseline, self.candidate])
        checked = comparison.checked(self.candidate)
        failed = checked[checked["failed"]]
        if self.junit:
            write_output(self.junit, gate_junit(comparison, checked, self.candidate), what="the JUnit verdict")
        if self.markdown:
            write_output(self.markdown, gate_markdown(comparison, checked, self.candidate), what="the verdict")
        distinct = failed[failed["repeats"] == ""]  # one row per problem: repeats are the same samples by other tags
        lines = [f"  {row['kind']:<8} {_line(row)}" for _, row in distinct.iterrows()]
        repeats = int((failed["repeats"] != "").sum())
        if repeats:
            lines.append(f"  ... and {repeats} more slices whose drop is that of one above (the same samples named by "
                         "other tags); every one is in --junit and --markdown")
        verdict = (f"FAILED: {len(distinct)} significant drop(s) over {100 * self.max_drop:g} points" if len(failed)
                   else "passed")
        return Result(f"{self.candidate} against {self.baseline} on {self.split}: {len(checked)} checks on "
                      f"{comparison.shared:,} shared samples ({comparison.test}); {verdict}",
                      {"failed": len(distinct)}, lines, exit_code=1 if len(failed) else 0, summary_first=True)


class Report(Operation):
    kind: ClassVar[str] = "report"
    summary: ClassVar[str] = ("export the findings (error slices, evidence, thumbnails, reviews) as a self-contained "
                              "HTML page, Markdown or CSV")
    writes: ClassVar[bool] = False
    output: str = Field(min_length=1, description="findings.html, findings.md or findings.csv")
    model: ModelName = None
    split: str = Field("val", description="labelled split the slices are found on")
    top: int = Field(20, ge=1, description="error slices in the report")

    @model_validator(mode="after")
    def _known_format(self):
        if not self.output.lower().endswith((".html", ".md", ".csv")):
            raise ValueError(f"output = {self.output!r}: write the report to a .html, .md or .csv file")
        return self

    def run(self, project, *, progress=no_progress, author: str | None = None) -> Result:
        from hibug_core.review.findings import write_report

        report, table = write_report(project, self.output, model=self.model, split=self.split, top=self.top)
        return Result(f"{len(table)} error slices of {report.model} on {report.split} written to {self.output}",
                      {"slices": len(table)})
