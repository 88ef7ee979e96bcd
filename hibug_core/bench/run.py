"""The planted-bug benchmark end to end: generate problems until enough bugs show, run hibug's pipeline on each
(attributes, tagging, slice search, diagnosis) with every tag source, score it, and keep every figure."""
from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from hibug_core.attributes.library import library_schema
from hibug_core.attributes.measured import measured_attributes
from hibug_core.attributes.schema import AttributeSchema
from hibug_core.bench.build import Realised, build_problem_project, model_probabilities, realised
from hibug_core.bench.contest import contest, embeddings_of, gathered, task_of_report
from hibug_core.bench.peers import SLICE_FINDERS
from hibug_core.bench.problems import (
    HARD,
    IN_TRAINING,
    RARE,
    SHIFT,
    SPURIOUS,
    SplitConfig,
    base_splits,
    candidate_problems,
    hard_cases,
    plant,
    plant_outputs,
    thin_validation,
    unbiased,
)
from hibug_core.bench.ranking import PlantedBug
from hibug_core.bench.scoring import HIBUG2_SEARCH, HIBUG_SEARCH, attribute_matches, hibug_search, score_report
from hibug_core.demo.attributes import TASK, demo_attribute_schema
from hibug_core.demo.easyvqa import SHAPES, ShapeWorld, load_shape_world
from hibug_core.errors import HibugError, check_fields
from hibug_core.llm.client import LLMConfig
from hibug_core.models.zoo.shape_cnn import TrainConfig
from hibug_core.progress import ProgressCallback, no_progress
from hibug_core.registry import LANGUAGE_MODEL, Registry
from hibug_core.slices.report import error_slices
from hibug_core.slices.search import CLASS, SliceConfig
from hibug_core.store.arrays import ArrayStore
from hibug_core.store.attribute_versions import save_schema
from hibug_core.tagging.propose import PROMPTS, propose_with_llm
from hibug_core.tagging.run import tag_project, teach
from hibug_core.tasks import task_of

logger = logging.getLogger(__name__)

@dataclass(frozen=True)
class BenchTagger:
    """How a benchmark tag source gives a problem's project its tags."""

    schema: Callable | None  # (BenchConfig) -> the attributes it slices by; None: the imported true tags, untagged
    taught: bool = False  # its attributes are taught by a few examples per tag (probes), the measured ones measured


def _llm_schema(config: BenchConfig) -> AttributeSchema:
    if config.llm is None:
        raise HibugError("the 'llm' tag source needs a language model: pass --llm (and --llm-base-url, "
                         "--llm-model; the key in OPENAI_API_KEY)")
    proposed = propose_with_llm(TASK, list(SHAPES), config.llm, method=config.llm_method).schema
    extra = tuple(a for a in measured_attributes() if a.name not in proposed.names())
    return proposed.edited(attributes=(*proposed.attributes, *extra))


# Where the slices' tags come from; every one but "truth" runs the automatic, offline pipeline.
TAGGERS = Registry("benchmark tag source")
TAGGERS.add("truth", "the true attributes (imported attr: columns): search and diagnosis errors only",
            lambda: BenchTagger(None))
TAGGERS.add("conse", "the shape world's attributes, conse zero-shot tags, plus the measured attributes",
            lambda: BenchTagger(lambda config: demo_attribute_schema()))
TAGGERS.add("library", "attributes from the built-in library (the offline proposal), conse zero-shot, plus measured",
            lambda: BenchTagger(lambda config: library_schema(TASK, list(SHAPES))))
TAGGERS.add("taught", "the shape world's attributes taught by a few examples per tag (probe on conse features), plus "
            "measured", lambda: BenchTagger(lambda config: demo_attribute_schema(), taught=True))
TAGGERS.add("llm", "attributes a language model proposes for the task (HiBug2's flow, or HiBug's with --llm-method "
            "hibug; once per run), conse zero-shot, "
            "plus measured", lambda: BenchTagger(_llm_schema), needs=(LANGUAGE_MODEL,))
CONTENT_FOLDERS = ("embeddings/", "measures/")  # content-keyed caches shared by every problem's project


