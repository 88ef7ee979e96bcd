"""One typed operation per use case: validation that names the field, CLI options and page forms that cannot drift
from the operations, registries that feed both, the one cache helper and the one LLM call path."""
from __future__ import annotations

import threading
import time

import pytest

from hibug_core.cache import BoundedCache
from hibug_core.cli import INDEX, build_parser, commands
from hibug_core.cli.options import operation_from_args, option_names
from hibug_core.embeddings.registry import ENCODERS
from hibug_core.llm.client import LLMConfig, LLMUnavailable, ask, make_client, parse_json_reply
from hibug_core.operations import (
    OPERATIONS,
    FindSlices,
    Operation,
    OperationError,
    Repair,
    Report,
    Select,
    Tag,
    background_kinds,
    operation,
)
from hibug_core.registry import Registry, UnknownChoice
from hibug_core.repair.selection import SELECTION_METHODS

from fake_openai import FakeOpenAIServer
from page_support import open_page

REQUIRED = {"teach": {"attribute": "color"}, "failure search": {"label": "triangle"},
            "report": {"output": "findings.html"}, "predict": {"model": "timm:resnet50:/models/birds.pth"},
            "compare": {"models": ["main", "pr-12"]}, "check": {"baseline": "main", "candidate": "pr-12"}}
# CLI options that are not fields: they say how to read or show the operation's input or output
CLI_EXTRAS = {"teach": {"examples"}, "generate": {"dry_run"}}
# command -> operation of the commands built from one
OPERATION_COMMANDS = {"compare": "compare", "check": "check", "embed": "embed", "predict": "predict", "tag": "tag",
                      "teach": "teach", "slices": "slices", "report": "report",
                      "select": "select", "repair": "repair", "generate": "generate",
                      "failure-search": "failure search"}


def subparser(parser, *path):
    for name in path:
        action = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        parser = action.choices[name]
    return parser


def dests(parser) -> set[str]:
    return {a.dest for a in parser._actions if a.dest not in ("help", "project")
            and a.__class__.__name__ != "_SubParsersAction"}


def test_every_operation_builds_with_its_defaults_and_lists_in_one_place():
    built_in = [kind for kind, op in OPERATIONS.items() if op.__module__.startswith("hibug_core.operations.")]
    assert built_in == ["embed", "tag", "teach", "map", "predict", "propose", "suggest tags", "slices",
                        "unseen slices", "compare", "check", "select", "repair", "generate", "failure search", "report"]
    for kind in built_in:
        op = OPERATIONS[kind]
        built = op.build(REQUIRED.get(kind, {}))
        assert built.kind == kind and op.summary
        assert op.build(built.params()) == built  # what a job stores builds the same operation again
    # every operation runs itself; the long ones are the background jobs
    assert all(OPERATIONS[kind].run is not Operation.run for kind in built_in)
    assert set(background_kinds()) >= {"embed", "tag", "teach", "map", "predict", "unseen slices", "repair",
                                       "generate", "failure search"}


@pytest.mark.parametrize("op, params, message", [
    (FindSlices, {"rank_by": "score"}, "slices: rank_by = 'score': not allowed; use one of: confident_gap: the overall "
                                       "score minus the upper end of the slice's interval"),
    (FindSlices, {"max_depth": 7}, "slices: max_depth = 7: Input should be less than or equal to 4"),
    (Repair, {"budget": 0, "retrain": "distill"}, "repair: budget = 0: a count must be 1 or more, not 0; retrain = "
                                                  "'distill': not allowed; use one of: fine-tune: "),
    (Repair, {"seeds": []}, "repair: seeds = []: List should have at least 1 item after validation, not 0"),
    (Tag, {"encoder": "clip"}, "tag: encoder = 'clip': not allowed; use one of: conse: "),
    (Tag, {"encoders": "conse"}, "tag: encoders: Extra inputs are not permitted"),
    (Report, {"output": "findings.pdf"}, "report: output = 'findings.pdf': write the report to a .html, .md or .csv "
                                         "file"),
    (operation("failure search"), {}, "failure search: label: Field required"),
    (operation("failure search"), {"label": "triangle", "caption_failures": False, "typed_captions": [" "]},
     "failure search: typed_captions: type a caption to test (--caption), or let the search caption the failures"),
    (operation("compare"), {"models": ["main"]}, "compare: models = ['main']: List should have at least 2 items"),
    (operation("check"), {"baseline": "main", "candidate": "main", "max_drop": 0.1},
     "check: baseline and candidate are both 'main': name two different models"),
])
def test_bad_parameters_are_refused_naming_the_field(op, params, message):
    with pytest.raises(OperationError) as refused:
        op.build(params)
    assert str(refused.value).startswith(message)


