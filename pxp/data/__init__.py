"""Data import and rendering (DESIGN §4, §6): `importers` (study CSVs, generic CSV/JSONL, DICOM
de-identified, transcripts, zips), `demo` (the demo generators; the files are in `demo_data/`),
`scorekeeping` (clembench episodes), and here the images stored as assets (`images`), molecules
(`chem`), the SVG/PNG drawings the app shows (`render`) and rows written to files a chunk at a time (`sinks`).

May import: storage, protocols; never llm, tasks, agents, running, analysis or the interfaces.
"""