@dataclass(frozen=True)
class BenchConfig:
    n_spurious: int = 30
    n_rare: int = 30
    n_shift: int = 0  # distribution shifts (a tag and class fewer in training, not rare)
    n_hard: int = 0  # hard cases of two and three conditions, planted in the outputs of one unbiased model per seed
    seed: int = 0
    taggers: tuple[str, ...] = ("truth", "conse", "library", "taught")
    top_n: int = 10  # Find Attr / Find Tag look at this many top-ranked error slices
    slices: SliceConfig = SliceConfig()  # the settings a user gets by default
    gaps: tuple[float, ...] = (0.1, 0.15, 0.2)  # the C values reported (the main table's is slices.gap)
    parent_alphas: tuple[float, ...] = (0.05, 0.2, 1.0)  # and the parent tests (slices.parent_alpha in the table)
    min_drop: float = 0.2  # a planted bug counts when its part is this much less accurate than its reference
    min_shortcut: float = 0.5  # and, for a spurious correlation, this share of its failures predict the class
    max_candidates: int = 400
    splits: SplitConfig = SplitConfig()
    train: TrainConfig = TrainConfig()
    examples_per_tag: int = 10
    encoder: str = "conse"
    llm: LLMConfig | None = None  # the server the "llm" tag source asks
    llm_method: str = "hibug2"  # ... and whose flow it proposes by: HiBug2's structured one, or HiBug's
    # Shares of the validation split the slices are searched on (HiBug's Table 6), each a seeded draw per problem;
    # whether the bug shows is always judged on the whole split.
    val_shares: tuple[float, ...] = (1.0,)
    # The slice finders compared on every problem and its bug-free twin (hibug_core.bench.peers; () for none), on the
    # slices of the default settings; the peers are the `bench` extra.
    finders: tuple[str, ...] = tuple(SLICE_FINDERS.names())

    def __post_init__(self):
        check_fields(self, {
            "n_spurious": (self.n_spurious >= 0, "0 or more"), "n_rare": (self.n_rare >= 0, "0 or more"),
            "n_shift": (self.n_shift >= 0, "0 or more"), "n_hard": (self.n_hard >= 0, "0 or more"),
            "llm_method": (self.llm_method in PROMPTS, f"one of {', '.join(PROMPTS)}"),
            "top_n": (self.top_n >= 1, "1 or more"),
            "val_shares": (len(self.val_shares) > 0 and all(0 < s <= 1 for s in self.val_shares),
                           "one or more shares in (0, 1]"),
            "finders": (all(f in SLICE_FINDERS for f in self.finders),
                        f"slice finders among {', '.join(SLICE_FINDERS.names())}")})


@dataclass
class BenchResult:
    config: BenchConfig
    rows: pd.DataFrame  # one row per (problem, tagger, gap)
    problems: pd.DataFrame  # every candidate tried, with how its bug showed and whether it was kept
    timings: dict[str, float] = field(default_factory=dict)
    finder_bugs: pd.DataFrame = field(default_factory=pd.DataFrame)  # per (problem, tags, finder, planted bug)
    finder_problems: pd.DataFrame = field(default_factory=pd.DataFrame)  # per (problem or its twin, tags, finder)

    @staticmethod
    def combined(results: dict[int, BenchResult]) -> BenchResult:
        """The results of several seeds as one (each row with its seed; timings summed), scored together."""
        from hibug_core.bench.seeds import stacked

        def of_seeds(name: str) -> pd.DataFrame:
            return stacked({seed: getattr(result, name) for seed, result in results.items()})

        first = next(iter(results.values()))
        timings: dict[str, float] = {}
        for result in results.values():
            for stage, seconds in result.timings.items():
                timings[stage] = timings.get(stage, 0.0) + seconds
        return BenchResult(first.config, of_seeds("rows"), of_seeds("problems"), timings, of_seeds("finder_bugs"),
                           of_seeds("finder_problems"))


def _tag(project, tagger: str, schema: AttributeSchema, config: BenchConfig,
         examples: dict[str, dict[int, str]]) -> None:
    """Give the project the tagger's attributes and tags (one run per attribute, so no hidden truth picks the tags in
    force; the slices are scored with check_tags=False, as for a project without true tags)."""
    save_schema(project, schema, author="hibug bench", note=f"benchmark tag source '{tagger}'")
    if TAGGERS.get(tagger).build().taught:
        measured = [a.name for a in schema.enabled() if a.measured]
        tag_project(project, views=task_of(project).views, encoder=config.encoder, attributes=measured)
        for attribute, chosen in examples.items():
            teach(project, attribute, chosen, encoder=config.encoder, author="hibug bench")
    else:
        tag_project(project, views=task_of(project).views, encoder=config.encoder)


