"""dask."""
