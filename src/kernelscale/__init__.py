"""kernelscale: scalable kernel machines that never build the n x n kernel matrix."""

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

__version__ = "0.1.0"

__all__ = [
    "Kernel",
    "GaussianKernel",
    "LaplacianKernel",
    "MaternKernel",
    "PolynomialKernel",
    "LinearKernel",
    "make_kernel",
    "median_heuristic",
]
