"""Suites: named sets of fusion studies (model x dataset x block x schedule x seed), each
(model, dataset, schedule) one task, read from TOML. `figure12` is built in
(`studies/suite/figure12.toml`, with the published cycle counts beside the cases).

A suite file:

    [suite]
    name = "mine"
    schedules = ["unfused", "partial", "full"]   # presets or schedule strings (the first is the baseline)
    seeds = [0]
    max_tokens = 3e9          # sample (or, last resort, estimate) schedules above this many token events

    [[case]]
    model = "gcn"
    datasets = ["karate", "cora"]
    max_tokens = 1e9          # optional, per case
    variants = ["full order=reference",   # optional: schedules also run, beside the suite's (or the
                {schedule = "layer1", label = "only layer 1 fused"}]  # case's) own, a label optional;
                                          # the results page lists them under its table
    large_memory = true       # optional: on dask, its tasks run one at a time on one worker, guarded by
                              # what the machine has free rather than the worker's share

    [[case]]
    model = "gpt3-bigbird"
    datasets = ["tiny"]
    blocks = [16, 32]

    [[published_counts]]      # the reference's Figure 14: FLOPs and memory accesses of a case's
    model = "gcn"             # schedules (or variants, by schedule or label), [FLOPs, memory];
    dataset = "karate"        # the results page sets each over the first (the baseline) beside ours
    unfused = [1000, 2000]
    "only layer 1 fused" = [900, 1500]

    [[note]]                  # why rows differ from the published ones: numbered on the chart
    models = ["gcn"]
    datasets = ["karate"]     # optional: all the model's rows
    text = "..."

    >>> suite = load_suite("figure12")
    >>> len(suite.tasks()), suite.tasks()[0].key
    (76, ('model:gcn', 'unfused', 'dataset=synthetic:mag', 0))
    >>> [t.schedule for t in suite.tasks()[:4]]
    ['unfused', 'partial', 'full', 'full order=reference']
    >>> suite.schedule_labels["layer1"], list(suite.published_counts[("gcn", "cora_ml")])
    ('only layer 1 fused', ['unfused', 'full', 'layer1', 'layer2', 'partial'])
    >>> suite.published[("gcn", "cora", None)]["partial"]
    29997611
    >>> suite.notes[0].models, suite.notes[0].text[:24]
    (('sae',), 'SAE full fusion wins her')
"""
from __future__ import annotations

import importlib.resources
import os
import tomllib
from dataclasses import dataclass, field

from ...errors import UserError
from ...files import read_file
from ...models.resolve import BLOCKED_MODELS, ModelRef, built_in
from .. import MAX_TOKENS

BUILT_IN = ("figure12",)
SUITE_KEYS = {"name": str, "description": str, "schedules": list, "seeds": list, "max_tokens": (int, float),
              "engine": str}
CASE_KEYS = {"model": str, "datasets": list, "blocks": list, "max_tokens": (int, float), "scale": (int, float),
             "seeds": list, "schedules": list, "variants": list, "label": str, "large_memory": bool,
             "tiled": bool}
MODEL_NAMES = {"gcn": "GCN", "graphsage": "GraphSAGE", "sae": "SAE", "gpt3-bigbird": "GPT-3 + BigBird"}
NOTE_KEYS = {"models": list, "datasets": list, "text": str}
VARIANT_KEYS = {"schedule": str, "label": str}
PUBLISHED_KEYS = {"model": str, "dataset": str, "block": int, "label": str, "unfused": int, "partial": int,
                  "full": int}


def data_key(dataset: str, block: int | None, tiled: bool, scale: float) -> str:
    """The data point key of the results database: `dataset=cora`, `dataset=small2 block=16`,
    `dataset=small2 block=16 scalar` (a blocked model's presets on scalar streams)."""
    return f"dataset={dataset}" + (f" block={block}" if block else "") + ("" if tiled else " scalar") + \
        (f" scale={scale:g}" if scale != 1.0 else "")


def case_label(model: str, dataset: str, block: int | None, tiled: bool) -> str:
    """A case row as progress lines name it: `gcn cora`, `gpt3-bigbird small2 b16 scalar`."""
    return f"{model} {dataset}" + (f" b{block}" if block else "") + ("" if tiled else " scalar")


