"""Data import and rendering (DESIGN §4, §6): study CSVs, generic CSV/JSONL, DICOM (de-identified),
transcripts, clembench episodes, images stored as assets, molecules (`chem`), the demo generators,
and the SVG/PNG drawings the app shows (`render`).

May import: storage, protocols; never llm, tasks, agents, running, analysis or the interfaces.
"""