def teaching_examples(project, world: ShapeWorld, config: BenchConfig, seed: int) -> dict[str, dict[int, str]]:
    """A person's examples for teaching: `examples_per_tag` pool images per true tag of each shape-world attribute."""
    rng = np.random.default_rng(seed)
    pool = project.samples()
    pool = pool[pool["split"] == "pool"]
    truth = project.known_tags().reindex(pool.index)
    examples = {}
    for attribute in world.attributes.columns:
        chosen = {}
        for tag, rows in truth.groupby(attribute, observed=True).groups.items():
            if tag == "not visible":
                continue
            picked = rng.choice(np.asarray(rows), size=min(config.examples_per_tag, len(rows)), replace=False)
            chosen.update({int(s): tag for s in picked})
        examples[attribute] = chosen
    return examples


def _score_tagger(project, tagger: str, problem, config: BenchConfig,
                  truth_tags: list[str]) -> tuple[list[dict], object]:
    """Scores of hibug's search at every C and parent test, and of HiBug's rule at the main C; and the report of the
    default settings (config.slices), which the slice finders are handed (None when they are not among those tried)."""
    settings = [(HIBUG2_SEARCH, replace(config.slices, gap=gap, parent_alpha=alpha))
                for gap, alpha in itertools.product(config.gaps, config.parent_alphas)]
    settings.append((HIBUG_SEARCH, hibug_search(config.slices)))
    rows, default = [], None
    for search, slice_config in settings:
        report = error_slices(project, config=slice_config,
                              tags="model" if TAGGERS.get(tagger).build().schema else "imported", check_tags=False)
        if search == HIBUG2_SEARCH and (slice_config.gap, slice_config.parent_test) == (config.slices.gap,
                                                                                        config.slices.parent_test):
            default = report
        vocabulary = dict(zip(report.tags.attributes, report.tags.tags))
        case = problem.failing_part(project.known_tags().reindex(report.evaluation.index))
        scores = score_report(report.slices, vocabulary, problem, truth_tags, config.top_n,
                              case_share=lambda d, case=case, tags=report.tags: float(case[tags.mask(d)].mean()))
        if search == HIBUG_SEARCH:  # HiBug's Table 6 counts these: every slice at or below the overall score
            every = report.every_slice()  # each holds the minimum support
            scores["error_slices"] = int((every["score"] <= report.overall_score).sum())
        top = report.slices.head(1)
        rows.append({"tagger": tagger, "search": search, "gap": slice_config.gap,
                     "parent_alpha": slice_config.parent_test, **scores,
                     "top_slice": top["description"].iat[0] if len(top) else None,
                     "top_bug_type": top["bug_type"].iat[0] if len(top) else None})
    return rows, default


def _run_pipeline(project, problem, world: ShapeWorld, config: BenchConfig, schemas: dict[str, AttributeSchema],
                  timed, contests: list | None) -> list[dict]:
    """Every tag source on one problem's project: its attributes and tags, then slices scored at every setting, and
    every slice finder on the default settings' tags and errors (their rows added to `contests`)."""
    tags_of = {name: sorted(world.attributes[name].unique()) for name in world.attributes.columns}
    examples = teaching_examples(project, world, config, problem.seed)
    rows = []
    for tagger in config.taggers:
        start = time.perf_counter()
        if tagger in schemas:  # not the true tags
            _tag(project, tagger, schemas[tagger], config, examples)
        timed(f"tag: {tagger}", start)
        start = time.perf_counter()
        scored, report = (_score_tagger(project, tagger, problem, config, tags_of[problem.attribute])
                          if problem.bug_type in IN_TRAINING else ([], None))  # HiBug's tables: one attribute's bugs
        rows += scored
        timed(f"slices: {tagger}", start)
        if config.finders and contests is not None:  # on the whole validation split
            start = time.perf_counter()
            contests.append(_contest(project, tagger, problem, config, tags_of, report))
            timed(f"slice finders: {tagger}", start)
    return rows


def planted_bugs(problem) -> list[PlantedBug]:
    """The problem's bug as the one scoring reads it: a spurious correlation lives in its tag (whatever the class), a
    rare case or a shift in its tag and class, a hard case in its conditions."""
    return [PlantedBug(problem.conditions(), problem.bug_type)]