@dataclass(frozen=True)
class SuiteTask:
    """One schedule of one model on one dataset: a row of the suite."""

    model: str
    dataset: str
    schedule: str  # a preset name or a schedule string
    seed: int = 0
    block: int | None = None
    scale: float = 1.0
    max_tokens: float = MAX_TOKENS
    engine: str = "fast"
    baseline: str = "unfused"  # the schedule its ratios are taken against
    large_memory: bool = False  # on dask: one at a time on one worker, guarded by the machine's free memory
    tiled: bool = True  # a blocked model's presets on tiles of its block (False: on scalar streams)

    @property
    def data(self) -> str:
        """The data point key of the results database (`data_key`)."""
        return data_key(self.dataset, self.block, self.tiled, self.scale)

    @property
    def key(self) -> tuple:
        """(program, schedule, data, seed): the row's unique key in the database."""
        return ModelRef("model", self.model).key, self.schedule, self.data, self.seed

    @property
    def case(self) -> tuple:
        """What the task builds: tasks with the same `case` share one built model."""
        return self.model, self.dataset, self.block, self.seed, self.scale, self.tiled

    def label(self) -> str:
        return f"{case_label(self.model, self.dataset, self.block, self.tiled)} {self.schedule}"

    def to_dict(self) -> dict:
        return dict(model=self.model, dataset=self.dataset, schedule=self.schedule, seed=self.seed,
                    block=self.block, scale=self.scale, max_tokens=self.max_tokens, engine=self.engine,
                    baseline=self.baseline, large_memory=self.large_memory, tiled=self.tiled)


@dataclass(frozen=True)
class ChartNote:
    """Why the rows of `models` (all, or those of `datasets`) differ from the published ones:
    numbered on the Figure-12 chart and written below it (`[[note]]` in a suite file)."""

    models: tuple[str, ...]
    text: str
    datasets: tuple[str, ...] = ()


@dataclass
class Suite:
    """A suite: its cases expanded to tasks (cases in file order, schedules innermost), and the
    published cycles to set beside the results, keyed (model, dataset, block)."""

    name: str
    cases: list[dict]
    schedules: list[str] = field(default_factory=lambda: ["unfused", "partial", "full"])
    seeds: list[int] = field(default_factory=lambda: [0])
    max_tokens: float = MAX_TOKENS
    engine: str = "fast"
    description: str = ""
    published: dict = field(default_factory=dict)
    labels: dict = field(default_factory=lambda: {(m, None): name for m, name in MODEL_NAMES.items()})
    # (model, dataset) -> how the page names it; (model, None) -> the model's name
    notes: list[ChartNote] = field(default_factory=list)
    schedule_labels: dict = field(default_factory=dict)  # a variant's schedule -> its label, where it has one
    published_counts: dict = field(default_factory=dict)
    # (model, dataset) -> {schedule: (FLOPs, memory accesses)}, the baseline first (`[[published_counts]]`)

    def schedule_label(self, schedule: str) -> str:
        """How the page names a schedule: its label, else the schedule itself."""
        return self.schedule_labels.get(schedule, schedule)

    def tasks(self) -> list[SuiteTask]:
        out = []
        for case in self.cases:
            schedules = list(case.get("schedules", self.schedules)) + list(case.get("variants", []))
            for dataset in case["datasets"]:
                for block in case.get("blocks") or [None]:
                    for seed in case.get("seeds", self.seeds):
                        out += [SuiteTask(case["model"], str(dataset), str(s), int(seed), block,
                                          float(case.get("scale", 1.0)), float(case.get("max_tokens", self.max_tokens)),
                                          self.engine, str(schedules[0]), bool(case.get("large_memory", False)),
                                          bool(case.get("tiled", True)))
                                for s in schedules]
        return out


def _check(table: dict, keys: dict, where: str) -> None:
    for key, value in table.items():
        if key not in keys:
            raise UserError(f"unknown key {key!r} in {where}", where, f"known keys: {', '.join(sorted(keys))}")
        if not isinstance(value, keys[key]) or (isinstance(value, bool) and keys[key] is not bool):
            raise UserError(f"{key} in {where} has the wrong type ({type(value).__name__})", where)