def test_choices_come_from_the_registries_and_test_only_entries_are_accepted_but_not_offered():
    assert Repair.choices("method") == SELECTION_METHODS.names() == ["random", "uncertainty", "hibug", "hibug2",
                                                                      "hibug rule", "margin", "coreset", "badge",
                                                                      "expected failures"]
    assert Repair.choices("baseline") == [*SELECTION_METHODS.names(), "none"]
    assert Tag.choices("encoder") == ENCODERS.names() == ["conse"]
    assert Tag.build(encoder="tiny-open_clip").encoder == "tiny-open_clip"  # hidden, yet a valid spec
    assert Tag.build(encoder="open_clip:ViT-B-32:/models/clip.bin").encoder.startswith("open_clip:")
    with pytest.raises(OperationError, match="encoder = 'open_clip:'"):
        Tag.build(encoder="open_clip:")  # a family needs its argument


def test_a_registry_holds_name_help_and_constructor_together():
    colours = Registry("colour")
    colours.add("red", "warm", lambda: "#f00")

    @colours.register("named", "any CSS name", form="named:<name>")
    def named(argument):
        return argument.upper()

    colours.add("test-grey", "tests only", lambda: "#888", hidden=True)
    assert colours.names() == ["red"] and colours.names(hidden=True) == ["red", "test-grey"]
    assert colours.build("red") == "#f00" and colours.build("named:teal") == "TEAL"
    assert colours.help_text() == "red: warm; named:<name>: any CSS name"
    with pytest.raises(UnknownChoice, match="unknown colour 'blue'; use one of: red: warm; named:<name>"):
        colours.get("blue")
    with pytest.raises(ValueError, match="registered twice"):
        colours.add("red", "again")


def test_an_entry_says_what_it_needs_so_pages_ask_it_not_its_name(tmp_path):
    from hibug_core.repair.generators import GENERATORS, SHAPE_RENDERER

    assert GENERATORS.missing(SHAPE_RENDERER) is None and GENERATORS.get(SHAPE_RENDERER).secret is None
    assert GENERATORS.get("openai:gpt-image-1").secret == "OPENAI_API_KEY"
    assert GENERATORS.missing("diffusers:tiny-random") is None
    missing = GENERATORS.missing(f"diffusers:{tmp_path / 'no-such-pipeline'}")
    assert missing and "huggingface-cli download" in missing
    colours = Registry("colour")
    colours.add("web", "needs a key", secret="COLOUR_KEY", missing=lambda argument: None if argument else "name it")
    assert colours.get("web").secret == "COLOUR_KEY" and colours.missing("web") == "name it"


@pytest.mark.parametrize("command", list(OPERATION_COMMANDS))
def test_cli_options_are_the_operations_fields_with_the_same_defaults(command):
    op = operation(OPERATION_COMMANDS[command])
    parser = subparser(build_parser(), command)
    expected = {name for name in option_names(op)} | CLI_EXTRAS.get(op.kind, set())
    assert dests(parser) == expected
    required = {"teach": ["color", "--examples", "e.csv"], "failure-search": ["--label", "triangle"],
                "report": ["--output", "findings.html"],
                "predict": ["--model", "timm:resnet50:/models/birds.pth"], "compare": ["--models", "main,pr-12"],
                "check": ["--baseline", "main", "--candidate", "pr-12"]}.get(command, [])
    args = build_parser().parse_args([command, "PROJECT", *required])
    assert operation_from_args(op, args) == op.build(REQUIRED.get(op.kind, {}))


def test_attribute_subcommands_take_the_proposal_operations_fields():
    for action, kind in (("propose", "propose"), ("suggest-tags", "suggest tags")):
        parser = subparser(build_parser(), "attributes", action)
        assert dests(parser) == set(option_names(operation(kind)))


