"""Data: the benchmark datasets and their loaders (:mod:`.datasets`), the virtual digits stream
(:mod:`.virtual_digits`) and arrays in files read as dask row chunks (:mod:`.lazy_files`)."""

from .datasets import (
    DATASETS, ENV_VAR, PAPER1_SPLITS, DatasetInfo, DatasetNotFoundError, coulomb_features, data_dirs,
    find_dataset, load_dataset, load_file, load_idx, load_npz, load_svmlight, make_sinc, split_dataset,
    verify_dataset,
)
from .virtual_digits import VirtualDigits

__all__ = [
    "DATASETS", "DatasetInfo", "DatasetNotFoundError", "ENV_VAR", "PAPER1_SPLITS", "data_dirs",
    "find_dataset", "load_dataset", "split_dataset", "verify_dataset", "load_npz", "load_svmlight",
    "load_idx", "load_file", "make_sinc", "coulomb_features", "VirtualDigits",
]
