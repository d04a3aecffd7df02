"""mx.contrib.amp: MXNet's automatic mixed precision. Loom's element-wise ops run on
float16, but its NN ops (convolution, FullyConnected, BatchNorm, ...) and update ops are
float32 only, so the entry points that would convert a model raise LoomError; importing the
module works, as MXNet programs often import it without using it."""
from .amp import init, init_trainer, scale_loss, unscale, convert_model, convert_symbol, \
    convert_hybrid_block, list_lp16_ops, list_fp32_ops  # noqa: F401
from . import amp  # noqa: F401
