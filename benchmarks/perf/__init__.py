"""Performance: throughput of the kernel products (CPU, GPU, fused), predictions, Dask and
out-of-core fits, scaling out, and speed across a refactor."""
