"""Sources of the run-time shim the harness writes into a cache directory (never into the
repository): a package `mxnet` that stands for `loom`, a minimal `nose` (MXNet 1.9.1's tests
import nose.tools, which neither venv needs to have), and a pytest plugin that records each
test's outcome as JSON.

Everything here is Loom's own code; none of it comes from MXNet."""

# --- mxnet/__init__.py for the Loom side --------------------------------------------------
MXNET_INIT = r'''
"""mxnet -> loom alias written by tests/mxnet_suite (not part of the loom package)."""
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import types

import loom as _loom

#: Names whose modules are out of scope for the MXNet-suite harness (Gluon and autograd).
OUT_OF_SCOPE = ("gluon", "autograd")
STUB_TAG = "LOOM_SUITE_OUT_OF_SCOPE"
LENDED_TEST_UTILS = os.environ.get("LOOM_SUITE_LEND_TEST_UTILS", "")
#: diagnosis only: names and modules loom lacks become placeholders instead of errors
LENIENT = bool(LENDED_TEST_UTILS or os.environ.get("LOOM_SUITE_LENIENT"))

__path__ = []          # submodules come only from the finder below
__loom_shim__ = True


class _StubModule(types.ModuleType):
    """An empty module standing in for mxnet.gluon / mxnet.autograd: importing it works,
    using anything from it raises an error the harness classifies as out of scope."""
    __loom_stub__ = True

    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        raise AttributeError("%s: %s.%s (Gluon/autograd is out of scope for Loom)"
                             % (STUB_TAG, self.__name__, name))


def _as_package(mod):
    # The import system only looks for mxnet.a.b when mxnet.a has a __path__; loom's plain
    # modules get an empty one in the harness process so the finder is asked.
    if not hasattr(mod, "__path__"):
        try:
            mod.__path__ = []
        except (AttributeError, TypeError):
            pass
    return mod


def _stub(fullname):
    mod = sys.modules.get(fullname)
    if mod is None:
        mod = _StubModule(fullname)
        mod.__path__ = []
        sys.modules[fullname] = mod
    return mod


def _target(fullname):
    """The loom module that mxnet.<...> stands for, or None."""
    rest = fullname[len("mxnet."):]
    parts = rest.split(".")
    if parts[0] in OUT_OF_SCOPE:
        return _stub(fullname)
    if rest == "test_utils" and LENDED_TEST_UTILS:
        return _lend_test_utils(LENDED_TEST_UTILS)
    try:
        mod = _as_package(importlib.import_module("loom." + rest))
        if LENIENT and rest == "test_utils" and "__getattr__" not in vars(mod):
            def _lenient_getattr(name):
                if name.startswith("__"):
                    raise AttributeError(name)
                return _placeholder("mxnet.test_utils." + name)
            mod.__getattr__ = _lenient_getattr
        return mod
    except ImportError as e:
        if e.name != "loom." + rest and not (e.name or "").startswith("loom." + rest):
            raise
        missing = e
    # MXNet's layout has packages where Loom has modules: mxnet.ndarray.ndarray,
    # mxnet.symbol.symbol, mxnet.ndarray.op ... map a submodule of a plain loom module to
    # that module's attribute if it is a module, or to the module itself when the names
    # repeat (mxnet.ndarray.ndarray -> loom.ndarray).
    if len(parts) >= 2:
        try:
            parent = importlib.import_module("loom." + ".".join(parts[:-1]))
        except ImportError:
            raise missing
        attr = getattr(parent, parts[-1], None)
        if isinstance(attr, types.ModuleType):
            return attr
        if parts[-1] == parts[-2] or parts[-1] == "op":
            return parent
    if LENIENT and len(parts) == 1 and not parts[0].islower():
        raise missing
    if LENIENT:
        # diagnosis mode: a module loom lacks becomes a placeholder so that files which only
        # import it at the top still run their other tests
        mod = types.ModuleType(fullname)
        mod.__path__ = []
        mod.__getattr__ = lambda name: _placeholder(fullname + "." + name)
        return mod
    raise missing


def _placeholder(name):
    def missing(*a, **k):
        # used as a decorator (@mx.use_np_shape): leave the function as it is
        if len(a) == 1 and not k and callable(a[0]):
            return a[0]
        raise NotImplementedError("diagnosis mode: %s is missing in loom" % name)
    missing.__name__ = name.rsplit(".", 1)[-1]
    return missing


class _Loader(importlib.abc.Loader):
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return types.ModuleType(spec.name)

    def exec_module(self, module):
        sys.modules[module.__name__] = self.module


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        if not fullname.startswith("mxnet."):
            return None
        mod = _target(fullname)
        return importlib.machinery.ModuleSpec(fullname, _Loader(mod), is_package=True)


sys.meta_path.insert(0, _Finder())


def _lend_test_utils(path):
    """MXNet's own test_utils.py run against loom, for diagnosis only: each top-level import
    that fails leaves placeholders instead of failing the whole module."""
    import ast
    name = "mxnet.test_utils"
    if name in sys.modules:
        return sys.modules[name]
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    body = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"]
            fallback = [ast.parse("%s = _LoomSuiteMissing(%r)" % (n, n)).body[0] for n in names]
            body.append(ast.Try(body=[node],
                                handlers=[ast.ExceptHandler(type=ast.Name("Exception", ast.Load()),
                                                            name=None,
                                                            body=fallback or [ast.Pass()])],
                                orelse=[], finalbody=[]))
        else:
            body.append(node)
    tree.body = body
    ast.fix_missing_locations(tree)
    mod = types.ModuleType(name)
    mod.__file__ = path
    mod.__package__ = "mxnet"

    class _LoomSuiteMissing:
        """What a failed import leaves behind: absorbs calls and attribute reads, is false."""
        def __init__(self, n):
            self._n = n

        def __call__(self, *a, **k):
            return _LoomSuiteMissing(self._n + "()")

        def __getattr__(self, a):
            if a.startswith("__"):
                raise AttributeError(a)
            return _LoomSuiteMissing(self._n + "." + a)

        def __bool__(self):
            return False

        def __iter__(self):
            return iter(())

        def __repr__(self):
            return "<missing in loom: %s>" % self._n

    mod._LoomSuiteMissing = _LoomSuiteMissing
    sys.modules[name] = mod
    exec(compile(tree, path, "exec"), mod.__dict__)
    return mod


def __getattr__(name):
    if LENIENT and not name.startswith("__") and not hasattr(_loom, name) \
            and name not in OUT_OF_SCOPE and name != "test_utils":
        try:
            importlib.import_module("loom." + name)
        except ImportError:
            return _placeholder("mxnet." + name)
    if name in OUT_OF_SCOPE:
        return importlib.import_module("mxnet." + name)
    if name == "test_utils":
        return importlib.import_module("mxnet.test_utils")
    try:
        return getattr(_loom, name)
    except AttributeError:
        pass
    try:
        return importlib.import_module("mxnet." + name)
    except ImportError:
        raise AttributeError("module 'mxnet' (loom) has no attribute '%s'" % name) from None
    except Exception:
        raise


def __dir__():
    return sorted(set(dir(_loom)) | set(globals()))
'''

