"""mx.profiler: records what runs while the profiler is in state 'run' and writes it as a
Chrome trace (open the file in chrome://tracing or https://ui.perfetto.dev).

Recorded, each as a complete ('X') event with start and duration in microseconds:
  * executor passes (profile_symbolic): one event per Executor.forward / backward, named
    '<first output>::forward' etc., category 'executor', and inside it one event per
    kernel call, named by the op as MXNet names them ('Convolution',
    '_backward_Convolution'; Loom's fused calls join their ops with '+', e.g.
    'Convolution+BatchNorm'), category 'operator', with the node name in args;
  * imperative op calls (profile_imperative): one event per mx.nd op call, named by the op
    (sqrt, _plus_scalar, ...), category 'operator';
  * Python custom operators: '<op_type>::pure_python' (and '_backward_<op_type>::...') with
    the ops they call inside as '<op_type>::<op>', category 'Custom Operator';
  * Task / Frame / Event objects ('X'), Counter values ('C'), Marker instants ('i').

LOOM_PROFILE=1 (or MXNet's MXNET_PROFILER_AUTOSTART=1) starts the profiler when loom is
imported and dumps the trace at exit, to LOOM_PROFILE_FILE (default profile.json, or what
set_config names before the exit).

With aggregate_stats=True, dumps() returns count/total/min/max/avg per name (table or JSON,
times in ms)."""
import json
import os
import threading
import time
import warnings

from . import executor as _executor
from . import ndarray as _nd
from . import operator as _operator

_lock = threading.RLock()
_t0 = time.perf_counter()


class _State:
    def __init__(self):
        self.config = {"filename": "profile.json", "profile_all": False,
                       "profile_symbolic": True, "profile_imperative": True,
                       "profile_memory": True, "profile_api": True,
                       "continuous_dump": False, "dump_period": 1.0,
                       "aggregate_stats": False, "profile_process": "worker"}
        self.running = False
        self.paused = False
        self.events = []
        self.stats = {}  # domain -> name -> [count, total, min, max] (microseconds)
        self.open_trace = None  # file a continued (dump(finished=False)) trace appends to
        self.pid = os.getpid()


_state = _State()
_tls = threading.local()

_BOOL_KEYS = ("profile_all", "profile_symbolic", "profile_imperative", "profile_memory",
              "profile_api", "continuous_dump", "aggregate_stats")


def _now_us():
    return (time.perf_counter() - _t0) * 1e6


def _as_bool(v):
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


def _active(kind=None):
    if not _state.running or _state.paused:
        return False
    if kind is None or _state.config["profile_all"]:
        return True
    return bool(_state.config.get(kind, True))


def _record(event, domain=None):
    """Appends a trace event; complete events also feed the aggregate statistics."""
    event.setdefault("pid", _state.pid)
    event.setdefault("tid", threading.get_ident() & 0x7fffffff)
    with _lock:
        _state.events.append(event)
        if _state.config["aggregate_stats"] and event.get("ph") == "X":
            d = _state.stats.setdefault(domain or event.get("cat", "Python"), {})
            s = d.get(event["name"])
            dur = event["dur"]
            if s is None:
                d[event["name"]] = [1, dur, dur, dur]
            else:
                s[0] += 1
                s[1] += dur
                s[2] = min(s[2], dur)
                s[3] = max(s[3], dur)


def _complete(name, cat, start, args=None):
    ev = {"name": name, "cat": cat, "ph": "X", "ts": start, "dur": _now_us() - start}
    if args:
        ev["args"] = args
    _record(ev, cat)


# ---------------------------------------------------------------------------------------
# configuration and state

def set_config(**kwargs):
    """Configures the profiler: filename, profile_all, profile_symbolic, profile_imperative,
    profile_memory, profile_api, continuous_dump, dump_period, aggregate_stats,
    profile_process ('worker' only)."""
    with _lock:
        for k, v in kwargs.items():
            if k not in _state.config:
                raise ValueError("profiler.set_config: unknown option '%s' (options: %s)" %
                                 (k, ", ".join(sorted(_state.config))))
            if k in _BOOL_KEYS:
                v = _as_bool(v)
            elif k == "dump_period":
                v = float(v)
            elif k == "profile_process":
                _check_process(v)
            else:
                v = str(v)
            _state.config[k] = v


