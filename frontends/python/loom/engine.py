"""mx.engine: bulk execution settings. Loom runs each imperative op and each executor pass
synchronously, so bulking has no effect; the size is remembered so the MXNet API behaves."""
import contextlib

_bulk_size = [15]  # MXNet's default (MXNET_EXEC_BULK_EXEC_MAX_NODE_TRAIN default)


def set_bulk_size(size):
    """Sets the number of ops to bulk (ignored by Loom); returns the previous value."""
    prev = _bulk_size[0]
    _bulk_size[0] = int(size)
    return prev


@contextlib.contextmanager
def bulk(size):
    """with mx.engine.bulk(size): ... sets the bulk size for the block and restores it."""
    prev = set_bulk_size(size)
    try:
        yield
    finally:
        set_bulk_size(prev)
