"""The build backend: setuptools' own, without its "Editable installation" notice.

``pip install -e .`` on this layout (the repository's folders mapped under ``scopehub``)
makes setuptools print an eight-line ``BuildBackendWarning`` that is information, not a
problem ("be careful with folders ... with the same name as your package"): a newcomer's
first command should print nothing that looks like a fault. Everything else is
``setuptools.build_meta`` unchanged, and every other warning still shows.
"""

import warnings

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403  (the PEP 517 hooks, re-exported)
from setuptools.warnings import InformationOnly

__all__ = _setuptools.__all__

warnings.filterwarnings("ignore", message=r"\s*Editable installation", category=InformationOnly)
