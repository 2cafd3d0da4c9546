"""kernelscale: scalable kernel machines that never build the n x n kernel matrix."""

from .base import moved as _moved

_moved.install()  # the import paths of 0.1.0's flat layout (kernelscale.stagewise, ...) keep working

from . import ops, preprocessing  # noqa: E402
from .data import (  # noqa: E402
    DATASETS, DatasetNotFoundError, VirtualDigits, coulomb_features, load_dataset, load_file, make_sinc,
    split_dataset, verify_dataset,
)
from .auto import AutoKernelClassifier, AutoKernelRegressor, compare  # noqa: E402
from .doubly_stochastic import DoublyStochasticClassifier, DoublyStochasticRegressor  # noqa: E402
from .exact import ExactKernelRidge, exact_lssvm, kernel_predict, kernel_ridge_dual, kernel_ridge_objective  # noqa: E402
from .features import NystromFeatures, PolynomialRandomFeatures, RandomFourierFeatures, SeededFeatureMap  # noqa: E402
from .kernels import (  # noqa: E402
    GaussianKernel, Kernel, LaplacianKernel, LinearKernel, MaternKernel, PolynomialKernel, make_kernel,
    median_heuristic,
)
from .least_squares import (  # noqa: E402
    CalibratedLeastSquaresClassifier, GeneralizedLeastSquaresClassifier, StagewiseClassifier, StagewiseRegressor,
)
from .lssvm import LSSVMClassifier, LSSVMRegressor, solve_lssvm  # noqa: E402
from .persistence import PersistenceWarning, describe, load, save  # noqa: E402
from .regularized import RegularizedKernelClassifier, RegularizedKernelRegressor  # noqa: E402
from .simplex import project_hypercube, project_simplex  # noqa: E402
from .slkl import SLKLClassifier, SLKLRegressor  # noqa: E402
from .base.version import __version__  # noqa: E402


__all__ = [
    # the front door: method, capacity and hyperparameters chosen within a time budget
    "AutoKernelClassifier",
    "AutoKernelRegressor",
    "compare",
    "ops",
    "preprocessing",
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
    # stochastic low-rank kernel learning (paper 1)
    "SLKLRegressor",
    "SLKLClassifier",
    # doubly stochastic functional gradients (paper 2)
    "DoublyStochasticRegressor",
    "DoublyStochasticClassifier",
    # fixed-point and coordinate-descent solvers (paper 3)
    "RegularizedKernelClassifier",
    "RegularizedKernelRegressor",
    # randomized LS-SVM (paper 4)
    "LSSVMClassifier",
    "LSSVMRegressor",
    "solve_lssvm",
    # least squares revisited (paper 5)
    "GeneralizedLeastSquaresClassifier",
    "CalibratedLeastSquaresClassifier",
    "StagewiseClassifier",
    "StagewiseRegressor",
    "project_simplex",
    "project_hypercube",
    # data
    "DATASETS",
    "DatasetNotFoundError",
    "coulomb_features",
    "load_dataset",
    "VirtualDigits",
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
