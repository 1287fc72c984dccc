"""Importers (DESIGN §4): study CSVs (`study`), generic CSV/JSONL (`generic`), DICOM (`dicom`,
`deidentify`, `jpeg_repair`), transcripts, zips, and what they share (`common`, `limits`).
"""
