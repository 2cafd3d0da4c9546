"""Each paper's tables reproduced on the real data, beside the published numbers and peers run in
the same process on the same split (``python -m benchmarks --list`` names them)."""
