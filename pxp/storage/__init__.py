"""Storage (DESIGN §3–4): the SQLModel tables, engine creation, Alembic migrations and plain queries.

Owns: `tables` (the schema), `store` (engines for SQLite and PostgreSQL, sessions, lookups),
`settings` (PXP_* settings, never API keys), `batches` (reading a study in pages), `scorekeeping`
(the game's tables), `audit` (the audit trail of who did what), `migrations`. May import: pxp.protocols only;
never agents, LLM providers, running, analysis or the interfaces.
"""
