"""Running interactions (DESIGN §1, §5, §7), one folder per concern.

- `pxp` — the PXP protocol: the engine step and session loop and what a run is (`engine`, `config`,
  `factory`, `experiments`, `checks`, `evaluate`, `instances`, `journal`, `errors`);
  `pxp.controlled` — controlled runs (repetitions, LEARN, probes, the runner, estimates, grids, the demo);
  `pxp.live` — live human sessions in the app (assignment, turns, abandonment, overlap).
- `workers` — who runs what: the in-process pool (`pool`) and the procrastinate queue side by side.
- `scorekeeping` — runs, stored games and human play of the scorekeeping game.
May import: agents, data, tasks, llm, storage, protocols; never analysis or the interfaces.
"""