def _case(table: dict, where: str) -> dict:
    _check(table, CASE_KEYS, where)
    built_in(table.get("model"), where)
    if not table.get("datasets"):
        raise UserError(f"no datasets in {where}", where, 'e.g. datasets = ["karate"]')
    variants, labels = [], {}
    for variant in table.get("variants", []):
        if isinstance(variant, dict):  # {schedule = "...", label = "..."}
            _check(variant, VARIANT_KEYS, f"{where} variant {len(variants) + 1}")
            if "label" in variant:
                if not variant["label"].strip():
                    raise UserError(f"variant {len(variants) + 1} in {where} has an empty label", where)
                labels[variant.get("schedule")] = variant["label"]
            variant = variant.get("schedule")
        if not isinstance(variant, str) or not variant.strip():
            raise UserError(f"variant {variant!r} in {where} is not a schedule", where,
                            'e.g. variants = ["full order=reference", {schedule = "layer1", label = "layer 1"}]')
        variants.append(variant)
    if "variants" in table:
        table = {**table, "variants": variants, "variant_labels": labels}
    for block in table.get("blocks", []):
        if not isinstance(block, int) or isinstance(block, bool) or block < 1:
            raise UserError(f"block {block!r} in {where} is not a positive whole number", where)
    if table.get("max_tokens", 1) <= 0 or table.get("scale", 1) <= 0:
        raise UserError(f"max_tokens and scale in {where} must be positive", where)
    if "tiled" in table and table["model"] not in BLOCKED_MODELS:
        raise UserError(f"tiled in {where}: {table['model']} has no tiles to turn off", where,
                        f"only {', '.join(BLOCKED_MODELS)} runs on tiles")
    return table


