"""Automatic mixed precision (mx.contrib.amp.amp): not available in Loom; see the package
doc. Every conversion entry point raises a LoomError that says so."""
from ...base import LoomError

__all__ = ["init", "init_trainer", "scale_loss", "unscale", "convert_model", "convert_symbol",
           "convert_hybrid_block", "list_lp16_ops", "list_fp32_ops"]


def _unsupported(name):
    def fn(*args, **kwargs):
        raise LoomError("mx.contrib.amp.%s: automatic mixed precision is not supported by Loom "
                        "(its NN and update ops are float32 only)" % name)
    fn.__name__ = name
    return fn


init = _unsupported("init")
init_trainer = _unsupported("init_trainer")
scale_loss = _unscale = _unsupported("scale_loss")
unscale = _unsupported("unscale")
convert_model = _unsupported("convert_model")
convert_symbol = _unsupported("convert_symbol")
convert_hybrid_block = _unsupported("convert_hybrid_block")


def list_lp16_ops(target_dtype="float16"):
    """Ops AMP would run in reduced precision: none in Loom."""
    return []


def list_fp32_ops(target_dtype="float16"):
    """Ops AMP would keep in float32: all of them in Loom."""
    from ... import _ops
    return sorted({info.name for info in _ops.all_ops().values()})
