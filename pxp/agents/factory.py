"""Build the agents an experiment's config names, for one repetition (Run)."""

from __future__ import annotations

from sqlalchemy import Engine

from pxp.agents.base import Agent
from pxp.agents.proxy import HumanProxy
from pxp.agents.simulated import SimulatedConfig, SimulatedMachine
from pxp.engine import instance_view
from pxp.models import Experiment, Run
from pxp.protocol import Sender
from pxp.store import dataset_instances, db_session, find_dataset


class AgentConfigError(ValueError):
    """The config names an agent that cannot be built (unknown provider, missing key)."""


def make_agents(engine: Engine, exp: Experiment, run: Run) -> dict[Sender, Agent]:
    """The machine (simulated or provider:model) and the human proxy of a controlled run."""
    from pxp.runner import RunConfig

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
    human = HumanProxy(agree_threshold=cfg.agree_threshold)
    if cfg.machine == "simulated":
        sim = SimulatedConfig(seed=run.seed, agree_threshold=cfg.agree_threshold, **cfg.simulated)
        return {Sender.MACHINE: SimulatedMachine(pool, sim), Sender.HUMAN: human}
    raise AgentConfigError(f"machine {cfg.machine!r} is not available; use --machine simulated")
