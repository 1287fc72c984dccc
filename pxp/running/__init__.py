"""Running interactions (DESIGN §1, §5, §7): the engine step, controlled runs, live sessions, workers.

Owns: `engine` (one protocol step, stored exactly once, and the one session loop), `config` (a
run's stored configuration), `factory` (a dataset's task and label set; agents for a run),
`experiments` (creating experiments, controlled or live), `repetition` (INTERACT over one run's
sessions), `learn` (LEARN and evaluation scheduling), `runner` (R repetitions at once, resume,
usage), `evaluate` (machine performance), `live` (human sessions in the app: `assignment`,
`turns`, `abandonment`), `workers` (who runs what), `progress`, `checks` (a run's config before
launch), `journal` (LLM calls in flight), `demo` (the shipped demo).
May import: agents, data, tasks, llm, storage, protocols; never analysis or the interfaces.
"""
