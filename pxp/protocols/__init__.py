"""Protocol rules and metrics, pure (no I/O).

Owns: each interaction protocol's rules and measures, one subpackage per protocol (PXP in
`pxp.protocols.pxp`; the scorekeeping game next), the base error every layer derives
from (`pxp.protocols.errors`), and the declaration of every setting pxp reads
(`pxp.protocols.settings`). May import: nothing of pxp but itself; no database, files,
network or UI.
"""
