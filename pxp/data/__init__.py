"""Data import and rendering (DESIGN §4, §6): study CSVs, generic CSV/JSONL, DICOM, transcripts,
images stored as assets, the demo generators, and the SVG/PNG drawings the app shows (`render`).

May import: tasks, storage, protocols; never agents, llm, running, analysis or the interfaces.
"""