def _contest(project, tagger: str, problem, config: BenchConfig, tags_of: dict[str, list[str]], report=None) -> tuple:
    """Every slice finder on the tags and errors of hibug's default report (`report`, when already made), with the
    encoder's embeddings."""
    if report is None:
        report = error_slices(project, config=config.slices,
                              tags="model" if TAGGERS.get(tagger).build().schema else "imported", check_tags=False)
    vocabulary = dict(zip(report.tags.attributes, report.tags.tags))

    def same(attribute: str, planted: str) -> bool:  # another tag source's name for a planted attribute
        if planted == "shape":
            return attribute in ("shape", CLASS) or attribute_matches(attribute, vocabulary.get(attribute, []),
                                                                      "shape", SHAPES)
        return attribute_matches(attribute, vocabulary.get(attribute, []), planted, tags_of[planted])

    task = task_of_report(report, embeddings_of(project, report, config.encoder))
    return contest(task, planted_bugs(problem), finders=config.finders, same=same, seed=problem.seed,
                   labels={"problem": problem.id, "bug_type": problem.bug_type, "tags": tagger})


def run_benchmark(folder: str | Path, config: BenchConfig = BenchConfig(), *,
                  progress: ProgressCallback = no_progress) -> BenchResult:
    """Generate problems until n_spurious, n_rare and n_shift bugs show, run and score each; projects are kept in
    `folder`/problems (open one with `hibug serve`), caches in `folder`/cache."""
    unknown = [t for t in config.taggers if t not in TAGGERS]
    if unknown:
        raise HibugError(f"unknown tagger(s) {', '.join(unknown)}; choose from {', '.join(TAGGERS.names())}")
    folder = Path(folder)
    cache = folder / "cache"
    content = ArrayStore(cache / "arrays")
    timings: dict[str, float] = {}

    def timed(stage: str, start: float) -> None:
        timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - start

    started = time.perf_counter()
    world = load_shape_world()
    base = base_splits(world, config.splits)
    timed("load images", started)
    made = {t: TAGGERS.get(t).build().schema for t in config.taggers}
    schemas = {t: schema(config) for t, schema in made.items() if schema is not None}
    wanted = {SPURIOUS: config.n_spurious, RARE: config.n_rare, SHIFT: config.n_shift, HARD: config.n_hard}
    kept = dict.fromkeys(wanted, 0)
    tried, rows, contests = [], [], []
    candidates = candidate_problems(world, config.seed)[: config.max_candidates]
    for problem in candidates + (hard_cases(world, config.seed) if config.n_hard else []):
        if kept[problem.bug_type] >= wanted[problem.bug_type]:
            if all(kept[k] >= wanted[k] for k in wanted):
                break
            continue
        start = time.perf_counter()
        trained = unbiased(problem) if problem.bug_type == HARD else problem  # a hard case's model: its seed's
        split = plant(world, base, trained, config.splits)
        probabilities = model_probabilities(world, split, trained, replace(config.train, seed=trained.seed),
                                            cache / "models")
        if problem.bug_type == HARD:
            probabilities = plant_outputs(probabilities, problem, world.attributes)
        outcome: Realised = realised(world, split, problem, probabilities)
        timed("train models", start)
        shows = outcome.shows(config.min_drop, config.min_shortcut, problem.bug_type)
        tried.append({**asdict(problem), **asdict(outcome), "drop": outcome.drop, "kept": shows})
        if not shows:
            continue
        kept[problem.bug_type] += 1
        progress("planted-bug problems", sum(kept.values()), sum(wanted.values()))
        for share in config.val_shares:
            start = time.perf_counter()
            name = problem.id if share >= 1.0 else f"{problem.id}-val{share:g}"
            project = build_problem_project(folder / "problems" / name, world,
                                            thin_validation(split, share, problem.seed), problem, probabilities,
                                            outcome, config.splits)
            timed("import", start)
            try:
                for prefix in CONTENT_FOLDERS:
                    project.arrays.link_from(content, prefix)
                rows += [{"problem": problem.id, "bug_type": problem.bug_type, "attribute": problem.attribute,
                          "tag": problem.tag, "label": problem.label, "strength": problem.strength,
                          "drop": round(outcome.drop, 4), "val_share": share,
                          "val_images": int(project.samples()["split"].eq("val").sum()), **scored}
                         for scored in _run_pipeline(project, problem, world, config, schemas, timed,
                                                     contests if share >= 1.0 else None)]
                for prefix in CONTENT_FOLDERS:
                    content.link_from(project.arrays, prefix)
            finally:
                project.close()
    timings["total"] = time.perf_counter() - started
    if any(kept[k] < wanted[k] for k in wanted):
        logger.warning("only %s bugs showed within %d candidates", kept, config.max_candidates)
    finder_bugs, finder_problems = gathered(contests)
    return BenchResult(config, pd.DataFrame(rows), pd.DataFrame(tried), timings, finder_bugs, finder_problems)
