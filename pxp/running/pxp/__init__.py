"""Running the PXP protocol (DESIGN §1, §5): `engine` (one protocol step, stored exactly once, and the
one session loop), `config` (a run's stored configuration), `factory` (a dataset's task and label
set; agents for a run), `experiments` (creating experiments, controlled or live), `checks` (a run's
config before launch), `evaluate` (machine performance), `series` (its series over the
repetitions, Figure 2), `instances`, `journal` (LLM calls in
flight), `errors`. Controlled runs are in `controlled`, live human sessions in `live`.
"""
