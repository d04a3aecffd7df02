"""mx.contrib.amp: MXNet's automatic mixed precision. Loom computes in float32 (float16
arrays can be stored, cast and fed to Module, not run through fp16 kernels), so the
entry points that would convert a model raise LoomError; importing the module works, as
MXNet programs often import it without using it."""
from .amp import init, init_trainer, scale_loss, unscale, convert_model, convert_symbol, \
    convert_hybrid_block, list_lp16_ops, list_fp32_ops  # noqa: F401
from . import amp  # noqa: F401
