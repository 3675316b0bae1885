"""Recordings: the journal (`journal`), its framing (`frames`), the `.cpsession` file (`cpsession`),
and replay/verify (`replay`), which folds a journal back into a pipeline."""
