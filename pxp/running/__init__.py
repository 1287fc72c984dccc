"""Running interactions (DESIGN §1, §5, §7): the engine step, controlled runs, live sessions, workers.

Owns: `engine` (one protocol step, stored exactly once), `config` (a run's stored configuration),
`factory` (agents for a run), `runner` (INTERACT over R repetitions, LEARN), `evaluate` (machine
performance), `live` (human sessions in the app), `workers` (who runs what), `progress`, `checks`
(a run's config before launch), `journal` (LLM calls in flight), `demo` (the shipped demo).
May import: agents, data, tasks, llm, storage, protocols; never analysis or the interfaces.
"""
