"""Package discovery, plus the front end: the top-level ``widgets/`` folder ships as ``agentnb._widgets``.

Everything else about the build is in pyproject.toml. The front end (ES module and CSS, no build step) stays
in ``widgets/`` where the design puts it; mapping that folder to a data-only package puts the same files in
the wheel, where :mod:`agentnb._debugger.assets` reads them with ``importlib.resources``. Nothing is copied.
"""

from setuptools import find_namespace_packages, setup

setup(
    packages=[*find_namespace_packages(include=["agentnb", "agentnb.*"]), "agentnb._widgets"],
    package_dir={"agentnb._widgets": "widgets"},
    package_data={"agentnb._widgets": ["*.js", "*.css"]},
)
