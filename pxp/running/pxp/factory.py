"""Build the agents an experiment's config names, for one repetition (Run).

machine: `simulated` or `provider:model` (anthropic, openai); checker: `lexical` or
`provider:model`, used as AGREE by both the machine and the human proxy as in the
papers. The task (prompts, labels, few-shot examples, MATCH kind) comes from the
dataset: RAD, DRUG, or the custom task config stored with it.
"""

from __future__ import annotations

from sqlalchemy import Engine
from sqlmodel import Session as DB
from sqlmodel import select

from pxp.agents.base import Agent
from pxp.agents.checker import CheckedHumanProxy, Checker
from pxp.agents.llm import LLMMachine
from pxp.agents.proxy import HumanProxy
from pxp.agents.simulated import SimulatedConfig, SimulatedMachine
from pxp.llm.base import LLMConfigError, ProviderOptions, is_llm_spec, parse_spec
from pxp.llm.registry import make_provider
from pxp.protocols.errors import PxpError
from pxp.protocols.pxp.rules import Sender
from pxp.running.pxp.config import RunConfig
from pxp.running.pxp.engine import instance_view
from pxp.storage.store import dataset_instances, db_session, find_dataset
from pxp.storage.tables import Dataset, Experiment, Instance, Run
from pxp.tasks.custom import TaskConfigError
from pxp.tasks.registry import task_spec
from pxp.tasks.spec import TaskSpec


class AgentConfigError(PxpError, ValueError):
    """The config names an agent that cannot be built (unknown provider, missing key)."""


def dataset_labels(db: DB, ds: Dataset) -> list[str]:
    """The label set of a RAD/label dataset: config["labels"], else its distinct labels and reference predictions."""
    labels = ds.config.get("labels") if isinstance(ds.config, dict) else None
    if isinstance(labels, list) and labels:
        return [str(x) for x in labels]
    rows = db.exec(
        select(Instance.reference_prediction, Instance.label).where(Instance.dataset_id == ds.id)
    ).all()
    out: set[str] = set()
    for pred, lab in rows:
        out.update(v for v in (lab, pred) if v and len(v) <= 80)
    return sorted(out)


def dataset_task(db: DB, ds: Dataset) -> TaskSpec:
    """The one rule for a dataset's task: RAD, DRUG or its custom task config, with its label set.

    Controlled runs, live sessions and the stored prompts all take the MATCH kind and the
    labels from here. Raises TaskConfigError for a custom config that cannot be used.
    """
    return task_spec(ds.task, dict(ds.config or {}), dataset_labels(db, ds) if ds.task == "rad" else ())


def _options(spec: str, machine: str, base_url: str | None, extra: dict[str, object]) -> ProviderOptions:
    """SDK options of a role; --base-url applies to the machine's provider only."""
    same = is_llm_spec(machine) and parse_spec(spec)[0] == parse_spec(machine)[0]
    return ProviderOptions.from_env(base_url if same else None, extra)


def make_agents(engine: Engine, exp: Experiment, run: Run) -> dict[Sender, Agent]:
    """The machine (simulated or provider:model) and the human proxy of a controlled run."""
    cfg = RunConfig.from_dict(exp.config)
    if cfg.human != "proxy":
        raise AgentConfigError(
            f"human {cfg.human!r} cannot drive a controlled run; use --human proxy"
        )
    with db_session(engine) as db:
        ds = find_dataset(db, name=cfg.dataset)
        if ds is None or ds.id is None:
            raise AgentConfigError(f"no dataset named {cfg.dataset!r}")
        pool = [instance_view(engine, i.id or 0, db) for i in dataset_instances(db, dataset_id=ds.id)]
        ds_config = dict(ds.config or {})
        try:
            spec = dataset_task(db, ds)
        except TaskConfigError as e:
            raise AgentConfigError(f"dataset {cfg.dataset!r}: {e}") from None

    machine_spec = cfg.machine
    checker_spec = cfg.checker
    if "task_config" in ds_config:
        # a custom task's config names its AGREE kind; an LLM AGREE with no checker
        # named uses the generator's model
        if spec.agree_kind == "lexical":
            checker_spec = "lexical"
        elif checker_spec == "lexical" and is_llm_spec(machine_spec):
            checker_spec = machine_spec
    extra = dict(cfg.extra or {})
    try:
        checker = None
        if checker_spec != "lexical":
            provider = make_provider(checker_spec, _options(checker_spec, machine_spec, cfg.base_url, extra))
            checker = Checker(provider, spec, temperature=cfg.checker_temperature,
                              max_tokens=cfg.checker_max_tokens)
        human: Agent
        if checker is not None:
            human = CheckedHumanProxy(checker, match_kind=spec.match_kind)
        else:
            human = HumanProxy(agree_threshold=cfg.agree_threshold, match_kind=spec.match_kind)
        if machine_spec == "simulated":
            sim = SimulatedConfig(seed=run.seed, agree_threshold=cfg.agree_threshold, **cfg.simulated)
            return {Sender.MACHINE: SimulatedMachine(pool, sim), Sender.HUMAN: human}
        if not is_llm_spec(machine_spec):
            raise AgentConfigError(
                f"machine {machine_spec!r} is not available; use simulated, anthropic:<model> "
                "or openai:<model>"
            )
        provider = make_provider(machine_spec, _options(machine_spec, machine_spec, cfg.base_url, extra))
        machine = LLMMachine(
            provider, spec, temperature=cfg.temperature, max_tokens=cfg.max_tokens, checker=checker,
            structured=bool(extra.get("structured", True)), shorten=exp.mode == "live",
        )
    except LLMConfigError as e:
        raise AgentConfigError(str(e)) from None
    return {Sender.MACHINE: machine, Sender.HUMAN: human}
