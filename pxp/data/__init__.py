"""Importers (study CSVs, generic CSV/JSONL, DICOM, transcripts) and demo generators."""
