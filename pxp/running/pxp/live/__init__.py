"""Live experiments: INTERACT(X, n, k) with the human in the browser (DESIGN §1, §3).

A live experiment (mode "live") has one Run whose `instance_order` is the queue of
instances. `assignment`: annotators, live experiments and claims (the unique (run_id,
ordinal) key makes a claim atomic, so a case is served to at most `overlap` annotators, and
the Claim table's unique key serves nobody the same case twice). `overlap`: per-annotator
case lists and progress.
`turns`: the session as the Annotate page sees it, and each human turn as one engine step
with a BrowserHuman, then one step of the machine (simulated or an LLM); the engine's
unique (session_id, j) key makes a repeated submission lose cleanly. `abandonment`: open
sessions idle for a while, and taking one over with a conditional UPDATE.
"""