def _check_process(profile_process):
    if profile_process not in ("worker", "server"):
        raise ValueError("profile_process must be 'worker' or 'server'")
    if profile_process == "server":
        raise ValueError("profiling a kvstore server is not supported by Loom (no "
                         "distributed kvstore)")


def profiler_set_config(mode="symbolic", filename="profile.json"):
    """Deprecated form of set_config."""
    warnings.warn("profiler.profiler_set_config() is deprecated. Please use "
                  "profiler.set_config() instead")
    set_config(**{"profile_" + mode: True, "filename": filename})


def set_state(state="stop", profile_process="worker"):
    """'run' starts recording, 'stop' stops it."""
    _check_process(profile_process)
    if state not in ("run", "stop"):
        raise ValueError("profiler state must be 'run' or 'stop', got %r" % (state,))
    with _lock:
        _state.running = state == "run"
        _state.paused = False


def profiler_set_state(state="stop"):
    warnings.warn("profiler.profiler_set_state() is deprecated. Please use "
                  "profiler.set_state() instead")
    set_state(state)


def state():
    """'run' or 'stop' (Loom extension)."""
    return "run" if _state.running else "stop"


def pause(profile_process="worker"):
    """Stops recording until resume() (the state stays 'run')."""
    _check_process(profile_process)
    _state.paused = True


def resume(profile_process="worker"):
    _check_process(profile_process)
    _state.paused = False


def dump(finished=True, profile_process="worker"):
    """Writes the events recorded since the last dump to the configured file as Chrome trace
    JSON and frees them. finished=False keeps the trace open: the next dump to the same file
    appends to it (the file is complete, valid JSON after every dump); finished=True closes
    it, so the next dump starts a new file."""
    _check_process(profile_process)
    with _lock:
        events, _state.events = _state.events, []
        fname = _state.config["filename"]
        body = ",\n".join(json.dumps(e) for e in events)
        tail = "\n]}"
        if _state.open_trace == fname and os.path.exists(fname):
            with open(fname, "r+b") as f:
                f.seek(-len(tail), os.SEEK_END)
                f.write(((",\n" + body) if body else "").encode() + tail.encode())
                f.truncate()
        else:
            meta = json.dumps({"name": "process_name", "ph": "M", "pid": _state.pid,
                               "args": {"name": "loom"}})
            tmp = fname + ".tmp"
            with open(tmp, "w") as f:
                f.write('{"displayTimeUnit": "ms", "traceEvents": [\n' + meta +
                        ((",\n" + body) if body else "") + tail)
            os.replace(tmp, fname)
        _state.open_trace = None if finished else fname


def dump_profile():
    warnings.warn("profiler.dump_profile() is deprecated. Please use profiler.dump() instead")
    dump(True)


_SORT = {"total": 1, "avg": None, "min": 2, "max": 3, "count": 0}


def dumps(reset=False, format="table", sort_by="total", ascending=False):
    """The aggregate statistics (set_config(aggregate_stats=True)) as a table or as JSON
    {'Time': {domain: {name: {Count, Total, Min, Max, Avg}}}, 'Memory': {}, 'Unit': ...}
    with times in ms. reset clears them."""
    if format not in ("table", "json"):
        raise ValueError("Invalid value provided for format: %s. Support: 'table', 'json'" %
                         format)
    if sort_by not in _SORT:
        raise ValueError("Invalid value provided for sort_by: %s. Support: 'total', 'avg', "
                         "'min', 'max', 'count'" % sort_by)
    if ascending not in (True, False) or reset not in (True, False):
        raise ValueError("reset and ascending must be True or False")
    with _lock:
        stats = {d: {n: list(s) for n, s in items.items()} for d, items in _state.stats.items()}
        if reset:
            _state.stats = {}

    def key(item):
        s = item[1]
        return s[1] / s[0] if _SORT[sort_by] is None else s[_SORT[sort_by]]

    def row(s):
        c, total, mn, mx = s
        return {"Count": c, "Total": total / 1000.0, "Min": mn / 1000.0, "Max": mx / 1000.0,
                "Avg": total / c / 1000.0}

    ordered = {d: sorted(items.items(), key=key, reverse=not ascending)
               for d, items in sorted(stats.items())}
    if format == "json":
        out = {"Time": {d: {n: row(s) for n, s in items} for d, items in ordered.items()},
               "Memory": {}, "Unit": {"Time": "ms", "Memory": "kB"}}
        return json.dumps(out, indent=4)
    lines = ["", "Profile Statistics:",
             "\tNote the difference in units for different entries."]
    for d, items in ordered.items():
        lines += [d, "=" * len(d),
                  "%-40s %16s %16s %16s %16s %16s" % ("Name", "Total Count", "Time (ms)",
                                                      "Min Time (ms)", "Max Time (ms)",
                                                      "Avg Time (ms)"),
                  "%-40s %16s %16s %16s %16s %16s" % ("----", "-----------", "---------",
                                                      "-------------", "-------------",
                                                      "-------------")]
        for n, s in items:
            r = row(s)
            lines.append("%-40s %16d %16.4f %16.4f %16.4f %16.4f" %
                         (n, r["Count"], r["Total"], r["Min"], r["Max"], r["Avg"]))
        lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# instrumentation of Loom's entry points (a flag test per call while the profiler is off)

