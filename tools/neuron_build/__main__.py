"""Entry point of ``python3 -m tools.neuron_build`` (see build.py)."""
import sys

from .build import main

sys.exit(main())
