"""gpufleet stand-in for PyTorch (a TEST DOUBLE, NOT PyTorch): see tests/support/standin_torch/README.md."""

from torch.version import __version__, cuda  # noqa: F401  (the attributes real torch has)

STANDIN = True
