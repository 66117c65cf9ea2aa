"""gpufleet stand-in for SGLang (test double, NOT the real engine). See launch_server.py."""

__version__ = "0.0.0+gpufleet.standin"
STANDIN = True