def parse_suite(text: str, where: str) -> Suite:
    """A suite from TOML text (`where` names it in errors)."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{where} is not valid TOML: {err}", where) from None
    unknown = sorted(set(data) - {"suite", "case", "published", "published_counts", "note"})
    if unknown:
        raise UserError(f"unknown table {unknown[0]!r} in {where}", where,
                        "use [suite], [[case]], [[published]], [[published_counts]] and [[note]]")
    head = data.get("suite", {})
    _check(head, SUITE_KEYS, f"{where} [suite]")
    cases = [_case(c, f"{where} [[case]] {n + 1}") for n, c in enumerate(data.get("case", []))]
    if not cases:
        raise UserError(f"{where} has no [[case]]", where, 'add e.g. [[case]] model = "gcn" datasets = ["karate"]')
    seeds = head.get("seeds", [0])
    if any(not isinstance(s, int) or isinstance(s, bool) or s < 0 for s in seeds) or not seeds:
        raise UserError(f"seeds in {where} must be whole numbers >= 0", where)
    if not head.get("schedules", ["unfused"]) or head.get("max_tokens", 1) <= 0:
        raise UserError(f"schedules in {where} must not be empty, max_tokens positive", where)
    if head.get("engine", "fast") not in ("fast", "oracle"):
        raise UserError(f"unknown engine {head['engine']!r} in {where}", where, "use fast or oracle")
    schedules = head.get("schedules", ["unfused", "partial", "full"])
    tiling: dict[tuple, bool] = {}
    for n, case in enumerate(cases):
        for point in ((case["model"], d, b) for d in case["datasets"] for b in case.get("blocks") or [None]):
            if tiling.setdefault(point, case.get("tiled", True)) != case.get("tiled", True):
                raise UserError(f"{where} [[case]] {n + 1} runs {point[0]} {point[1]} block {point[2]} both tiled "
                                "and scalar", where, "the results page has one row a block: use two suites")
        again = set(case.get("variants", [])) & set(case.get("schedules", schedules))
        if again:
            raise UserError(f"variant {sorted(again)[0]!r} of {where} [[case]] {n + 1} is one of its schedules",
                            where, "list a schedule once: a variant runs beside the schedules")
    published, labels = {}, {(m, None): name for m, name in MODEL_NAMES.items()}
    for n, entry in enumerate(data.get("published", [])):
        _check(entry, PUBLISHED_KEYS, f"{where} [[published]] {n + 1}")
        key = (entry["model"], entry["dataset"], entry.get("block"))
        published[key] = {k: entry[k] for k in ("unfused", "partial", "full") if k in entry}
        if "label" in entry:
            labels[key[:2]] = entry["label"]
    schedule_labels: dict[str, str] = {}
    for n, case in enumerate(cases):
        if "label" in case:
            labels.update({(case["model"], d): case["label"] for d in case["datasets"]})
        for schedule, label in case.get("variant_labels", {}).items():
            if schedule_labels.setdefault(schedule, label) != label:
                raise UserError(f"variant {schedule!r} of {where} [[case]] {n + 1} is labelled {label!r}, "
                                f"elsewhere {schedule_labels[schedule]!r}", where, "give a schedule one label")
    name = head.get("name") or os.path.splitext(os.path.basename(where))[0]
    suite = Suite(name, cases, [str(s) for s in schedules],
                  [int(s) for s in seeds], float(head.get("max_tokens", MAX_TOKENS)), head.get("engine", "fast"),
                  head.get("description", ""), published, labels, _notes(data.get("note", []), where),
                  schedule_labels)
    suite.published_counts = _published_counts(data.get("published_counts", []), suite, where)
    return suite


def _published_counts(tables: list, suite: Suite, where: str) -> dict:
    """The `[[published_counts]]` tables: per (model, dataset), each schedule's published
    [FLOPs, memory accesses], keyed by the schedule (a variant may be named by its label), the
    case's baseline first, then in the table's order. Each must name a case and schedules it runs."""
    out: dict[tuple, dict] = {}
    for n, table in enumerate(tables):
        at = f"{where} [[published_counts]] {n + 1}"
        model, dataset = table.get("model"), table.get("dataset")
        if not isinstance(model, str) or not isinstance(dataset, str):
            raise UserError(f"{at} needs a model and a dataset", where, 'e.g. model = "gcn" dataset = "cora_ml"')
        tasks = {t.schedule: t for t in suite.tasks() if (t.model, t.dataset, t.block) == (model, dataset, None)}
        if not tasks:
            raise UserError(f"{at}: no case runs {model} on {dataset}", where)
        by_label = {suite.schedule_label(s): s for s in tasks}
        counts = {}
        for key, value in table.items():
            if key in ("model", "dataset"):
                continue
            schedule = key if key in tasks else by_label.get(key)
            if schedule is None:
                raise UserError(f"{at}: {key!r} is not a schedule or variant of that case", where,
                                f"its schedules: {', '.join(map(repr, by_label))}")
            if not (isinstance(value, list) and len(value) == 2 and all(
                    isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in value)):
                raise UserError(f"{at}: {key} must be [FLOPs, memory accesses], two positive numbers", where)
            counts[schedule] = (value[0], value[1])
        baseline = next(iter(tasks.values())).baseline
        if baseline not in counts:
            raise UserError(f"{at} has no counts for the baseline {baseline!r}", where,
                            "the page sets every count over the baseline's")
        out[(model, dataset)] = {baseline: counts.pop(baseline), **counts}
    return out


def _notes(tables: list, where: str) -> list[ChartNote]:
    """The `[[note]]` tables: models, their datasets (optional: all), the text."""
    notes = []
    for n, table in enumerate(tables):
        _check(table, NOTE_KEYS, f"{where} [[note]] {n + 1}")
        if not table.get("models") or not table.get("text"):
            raise UserError(f"{where} [[note]] {n + 1} needs models and a text", where,
                            'e.g. models = ["gcn"] text = "why it differs"')
        notes.append(ChartNote(tuple(str(m) for m in table["models"]), table["text"],
                               tuple(str(d) for d in table.get("datasets", []))))
    return notes


def load_suite(name: str) -> Suite:
    """A built-in suite by name (`figure12`) or a suite TOML file."""
    if name in BUILT_IN:
        text = importlib.resources.files(__package__).joinpath(f"{name}.toml").read_text("utf-8")
        return parse_suite(text, f"{name}.toml")
    if not name.endswith(".toml"):
        raise UserError(f"no built-in suite {name!r}", "study suite",
                        f"built-in suites: {', '.join(BUILT_IN)}; or give a FILE.toml")
    try:
        text = read_file(name, "study suite").decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{name} is not UTF-8 text (offset {err.start})", "study suite") from None
    return parse_suite(text, name)