# --- nose (both sides) ----------------------------------------------------------------------
NOSE_INIT = r'''
"""Minimal stand-in for nose, written by tests/mxnet_suite."""


def runmodule(*args, **kwargs):
    raise SystemExit("the MXNet-suite harness runs these files with pytest")
'''

NOSE_TOOLS = r'''
"""The parts of nose.tools MXNet's tests use, written for tests/mxnet_suite."""
import functools
import re
import unittest

__all__ = ["ok_", "eq_", "make_decorator", "raises", "assert_raises"]


def ok_(expr, msg=None):
    if not expr:
        raise AssertionError(msg)


def eq_(a, b, msg=None):
    if not a == b:
        raise AssertionError(msg or "%r != %r" % (a, b))


def make_decorator(func):
    def decorate(newfunc):
        try:
            newfunc.__name__ = func.__name__
        except TypeError:
            pass
        newfunc.__dict__.update(func.__dict__)
        newfunc.__doc__ = func.__doc__
        newfunc.__module__ = func.__module__
        return newfunc
    return decorate


def raises(*exceptions):
    def decorate(func):
        @functools.wraps(func)
        def newfunc(*a, **k):
            try:
                func(*a, **k)
            except exceptions:
                return
            raise AssertionError("%s() did not raise %s"
                                 % (func.__name__, " or ".join(e.__name__ for e in exceptions)))
        return newfunc
    return decorate


class _T(unittest.TestCase):
    def runTest(self):
        pass


_t = _T()


def _pep8(name):
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


for _name in dir(_t):
    if _name.startswith("assert") and "_" not in _name:
        _new = _pep8(_name)
        globals()[_new] = getattr(_t, _name)
        __all__.append(_new)
assert_raises = _t.assertRaises
'''

# --- pytest plugin (both sides) -----------------------------------------------------------
PLUGIN = r'''
"""Records each test's outcome for tests/mxnet_suite (LOOM_SUITE_RESULT names the file)."""
import json
import os
import traceback

import pytest

_RESULTS = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.when == "call" or rep.failed or rep.skipped:
        rec = {"nodeid": item.nodeid, "when": rep.when, "outcome": rep.outcome,
               "duration": rep.duration}
        if call.excinfo is not None and not rep.passed:
            ei = call.excinfo
            rec["exc_type"] = ei.type.__name__
            rec["exc_module"] = ei.type.__module__
            try:
                rec["exc_msg"] = str(ei.value)[:2000]
            except Exception:
                rec["exc_msg"] = "<unprintable>"
            frames = traceback.extract_tb(ei.tb)
            rec["frames"] = [[f.filename, f.lineno, f.name, f.line] for f in frames][-40:]
            rec["exc_name"] = getattr(ei.value, "name", None) if isinstance(ei.value, ImportError) else None
            rec["exc_obj"] = type(getattr(ei.value, "obj", None)).__name__ if isinstance(ei.value, AttributeError) else None
        _RESULTS.append(rec)


def pytest_collectreport(report):
    if report.failed:
        _RESULTS.append({"nodeid": report.nodeid, "when": "collect", "outcome": "failed",
                         "longrepr": str(report.longrepr)[-4000:]})


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("LOOM_SUITE_RESULT")
    if path:
        with open(path, "w") as f:
            json.dump(_RESULTS, f)
'''

PYTEST_INI = r'''
[pytest]
markers =
    seed: MXNet test marker
    serial: MXNet test marker
    remote_required: MXNet test marker
    gpu: MXNet test marker
    integration: MXNet test marker
    garbage_expected: MXNet test marker
python_files = test_*.py
filterwarnings = ignore
'''