def test_a_command_imports_only_its_own_module(tmp_path):
    import subprocess
    import sys

    probe = ("import sys; from hibug_core.cli import main; main(['info', sys.argv[1]]); "
             "print(sorted(m for m in sys.modules if m.startswith('hibug_core.cli.')))")
    out = subprocess.run([sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True).stdout
    loaded = "['hibug_core.cli.command', 'hibug_core.cli.help_text', 'hibug_core.cli.projects']"
    assert out.strip().splitlines()[-1] == loaded
    assert set(INDEX.values()) == {"projects", "tagging", "attributes", "slices", "compare", "repair"}
    assert list(INDEX) == ["new", "import", "record", "info", "remove", "serve", "mcp", "demo", "embed", "predict",
                           "tag", "tags", "teach", "attributes", "slices", "report", "bench", "compare", "check",
                           "select", "repair", "generate", "failure-search"]
    for name, module in INDEX.items():
        assert name in commands(module)


def test_the_bounded_cache_keeps_the_newest_and_computes_once():
    cache = BoundedCache("test numbers", max_items=2)
    calls = []

    def make(value):
        def build():
            calls.append(value)
            time.sleep(0.05)
            return value * 10
        return build

    threads = [threading.Thread(target=cache.get_or_make, args=("a", make(1))) for _ in range(4)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert calls == [1]  # four callers at once: computed once
    assert cache.get_or_make("b", make(2)) == 20 and cache.get_or_make("a", make(9)) == 10  # "a" used last
    cache.get_or_make("c", make(3))  # over the bound: "b", the least recently used, goes
    assert "b" not in cache and "a" in cache and "c" in cache and len(cache) == 2
    with pytest.raises(ValueError, match="exists already"):
        BoundedCache("test numbers", max_items=1)


def test_deeply_nested_json_is_a_readable_refusal_not_a_crash():
    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json_reply("[" * 100_000 + "]" * 100_000)


def test_a_key_the_server_echoes_back_never_reaches_the_message(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-123456")
    with FakeOpenAIServer(mode="bad_key") as server:
        config = LLMConfig(base_url=server.url, model="fake")
        with pytest.raises(LLMUnavailable) as refused:
            ask(make_client(config), config, [{"role": "user", "content": "hi"}], parse=str, format_hint="")
    message = str(refused.value)
    assert message.startswith("fake at http://127.0.0.1") and "answered HTTP 401" in message
    assert "secret" not in message and "Incorrect API key provided: [hidden]" in message


def test_the_llm_model_of_the_environment_is_used_when_a_page_leaves_it_empty(monkeypatch, colour_project):
    """The Tagging page used to fill in "gpt-4o-mini", silently overriding HIBUG_LLM_MODEL."""
    from hibug_core.jobs.store import jobs

    monkeypatch.setenv("HIBUG_LLM_MODEL", "team-vlm")
    at = open_page(monkeypatch, "pages/2_Tagging.py", colour_project.folder, user="ana", timeout=60)
    assert at.text_input(key="tag_run_llm_model").value == ""
    assert at.text_input(key="tag_run_llm_model").placeholder.startswith("team-vlm")
    at.radio(key="tag_run_backend").set_value("multimodal LLM")
    at.text_input(key="tag_run_llm_url").set_value("http://127.0.0.1:9/v1")
    at.button(key="tag_run_submit").click().run()
    job = jobs(colour_project, "tag")[0]
    assert job.params["llm"] is True and job.params["llm_model"] is None
    assert Tag.build(job.params).llm_config().model == "team-vlm"


def test_the_attributes_page_asks_the_environments_model(monkeypatch, colour_project):
    monkeypatch.setenv("HIBUG_LLM_MODEL", "team-llm")
    with FakeOpenAIServer() as server:
        server.text_reply = '{"attributes": []}'
        at = open_page(monkeypatch, "pages/1_Attributes.py", colour_project.folder, user="ana", timeout=60)
        at.radio(key="propose_source").set_value("language model (hibug2 flow)")
        at.text_input(key="propose_llm_url").set_value(server.url)
        at.button(key="propose_submit").click().run()
    assert server.requests and {r["model"] for r in server.requests} == {"team-llm"}


def test_the_pages_forms_offer_what_the_operations_allow(monkeypatch, demo_project):
    at = open_page(monkeypatch, "pages/5_Repair.py", demo_project, user="ana", timeout=120)
    assert not at.exception
    assert at.selectbox(key="repair_select_method").options == Select.choices("method")
    assert at.selectbox(key="repair_retrain_method").options == Repair.choices("method")
    assert at.selectbox(key="repair_retrain_baseline").options == Repair.choices("baseline")
    assert at.selectbox(key="repair_retrain_baseline").value == Repair.default("baseline")
    assert at.selectbox(key="repair_retrain_how").options == Repair.choices("retrain")
    assert at.text_input(key="repair_retrain_budget").value == str(Repair.default("budget"))
    assert at.checkbox(key="repair_retrain_control").value is Repair.default("control")
    slices = open_page(monkeypatch, "pages/4_Error_slices.py", demo_project, user="ana", timeout=120)
    rank_by = slices.selectbox(key="slices_rank_by")  # shown with readable names
    assert rank_by.value == FindSlices.default("rank_by") and len(rank_by.options) == len(FindSlices.choices("rank_by"))
    assert slices.number_input(key="slices_depth").value == FindSlices.default("max_depth")
    assert slices.number_input(key="slices_gap").value == FindSlices.default("gap")
