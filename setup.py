"""The compiled core: a Cython extension over lxml's C API, built when Cython, lxml's headers and a C compiler
are at hand (``pyproject.toml`` asks for the first two at build time).  Where the compiler is missing the
build goes on without it (``optional=True``) and the package runs its pure-Python core."""

import glob

from setuptools import Extension, setup


def extensions() -> list[Extension]:
    try:
        import lxml
        from Cython.Build import cythonize
    except ImportError:  # a build without the build requirements (pip always installs them)
        return []
    walk = Extension(
        "simhash_filter.model._core",
        ["simhash_filter/model/_core.pyx"],
        depends=sorted(glob.glob("simhash_filter/model/_core_*.pxi")),  # its parts by stage (Cython includes)
        include_dirs=lxml.get_include(),
        optional=True,
    )
    return cythonize([walk], compiler_directives={"language_level": "3"}, quiet=True)


setup(ext_modules=extensions())
