"""Analysis (DESIGN §2, §7): what researchers read after the interaction.

Owns: `analytics` (SQL over the stored sessions: Table 1, Figures 1–2, κ, costs), `figures`
(plotly drawings), `report` (`pxp report` text, JSON, markdown, CSV), `export` (D, M, C tables),
`calls` (LLM call totals), `validate` (stored sessions against the protocol).
May import: running, agents, data, tasks, llm, storage, protocols; never the interfaces.
"""
