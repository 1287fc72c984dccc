"""Analysis (DESIGN §2, §7): what researchers read after the interaction.

Owns: `queries` (the Selection, SQL over sessions, messages and runs, the data-version cache),
`tables` (Table 1 by group, Figure 1 data, transitions, session lengths, per-session flags),
`performance` (Figure 2 data), `costs` (LLM cost and latency), `agreement` (κ and α between
annotators, disagreements), `figures` (the charts as Vega-Lite specs), `report` (`pxp report` text, JSON,
markdown, CSV), `export` (D, M, C tables), `calls` (LLM call totals), `validate` (stored
sessions against the protocol).
May import: running, agents, data, tasks, llm, storage, protocols; never the interfaces.
"""