_installed = [False]


def _install():
    if _installed[0]:
        return
    _installed[0] = True

    orig_forward = _executor.Executor.forward
    orig_backward = _executor.Executor.backward

    def forward(self, is_train=False, **kwargs):
        if not _active("profile_symbolic"):
            return orig_forward(self, is_train, **kwargs)
        start = _now_us()
        trace = self.handle._trace_ops(True)
        try:
            return orig_forward(self, is_train, **kwargs)
        finally:
            self.handle._trace_ops(False)
            _complete("%s::forward" % _exe_name(self), "executor", start,
                      {"is_train": bool(is_train)})
            _record_ops(trace)

    def backward(self, out_grads=None, is_train=True):
        if not _active("profile_symbolic"):
            return orig_backward(self, out_grads, is_train)
        start = _now_us()
        trace = self.handle._trace_ops(True)
        try:
            return orig_backward(self, out_grads, is_train)
        finally:
            self.handle._trace_ops(False)
            _complete("%s::backward" % _exe_name(self), "executor", start)
            _record_ops(trace)

    forward.__doc__ = orig_forward.__doc__
    backward.__doc__ = orig_backward.__doc__
    _executor.Executor.forward = forward
    _executor.Executor.backward = backward

    orig_invoke = _nd.invoke

    def invoke(op, inputs, attrs=None, out=None, is_train=False, ctx=None):
        if not _active("profile_imperative"):
            return orig_invoke(op, inputs, attrs, out, is_train, ctx)
        custom = getattr(_tls, "custom", None)
        start = _now_us()
        try:
            return orig_invoke(op, inputs, attrs, out, is_train, ctx)
        finally:
            name = op if op != "Custom" else "Custom(%s)" % (attrs or {}).get("op_type", "")
            if custom:
                _complete("%s::%s" % (custom, name), "Custom Operator", start)
            else:
                _complete(name, "operator", start)

    invoke.__doc__ = orig_invoke.__doc__
    _nd.invoke = invoke


def _record_ops(trace):
    """One 'operator' event per kernel call of an executor pass, named by its op as MXNet
    names them ('Convolution', '_backward_Convolution'; Loom's fused calls join their ops
    with '+', e.g. 'Convolution+BatchNorm'), with the node(s) in args."""
    for node, op, start_s, dur_s in trace.take():
        if op.endswith("_backward"):
            op, node = "_backward_" + op[:-len("_backward")], node[:-len("_backward")]
        _record({"name": op, "cat": "operator", "ph": "X", "ts": (start_s - _t0) * 1e6,
                 "dur": dur_s * 1e6, "args": {"node": node}}, "operator")


def _exe_name(exe):
    names = getattr(exe, "_output_names", None) or ["executor"]
    return names[0]


