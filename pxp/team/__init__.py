"""Who may do what: the team's roles and the server-side checks (`access`).

The audit trail those checks and the live sessions write is `pxp.storage.audit`.
May import: running, agents, storage, protocols; never analysis or the interfaces.
"""
