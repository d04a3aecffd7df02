"""MXNet 1.x's legacy symbolic RNN API (``mx.rnn``): cells, bucketing iterator, checkpoints."""
from . import rnn_cell
from .rnn_cell import *  # noqa: F401,F403
from . import rnn
from .rnn import *  # noqa: F401,F403
from . import io
from .io import *  # noqa: F401,F403