def _wrap_custom(reg_name, op):
    fwd, bwd = op.forward, op.backward

    def run(label, fn, args):
        if not _active():
            return fn(*args)
        prev = getattr(_tls, "custom", None)
        _tls.custom = reg_name
        start = _now_us()
        try:
            return fn(*args)
        finally:
            _tls.custom = prev
            _complete(label, "Custom Operator", start)

    op.forward = lambda *a: run("%s::pure_python" % reg_name, fwd, a)
    op.backward = lambda *a: run("_backward_%s::pure_python" % reg_name, bwd, a)
    return op


_orig_register = _operator.register


def _register(reg_name):
    """mx.operator.register, with the operators it creates timed by the profiler."""
    base = _orig_register(reg_name)

    def do_register(prop_cls):
        create = getattr(prop_cls, "create_operator", None)
        if create is not None and not getattr(create, "_loom_profiled", False):
            def create_operator(self, ctx, in_shapes, in_dtypes):
                return _wrap_custom(reg_name, create(self, ctx, in_shapes, in_dtypes))
            create_operator._loom_profiled = True
            create_operator.__doc__ = create.__doc__
            prop_cls.create_operator = create_operator
        return base(prop_cls)
    return do_register


_register.__doc__ = _orig_register.__doc__
_operator.register = _register
_install()


def _autostart():
    flag = os.environ.get("LOOM_PROFILE") or os.environ.get("MXNET_PROFILER_AUTOSTART")
    if not flag or not _as_bool(flag):
        return
    import atexit
    set_config(filename=os.environ.get("LOOM_PROFILE_FILE", "profile.json"))
    set_state("run")

    def finish():
        if _state.running:
            set_state("stop")
        dump()
    atexit.register(finish)


_autostart()


# ---------------------------------------------------------------------------------------
# user annotations

class Domain:
    """A named group of tasks, frames, counters and markers."""

    def __init__(self, name):
        self.name = name

    def __str__(self):
        return self.name

    def new_task(self, name):
        return Task(self, name)

    def new_frame(self, name):
        return Frame(self, name)

    def new_counter(self, name, value=None):
        return Counter(self, name, value)

    def new_marker(self, name):
        return Marker(self, name)


class _Range:
    _kind = "range"

    def __init__(self, domain, name):
        self.domain = domain
        self.name = name
        self._start = None

    def start(self):
        self._start = _now_us()

    def stop(self):
        if self._start is None:
            return
        start, self._start = self._start, None
        if _active():
            _complete(self.name, str(self.domain) if self.domain is not None else self._kind,
                      start)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def __str__(self):
        return self.name


class Task(_Range):
    """A timed region in a domain: start() ... stop()."""


class Frame(_Range):
    """A timed region in a domain (a frame, e.g. one iteration): start() ... stop()."""


class Event(_Range):
    """A timed region without a domain: Event(name).start() ... stop()."""

    _kind = "Python"

    def __init__(self, name):
        super().__init__(None, name)


class Counter:
    """A named value in a domain, recorded as a Chrome counter on every change."""

    def __init__(self, domain, name, value=None):
        self.domain = domain
        self.name = name
        self.value = 0
        if value is not None:
            self.set_value(value)

    def _emit(self):
        if _active():
            _record({"name": self.name, "cat": str(self.domain), "ph": "C", "ts": _now_us(),
                     "args": {self.name: self.value}})

    def set_value(self, value):
        self.value = int(value)
        self._emit()

    def increment(self, delta=1):
        self.value += int(delta)
        self._emit()

    def decrement(self, delta=1):
        self.value -= int(delta)
        self._emit()

    def __iadd__(self, delta):
        self.increment(delta)
        return self

    def __isub__(self, delta):
        self.decrement(delta)
        return self

    def __str__(self):
        return self.name


class Marker:
    """An instant event in a domain: mark(scope) with scope 'process', 'global' or
    'thread'."""

    _SCOPES = {"process": "p", "global": "g", "thread": "t"}

    def __init__(self, domain, name):
        self.domain = domain
        self.name = name

    def mark(self, scope="process"):
        if scope not in self._SCOPES:
            raise ValueError("Marker.mark: scope must be 'process', 'global' or 'thread'")
        if _active():
            _record({"name": self.name, "cat": str(self.domain), "ph": "i", "ts": _now_us(),
                     "s": self._SCOPES[scope]})


def set_kvstore_handle(handle):
    """Accepted for compatibility (Loom has no distributed kvstore server to profile)."""
