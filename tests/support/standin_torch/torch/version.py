# Rewritten with the wheel's version by molecule/shared/sglang_test_inputs.py (real torch writes this file at build time).
__version__ = "0.0.0+gpufleet.standin"
cuda = "13.0"
