"""The PXP protocol (DESIGN §1–2): message tags and the rules that allow them (`rules`), and the
intelligibility counts of Table 1 and Figure 1 (`intelligibility`). Pure: imports only pxp.protocols.
"""
