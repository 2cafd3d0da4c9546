"""kernelscale: scalable kernel machines that never build the n x n kernel matrix."""

from . import blocks
from .datasets import DATASETS, DatasetNotFoundError, load_dataset, load_file, make_sinc, split_dataset, verify_dataset
from .exact import ExactKernelRidge, exact_lssvm, kernel_predict, kernel_ridge_dual, kernel_ridge_objective
from .features import NystromFeatures, PolynomialRandomFeatures, RandomFourierFeatures, SeededFeatureMap
from .kernels import (
    GaussianKernel,
    Kernel,
    LaplacianKernel,
    LinearKernel,
    MaternKernel,
    PolynomialKernel,
    make_kernel,
    median_heuristic,
)
from .persistence import PersistenceWarning, describe, load, save

__version__ = "0.1.0"

__all__ = [
    "blocks",
    # kernels
    "Kernel",
    "GaussianKernel",
    "LaplacianKernel",
    "MaternKernel",
    "PolynomialKernel",
    "LinearKernel",
    "make_kernel",
    "median_heuristic",
    # features
    "RandomFourierFeatures",
    "PolynomialRandomFeatures",
    "NystromFeatures",
    "SeededFeatureMap",
    # exact solvers
    "ExactKernelRidge",
    "kernel_ridge_dual",
    "exact_lssvm",
    "kernel_predict",
    "kernel_ridge_objective",
    # data
    "DATASETS",
    "DatasetNotFoundError",
    "load_dataset",
    "load_file",
    "make_sinc",
    "split_dataset",
    "verify_dataset",
    # persistence
    "save",
    "load",
    "describe",
    "PersistenceWarning",
]
